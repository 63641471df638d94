package transport_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// Two ranks of one job on an in-process network: rank 1 listens, rank 0
// dials it, and they exchange one message each way. With transport.Dial and
// transport.Listen and a socket Kind the code is the same.
func Example() {
	ctx := context.Background()
	cfg := transport.DefaultConfig()
	cfg.JobID = 42
	cfg.Secret = []byte("per-job secret from the launcher")

	net := transport.NewMemNetwork(1)
	lcfg := cfg
	lcfg.Rank = 1
	ln, err := net.Listen("rank-1", lcfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	dcfg := cfg
	dcfg.Rank = 0
	a, err := net.Dial(ctx, "rank-1", 1, dcfg) // expect rank 1 at that address
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := a.Send(ctx, transport.Header{Type: transport.MsgEager, Comm: 0, Tag: 7}, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	m, err := b.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d got %q (%s, tag %d) from rank %d\n", 1, m.Payload, m.Header.Type, m.Header.Tag, b.Peer())

	if err := b.Send(ctx, transport.Header{Type: transport.MsgEager, Tag: 8}, []byte("hi back")); err != nil {
		log.Fatal(err)
	}
	m, err = a.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d got %q from rank %d\n", 0, m.Payload, m.Header.Src)
	// Output:
	// rank 1 got "hello" (eager, tag 7) from rank 0
	// rank 0 got "hi back" from rank 1
}

// A heterogeneous network on one machine, without root: rank 0 reaches
// rank 1 over an emulated 10 MB/s link with 20 ms of one-way delay. The same
// ShapeConfig wraps real links with transport.Shape or
// transport.ShapeNetwork.
func ExampleMemNetwork_SetShape() {
	ctx := context.Background()
	cfg := transport.DefaultConfig()
	cfg.JobID = 42
	cfg.Secret = []byte("per-job secret from the launcher")

	n := transport.NewMemNetwork(1)
	slow := transport.ShapeConfig{Rate: 10e6, Delay: 20 * time.Millisecond}
	if err := n.SetShape(0, 1, slow); err != nil {
		log.Fatal(err)
	}
	lcfg := cfg
	lcfg.Rank = 1
	ln, err := n.Listen("rank-1", lcfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	dcfg := cfg
	dcfg.Rank = 0
	a, err := n.Dial(ctx, "rank-1", 1, dcfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	start := time.Now()
	if err := a.Send(ctx, transport.Header{Type: transport.MsgRndvData}, make([]byte, 1_000_000)); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Recv(ctx); err != nil {
		log.Fatal(err)
	}
	// 1 MB at 10 MB/s is 100 ms, plus 20 ms of delay.
	fmt.Println("took at least 120 ms:", time.Since(start) >= 120*time.Millisecond)
	// Output:
	// took at least 120 ms: true
}
