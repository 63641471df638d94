package transport

import (
	"context"
	"testing"
)

// Benchmarks of a RailSet over two loopback TCP rails against one plain
// TCP link: the round trip of an 8-byte message (the rail layer's
// overhead) and a 4 MiB stream.
//
//	go test -run '^$' -bench Rail -count 5 ./transport/

func benchRailRig(b *testing.B, p RailPolicy, allocB func(Header) []byte) *railRig {
	costs := []RailCost{{Latency: 20e-6, Bandwidth: 1e9}, {Latency: 20e-6, Bandwidth: 2e9}}
	return newRailRig(b, rigOptions{
		model:  RailModel{Costs: costs, Policy: p},
		allocB: allocB,
		rails:  func(t testing.TB, i int) (Network, string) { return tcpRail(t, i), "127.0.0.1:0" },
	})
}

func BenchmarkRailRoundTrip(b *testing.B) {
	b.Run("link=tcp/bytes=8", func(b *testing.B) { benchRoundTrip(b, socketFactory(KindTCP)) })
	for _, p := range []RailPolicy{RailSingle, RailMux, RailAuto} {
		b.Run("rails=2/policy="+p.String()+"/bytes=8", func(b *testing.B) {
			g := benchRailRig(b, p, nil)
			ctx := context.Background()
			msg := make([]byte, 8)
			b.ReportAllocs()
			for b.Loop() {
				if err := g.a.Send(ctx, Header{Type: MsgEager}, msg); err != nil {
					b.Fatal(err)
				}
				m, err := g.b.Recv(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.b.Send(ctx, Header{Type: MsgEager}, m.Payload); err != nil {
					b.Fatal(err)
				}
				if _, err := g.a.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRailBandwidth(b *testing.B) {
	b.Run("link=tcp/bytes=4MiB", func(b *testing.B) { benchBandwidth(b, socketFactory(KindTCP)) })
	for _, p := range []RailPolicy{RailSingle, RailAgg} {
		b.Run("rails=2/policy="+p.String()+"/bytes=4MiB", func(b *testing.B) {
			rbuf := make([]byte, benchBig)
			g := benchRailRig(b, p, func(Header) []byte { return rbuf })
			ctx := context.Background()
			p := pattern(benchBig)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					m, err := g.b.Recv(ctx)
					if err != nil {
						return
					}
					if m.Header.Type == MsgClose {
						return
					}
				}
			}()
			b.SetBytes(benchBig)
			for b.Loop() {
				if err := g.a.Send(ctx, Header{Type: MsgRndvData}, p); err != nil {
					b.Fatal(err)
				}
			}
			_ = g.a.Send(ctx, Header{Type: MsgClose}, nil)
			<-done
		})
	}
}
