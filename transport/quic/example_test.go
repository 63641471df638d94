package quic_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hetcomm/hetcomm/transport"
	_ "github.com/hetcomm/hetcomm/transport/quic" // registers transport.KindQUIC
)

// With the package imported, transport.Listen and transport.Dial serve
// QUIC like any other socket transport.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := transport.DefaultConfig()
	cfg.JobID = 42
	cfg.Secret = []byte("per-job secret from the launcher")

	cfg.Rank = 1
	ln, err := transport.Listen(transport.KindQUIC, "127.0.0.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	cfg.Rank = 0
	a, err := transport.Dial(ctx, transport.KindQUIC, ln.Addr().String(), 1, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := a.Send(ctx, transport.Header{Type: transport.MsgEager}, []byte("hello over quic")); err != nil {
		log.Fatal(err)
	}
	m, err := b.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from rank %d on %v\n", m.Payload, m.Header.Src, b.Kind())
	// Output: hello over quic from rank 0 on quic
}
