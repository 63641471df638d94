package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// Two ranks joined by two rails, a slow low-latency one and a fast one,
// each an emulated network of its own: one RailSet per end, built over
// one link per rail (rail i to rail i). The model says how a message is
// sent and when it should arrive.
func ExampleRailSet() {
	ctx := context.Background()
	costs := []transport.RailCost{
		{Latency: 200e-6, Bandwidth: 5e6}, // rail 0: 5 MB/s, 0.2 ms
		{Latency: 2e-3, Bandwidth: 20e6},  // rail 1: 20 MB/s, 2 ms
	}
	model := transport.RailModel{Costs: costs, Policy: transport.RailAuto}
	for _, m := range []int64{100, 64 << 10, 4 << 20} {
		fmt.Printf("%8d B: %v, %.1f ms\n", m, model.Split(m), 1e3*model.Time(m))
	}

	cfg := transport.DefaultConfig()
	cfg.JobID, cfg.Secret = 42, []byte("per-job secret from the launcher")
	routers := []*transport.RailRouter{transport.NewRailRouter(nil), transport.NewRailRouter(nil)}
	var a, b []transport.Link
	for i, c := range costs {
		n := transport.NewMemNetwork(uint64(i))
		_ = n.SetDefaultShape(transport.ShapeConfig{Rate: c.Bandwidth, Delay: time.Duration(c.Latency * 1e9)})
		lc, dc := cfg, cfg
		lc.Rank, lc.Alloc = 1, routers[1].Alloc // parts land in place
		dc.Rank, dc.Alloc = 0, routers[0].Alloc
		ln, err := n.Listen("rank-1", lc)
		if err != nil {
			log.Fatal(err)
		}
		defer ln.Close()
		l0, err := n.Dial(ctx, "rank-1", 1, dc)
		if err != nil {
			log.Fatal(err)
		}
		l1, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		a, b = append(a, l0), append(b, l1)
	}
	ra, err := transport.NewRailSet(a, transport.RailConfig{RailModel: model, Router: routers[0]})
	if err != nil {
		log.Fatal(err)
	}
	defer ra.Close()
	rb, err := transport.NewRailSet(b, transport.RailConfig{RailModel: model, Router: routers[1]})
	if err != nil {
		log.Fatal(err)
	}
	defer rb.Close()

	big := bytes.Repeat([]byte("rails!"), 1<<20)
	go func() { _ = ra.Send(ctx, transport.Header{Type: transport.MsgRndvData, Tag: 1}, big) }()
	m, err := rb.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("got %d bytes, intact: %v\n", len(m.Payload), bytes.Equal(m.Payload, big))
	for _, st := range ra.Stats() {
		fmt.Printf("rail %d carried %.0f%%\n", st.Rail, 100*float64(st.Bytes)/float64(len(big)))
	}
	// Output:
	//      100 B: [{0 100}], 0.2 ms
	//    65536 B: [{0 20307} {1 45229}], 4.3 ms
	//  4194304 B: [{0 846060} {1 3348244}], 169.4 ms
	// got 6291456 bytes, intact: true
	// rail 0 carried 20%
	// rail 1 carried 80%
}
