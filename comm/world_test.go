package comm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/internal/freeport"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// freePort returns a loopback address that was free a moment ago.
func freePort(t testing.TB) string {
	addr, err := freeport.Loopback()
	require.NoError(t, err)
	return addr
}

// startWorld starts n ranks in this process over the named transport
// ("mem" or a socket transport on loopback) and returns their world
// communicators, closed at the end of the test.
func startWorld(t testing.TB, n int, transportName string, tweak func(*Config)) []*Comm {
	t.Helper()
	return startWorldOn(t, n, transportName, nil, tweak)
}

// startWorldOn is startWorld on a given mem network (nil: a new one).
func startWorldOn(t testing.TB, n int, transportName string, netw transport.Network, tweak func(*Config)) []*Comm {
	t.Helper()
	coord := "coord"
	if transportName == "mem" {
		if netw == nil {
			netw = transport.NewMemNetwork(1)
		}
	} else {
		coord = freePort(t)
	}
	cache := t.TempDir() // models a test probes stay out of the user's cache
	return commtest.Start(t, n, func(b *bootstrap.Bootstrap) (*Comm, error) {
		b.Coord, b.Transport = coord, transportName
		cfg := &Config{Bootstrap: b, Network: netw, Probe: netprobe.ModeOff, CacheDir: cache} // probe tests turn it on
		if tweak != nil {
			tweak(cfg)
		}
		return Init(context.Background(), cfg)
	})
}

func TestInitSingleton(t *testing.T) {
	c, err := Init(context.Background(), &Config{Bootstrap: &bootstrap.Bootstrap{Rank: 0, Size: 1}})
	require.NoError(t, err)
	require.Equal(t, 0, c.Rank())
	require.Equal(t, 1, c.Size())
	ctx := context.Background()
	require.NoError(t, c.Barrier(ctx))
	out, err := c.Alltoallv(ctx, [][]byte{[]byte("self")})
	require.NoError(t, err)
	require.Equal(t, "self", string(out[0]))
	// A world of one has a timeline too (hetrun -n 1 ./examples/alltoallv).
	pred, meas, err := c.Timeline(ctx)
	require.NoError(t, err)
	require.Nil(t, pred)
	require.Equal(t, 1, meas.Ranks)
	require.Empty(t, meas.Transfers)
	require.NoError(t, c.Send(ctx, 0, 3, []byte("to me")))
	got, st, err := c.Recv(ctx, AnySource, AnyTag)
	require.NoError(t, err)
	require.Equal(t, "to me", string(got))
	require.Equal(t, Status{Source: 0, Tag: 3, Len: 5}, st)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Barrier(ctx), net.ErrClosed)
}

func TestPointToPoint(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			comms := startWorld(t, 3, tr, func(c *Config) { c.EagerLimit = 1024 })
			ctx := context.Background()
			big := make([]byte, 1<<20)
			for i := range big {
				big[i] = byte(i * 7)
			}
			commtest.OnAll(t, comms, func(c *Comm) error {
				switch c.Rank() {
				case 0:
					if err := c.Send(ctx, 1, 5, []byte("small")); err != nil {
						return err
					}
					if err := c.Send(ctx, 1, 6, big); err != nil {
						return err
					}
					return c.Send(ctx, 2, 0, nil)
				case 1:
					// Receive out of order by tag: the large one first.
					got, st, err := c.Recv(ctx, 0, 6)
					if err != nil {
						return err
					}
					if st.Len != len(big) || string(got) != string(big) {
						return fmt.Errorf("large message corrupted")
					}
					got, st, err = c.Recv(ctx, AnySource, AnyTag)
					if err != nil {
						return err
					}
					if string(got) != "small" || st.Source != 0 || st.Tag != 5 {
						return fmt.Errorf("small: got %q %+v", got, st)
					}
				case 2:
					got, st, err := c.Recv(ctx, 0, 0)
					if err != nil {
						return err
					}
					if len(got) != 0 || st.Len != 0 {
						return fmt.Errorf("empty message: got %d bytes", len(got))
					}
				}
				return nil
			})
		})
	}
}

// TestProcNull: sends to ProcNull and receives from it complete at once;
// a ring with open ends exchanges halos with one Sendrecv per rank.
func TestProcNull(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	commtest.OnAll(t, comms, func(c *Comm) error {
		me, n := c.Rank(), c.Size()
		up, down := me-1, me+1
		if up < 0 {
			up = ProcNull
		}
		if down == n {
			down = ProcNull
		}
		buf := make([]byte, 8)
		got, st, err := c.SendrecvInto(ctx, []byte{byte(me)}, down, 5, buf, up, 5)
		if err != nil {
			return err
		}
		if up == ProcNull {
			if len(got) != 0 || st != (Status{Source: ProcNull, Tag: AnyTag}) {
				return fmt.Errorf("from ProcNull: %v %+v", got, st)
			}
		} else if len(got) != 1 || got[0] != byte(up) || st.Source != up || &got[0] != &buf[0] {
			return fmt.Errorf("from rank %d: %v %+v", up, got, st)
		}
		if err := c.Send(ctx, ProcNull, 1, []byte("x")); err != nil {
			return err
		}
		if data, st, err := c.Recv(ctx, ProcNull, AnyTag); err != nil || len(data) != 0 || st.Source != ProcNull {
			return fmt.Errorf("Recv(ProcNull): %v %+v %v", data, st, err)
		}
		if st, err := c.Probe(ctx, ProcNull, 3); err != nil || st.Source != ProcNull {
			return fmt.Errorf("Probe(ProcNull): %+v %v", st, err)
		}
		r := c.Irecv(ctx, ProcNull, 1)
		if st, err := r.Wait(ctx); err != nil || st.Source != ProcNull || r.Data() == nil {
			return fmt.Errorf("Irecv(ProcNull): %+v %v", st, err)
		}
		if _, err := c.Isend(ctx, ProcNull, 1, nil).Wait(ctx); err != nil {
			return err
		}
		if _, err := c.Bcast(ctx, ProcNull, nil); err == nil {
			return fmt.Errorf("Bcast from root ProcNull: no error")
		}
		return c.Barrier(ctx)
	})
}

// TestSendrecvBadArgs: a bad destination or tag fails Sendrecv at once,
// with nothing left waiting.
func TestSendrecvBadArgs(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := comms[1]
	var ae *ArgError
	_, _, err := c.Sendrecv(ctx, []byte("a"), -7, 1, 0, 1)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "dst", ae.Arg)
	_, _, err = c.Sendrecv(ctx, []byte("a"), 0, -3, 0, 1)
	require.ErrorAs(t, err, &ae)
	_, _, err = c.Sendrecv(ctx, []byte("a"), 0, 1, 9, 1)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "src", ae.Arg)
	require.NoError(t, ctx.Err(), "Sendrecv waited instead of failing at once")
	// Nothing was sent: rank 0 has no message to probe.
	ok, _, err := comms[0].Iprobe(AnySource, AnyTag)
	require.NoError(t, err)
	require.False(t, ok)
}

// TestRails: with two rails every pair talks over a RailSet of two links,
// large messages are split across both, and every byte arrives.
func TestRails(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			rails := []string{"127.0.0.1", "127.0.0.2"}
			if tr == "mem" {
				rails = []string{"slow", "fast"}
			}
			comms := startWorld(t, 3, tr, func(c *Config) { c.Bootstrap.Rails = rails })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sizes := []int{0, 10, 70000, 4 << 20}
			commtest.OnAll(t, comms, func(c *Comm) error {
				for _, size := range sizes {
					send := make([][]byte, 3)
					for j := range send {
						send[j] = pattern(c.Rank(), j, size, size)
					}
					got, err := c.Alltoallv(ctx, send)
					if err != nil {
						return err
					}
					for i := range got {
						if !bytes.Equal(got[i], pattern(i, c.Rank(), size, size)) {
							return fmt.Errorf("%d bytes from rank %d: corrupt", size, i)
						}
					}
				}
				return nil
			})
			for r, c := range comms {
				for p, l := range c.w.links {
					if p == r {
						continue
					}
					rs, ok := l.(*transport.RailSet)
					require.True(t, ok, "rank %d's link to %d is a %T", r, p, l)
					st := rs.Stats()
					require.Len(t, st, 2)
					require.NotZero(t, st[0].Bytes, "rank %d to %d: nothing on rail 0", r, p)
					require.NotZero(t, st[1].Bytes, "rank %d to %d: nothing on rail 1", r, p)
				}
			}
		})
	}
}

// TestRailsProbed: the probe measures each rail in turn; the model lists
// both, its top-level costs sum them up under the policy, and every
// RailSet plans with the measured costs.
func TestRailsProbed(t *testing.T) {
	dir := t.TempDir()
	comms := startWorld(t, 3, "tcp", func(c *Config) {
		c.Bootstrap.Rails = []string{"127.0.0.1", "127.0.0.2"}
		c.Probe = netprobe.ModeFull
		c.CacheDir = dir
		c.ProbeConfig = netprobe.Config{MaxBytes: 256 << 10, MinTime: 5 * time.Millisecond, RepBudget: 20 * time.Millisecond}
	})
	m := comms[0].Model()
	require.NotNil(t, m)
	require.Len(t, m.Rails, 2)
	for r, c := range comms {
		require.Equal(t, m, c.Model(), "rank %d has another model", r)
		for p, rs := range c.w.railSets {
			if p == r {
				continue
			}
			want, measured := netprobe.RailCosts(m, r, p, len(rs.Stats()))
			require.True(t, measured)
			for i, st := range rs.Stats() {
				require.Equal(t, want[i], st.Cost, "rank %d to %d, rail %d", r, p, i)
			}
			e := netprobe.EffectiveRails(m, r, p, transport.RailAuto)
			require.Equal(t, e.Bandwidth, m.Bandwidth[r][p])
			require.GreaterOrEqual(t, m.Bandwidth[r][p], 0.99*max(m.Rails[0].Bandwidth[r][p], m.Rails[1].Bandwidth[r][p]),
				"the rails together are no faster than the better one")
		}
	}
}

// TestStartUnderFlood: a thousand idle connections held open on the
// coordinator's port before the other ranks join do not stop a 4-rank
// start (they used to: 64 handshake slots, each held for 10 s, and a
// timed-out handshake was taken for a wrong secret).
func TestStartUnderFlood(t *testing.T) {
	coord := freePort(t)
	stop := make(chan struct{})
	ready := make(chan struct{})
	var conns []net.Conn
	go func() {
		for len(conns) < 1000 {
			c, err := net.DialTimeout("tcp", coord, time.Second)
			if err != nil {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			conns = append(conns, c)
		}
		close(ready)
	}()
	var took time.Duration
	comms := commtest.Start(t, 4, func(b *bootstrap.Bootstrap) (*Comm, error) {
		b.Coord, b.Transport = coord, "tcp"
		if b.Rank != 0 { // rank 0 listens; the others join behind the flood
			<-ready
		}
		start := time.Now()
		c, err := Init(context.Background(), &Config{Bootstrap: b, Probe: netprobe.ModeOff})
		if b.Rank == 1 {
			took = time.Since(start)
		}
		return c, err
	})
	close(stop)
	<-ready
	for _, c := range conns {
		_ = c.Close()
	}
	t.Logf("rank 1 joined in %v beside %d idle connections", took, len(conns))
	commtest.OnAll(t, comms, func(c *Comm) error { return c.Barrier(context.Background()) })
}
