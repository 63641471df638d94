package rudp

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loopbackPair dials a connection over real UDP sockets on 127.0.0.1.
func loopbackPair(tb testing.TB, cfg Config) (client, server *Conn) {
	tb.Helper()
	ln, err := Listen("udp", "127.0.0.1:0", cfg)
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := make(chan *Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	client, err = Dial(ctx, "udp", ln.Addr().String(), cfg)
	require.NoError(tb, err)
	server = <-ch
	require.NotNil(tb, server)
	tb.Cleanup(func() {
		client.Close()
		server.Close()
		ln.Close()
	})
	return client, server
}

var benchSizes = []struct {
	name string
	n    int
}{
	{"bytes=64KiB", 64 << 10},
	{"bytes=1MiB", 1 << 20},
	{"bytes=4MiB", 4 << 20},
}

// BenchmarkThroughput measures one direction with the reader draining.
func BenchmarkThroughput(b *testing.B) {
	nets := []struct {
		name string
		pair func(testing.TB) (*Conn, *Conn)
	}{
		{"net=loopback", func(tb testing.TB) (*Conn, *Conn) { return loopbackPair(tb, DefaultConfig()) }},
		{"net=loopback/mtu=1400", func(tb testing.TB) (*Conn, *Conn) {
			cfg := DefaultConfig()
			cfg.MaxPacketSize = 1400
			return loopbackPair(tb, cfg)
		}},
		{"net=mem", func(tb testing.TB) (*Conn, *Conn) {
			c, s, _ := memPair(tb, MemConfig{Seed: 1}, DefaultConfig())
			return c, s
		}},
		{"net=mem/mtu=1400", func(tb testing.TB) (*Conn, *Conn) {
			c, s, _ := memPair(tb, MemConfig{Seed: 1, MTU: 1400}, DefaultConfig())
			return c, s
		}},
	}
	for _, nw := range nets {
		for _, sz := range benchSizes {
			b.Run(nw.name+"/"+sz.name, func(b *testing.B) {
				c, s := nw.pair(b)
				var got atomic.Int64
				done := make(chan struct{})
				go func() {
					defer close(done)
					buf := make([]byte, 1<<20)
					for {
						n, err := s.Read(buf)
						got.Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
				buf := make([]byte, sz.n)
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				var sent int64
				for b.Loop() {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
					sent += int64(sz.n)
				}
				for got.Load() < sent {
					time.Sleep(100 * time.Microsecond)
				}
				st := c.Stats()
				b.ReportMetric(float64(st.Retransmissions), "rtx")
				c.Close()
				<-done
			})
		}
	}
}

// BenchmarkRoundTrip measures a request/response of n bytes each way.
func BenchmarkRoundTrip(b *testing.B) {
	for _, nw := range []string{"net=loopback", "net=mem"} {
		for _, n := range []int{8, 1024, 16 << 10} {
			b.Run(fmt.Sprintf("%s/bytes=%d", nw, n), func(b *testing.B) {
				var c, s *Conn
				if nw == "net=loopback" {
					c, s = loopbackPair(b, DefaultConfig())
				} else {
					c, s, _ = memPair(b, MemConfig{Seed: 1}, DefaultConfig())
				}
				go func() { // echo
					buf := make([]byte, n)
					for {
						if _, err := io.ReadFull(s, buf); err != nil {
							return
						}
						if _, err := s.Write(buf); err != nil {
							return
						}
					}
				}()
				buf := make([]byte, n)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkLossyThroughput measures 4 MiB writes across the in-memory
// network with random loss in both directions (data and acknowledgements).
func BenchmarkLossyThroughput(b *testing.B) {
	for _, mtu := range []int{1400, MaxPacketSizeLimit} {
		for _, loss := range []int{0, 5, 20} {
			b.Run(fmt.Sprintf("mtu=%d/loss=%d%%/bytes=4MiB", mtu, loss), func(b *testing.B) {
				c, s, _ := memPair(b, MemConfig{Seed: 1, MTU: mtu, Link: MemLink{Loss: float64(loss) / 100}}, DefaultConfig())
				var got atomic.Int64
				go func() {
					buf := make([]byte, 1<<20)
					for {
						n, err := s.Read(buf)
						got.Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
				buf := make([]byte, 4<<20)
				b.SetBytes(int64(len(buf)))
				var sent int64
				for b.Loop() {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
					sent += int64(len(buf))
					for got.Load() < sent { // count delivery, not queueing
						time.Sleep(50 * time.Microsecond)
					}
				}
				st := c.Stats()
				b.ReportMetric(float64(st.Retransmissions)/float64(st.DataPacketsSent), "rtx/pkt")
			})
		}
	}
}

// BenchmarkHandshake measures opening a connection: Dial until the
// handshake completes and Accept returns it, then an abortive Close of both
// ends (Linger < 0, so no FIN exchange is timed).
func BenchmarkHandshake(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Linger = -1
	for _, nw := range []string{"net=loopback", "net=mem"} {
		b.Run(nw, func(b *testing.B) {
			var ln *Listener
			var mem *MemNetwork
			var err error
			if nw == "net=loopback" {
				ln, err = Listen("udp", "127.0.0.1:0", cfg)
			} else {
				mem = NewMemNetwork(MemConfig{Seed: 1})
				var pc *MemPacketConn
				pc, err = mem.Listen("127.0.0.1:9000")
				if err == nil {
					ln, err = ListenPacketConn(pc, cfg)
				}
			}
			require.NoError(b, err)
			defer ln.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var c *Conn
				if mem == nil {
					c, err = Dial(ctx, "udp", ln.Addr().String(), cfg)
				} else {
					pc, lerr := mem.Listen("127.0.0.2:0")
					require.NoError(b, lerr)
					c, err = DialPacketConn(ctx, pc, ln.Addr(), cfg)
				}
				if err != nil {
					b.Fatal(err)
				}
				s, err := ln.Accept(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Close()
				_ = s.Close()
			}
		})
	}
}

// BenchmarkAuth measures sealing and checking one control packet (an
// authenticated SYN, the largest).
func BenchmarkAuth(b *testing.B) {
	key := newAuthKey([]byte("0123456789abcdef0123456789abcdef"))
	buf := make([]byte, maxCtrlLen)
	syn := buildSYN(buf, header{typ: typeSYN, wnd: 100}, synInfo{srcID: 7, maxPacket: 1400}, key)
	var h header
	if _, err := decodePacket(syn, &h); err != nil {
		b.Fatal(err)
	}
	b.Run("op=sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			key.sign(syn)
		}
	})
	b.Run("op=verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !key.check(&h, syn) {
				b.Fatal("does not verify")
			}
		}
	})
}
