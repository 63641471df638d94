package rudp_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/hetcomm/hetcomm/transport/internal/rudp"
)

// A server that echoes a stream back, and a client that half-closes after
// its request and reads the echo until EOF.
func Example() {
	ctx := context.Background()
	ln, err := rudp.Listen("udp", "127.0.0.1:0", rudp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo until the client's FIN
	}()

	c, err := rudp.Dial(ctx, "udp", ln.Addr().String(), rudp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello over rudp")); err != nil {
		log.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		log.Fatal(err)
	}
	reply, err := io.ReadAll(c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	// Output: hello over rudp
}

// The in-memory network: a lossy link for deterministic tests.
func ExampleMemNetwork() {
	nw := rudp.NewMemNetwork(rudp.MemConfig{Seed: 1, MTU: 1400, Link: rudp.MemLink{Loss: 0.2}})
	spc, _ := nw.Listen("127.0.0.1:9000")
	cpc, _ := nw.Listen("127.0.0.2:0")
	ln, _ := rudp.ListenPacketConn(spc, rudp.Config{})
	defer ln.Close()
	go func() {
		c, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(make([]byte, 1<<20))
	}()
	c, err := rudp.DialPacketConn(context.Background(), cpc, ln.Addr(), rudp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	n, err := io.Copy(io.Discard, c)
	fmt.Println(n, err, c.Stats().MaxPacketSize)
	// Output: 1048576 <nil> 1400
}
