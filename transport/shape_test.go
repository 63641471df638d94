package transport

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// The pacer is pure given the time: same seed, same schedule.
func TestPacerDeterministic(t *testing.T) {
	s := ShapeConfig{Rate: 1e6, Delay: 10 * time.Millisecond, Loss: 0.2, Seed: 42}
	t0 := time.Unix(1000, 0)
	run := func(s ShapeConfig) []time.Duration {
		p := newPacer(s, 3)
		var out []time.Duration
		for i := range 50 {
			d, a := p.schedule(t0.Add(time.Duration(i)*time.Millisecond), 1000*i)
			out = append(out, d.Sub(t0), a.Sub(t0))
		}
		return out
	}
	a, b := run(s), run(s)
	require.Equal(t, a, b)
	s.Seed = 43
	require.NotEqual(t, a, run(s), "another seed should lose other segments")

	// Without loss: pure rate and delay arithmetic.
	p := newPacer(ShapeConfig{Rate: 1e6, Delay: 5 * time.Millisecond}, 0)
	d, a2 := p.schedule(t0, 1e6-HeaderSize)
	require.Equal(t, time.Second, d.Sub(t0))
	require.Equal(t, time.Second+5*time.Millisecond, a2.Sub(t0))
	// A second message sent at once queues behind the first.
	d, _ = p.schedule(t0, 1e6-HeaderSize)
	require.Equal(t, 2*time.Second, d.Sub(t0))
}

// Loss never reorders: arrival times are monotonic.
func TestPacerNoOvertaking(t *testing.T) {
	p := newPacer(ShapeConfig{Rate: 1e8, Delay: time.Millisecond, Loss: 0.3, Seed: 1}, 0)
	t0 := time.Unix(0, 0)
	var last time.Time
	for i := range 1000 {
		_, a := p.schedule(t0.Add(time.Duration(i)*time.Microsecond), 100+i%5000)
		require.False(t, a.Before(last))
		last = a
	}
}

// shapedPair returns a mem link pair whose a->b direction is shaped.
func shapedPair(t *testing.T, s ShapeConfig) (a, b Link) {
	n := NewMemNetwork(9)
	require.NoError(t, n.SetShape(0, 1, s))
	f := netFactory{newNet: func(testing.TB) Network { return n }, addr: func(r int) string { return "r" }}
	return pair(t, f, testConfig(0), testConfig(1))
}

// Rates and delays are honoured: a 2 MB message at 10 MB/s with 50 ms delay
// takes about 250 ms; two concurrent ones share the rate. Only loose bounds
// are checked (the machine may be loaded): the emulation must never be
// faster than the link, and not grossly slower.
func TestShapeTiming(t *testing.T) {
	s := ShapeConfig{Rate: 10e6, Delay: 50 * time.Millisecond}
	const size = 2_000_000
	check := func(t *testing.T, a, b Link, msgs int) {
		ctx := testCtx(t)
		start := time.Now()
		var g errgroup.Group
		for range msgs {
			g.Go(func() error { return a.Send(ctx, Header{Type: MsgRndvData}, pattern(size)) })
		}
		for range msgs {
			m, err := b.Recv(ctx)
			require.NoError(t, err)
			require.True(t, bytes.Equal(pattern(size), m.Payload))
		}
		require.NoError(t, g.Wait())
		el := time.Since(start)
		ideal := time.Duration(float64(msgs*(size+HeaderSize))/s.Rate*float64(time.Second)) + s.Delay
		t.Logf("%d x %d B: %v (ideal %v)", msgs, size, el, ideal)
		require.GreaterOrEqual(t, el, ideal-time.Millisecond)
		require.Less(t, el, ideal+2*time.Second)
	}
	t.Run("mem/one", func(t *testing.T) {
		a, b := shapedPair(t, s)
		check(t, a, b, 1)
	})
	t.Run("mem/concurrent", func(t *testing.T) {
		a, b := shapedPair(t, s)
		check(t, a, b, 3)
	})
	t.Run("tcp/one", func(t *testing.T) {
		a, b := pair(t, socketFactory(KindTCP), testConfig(0), testConfig(1))
		sa, err := Shape(a, s)
		require.NoError(t, err)
		check(t, sa, b, 1)
	})
	t.Run("tcp/concurrent", func(t *testing.T) {
		a, b := pair(t, socketFactory(KindTCP), testConfig(0), testConfig(1))
		sa, err := Shape(a, s)
		require.NoError(t, err)
		check(t, sa, b, 3)
	})
}

func TestShapeLatency(t *testing.T) {
	// Small messages see the delay, not the rate.
	a, b := shapedPair(t, ShapeConfig{Rate: 1e9, Delay: 300 * time.Millisecond})
	ctx := testCtx(t)
	start := time.Now()
	require.NoError(t, a.Send(ctx, Header{Type: MsgHeartbeat}, nil))
	require.Less(t, time.Since(start), 250*time.Millisecond, "Send should not wait for the delay")
	_, err := b.Recv(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}

func TestShapeValidate(t *testing.T) {
	n := NewMemNetwork(0)
	require.ErrorIs(t, n.SetDefaultShape(ShapeConfig{Loss: 1}), ErrBadConfig)
	require.ErrorIs(t, n.SetShape(0, 1, ShapeConfig{Rate: -1}), ErrBadConfig)
	_, err := ShapeNetwork(tcpNetwork{}, ShapeConfig{Delay: -1})
	require.ErrorIs(t, err, ErrBadConfig)
}

// A shaped link that is cancelled mid-transfer closes itself.
func TestShapeCancelMidSend(t *testing.T) {
	a, _ := shapedPair(t, ShapeConfig{Rate: 1e6})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := a.Send(ctx, Header{Type: MsgRndvData}, make([]byte, 1e6))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	err = a.Send(context.Background(), Header{Type: MsgEager}, nil)
	require.ErrorIs(t, err, ErrClosed)
}

func TestLossyPacketConn(t *testing.T) {
	recv, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer recv.Close()
	send, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer send.Close()
	count := func(seed uint64) int {
		lossy := LossyPacketConn(send, 0.2, seed)
		got := 0
		for i := range 200 { // few enough to fit the receive buffer
			_, err := lossy.WriteTo([]byte{byte(i)}, recv.LocalAddr())
			require.NoError(t, err)
		}
		buf := make([]byte, 16)
		for {
			_ = recv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := recv.ReadFrom(buf); err != nil {
				return got
			}
			got++
		}
	}
	a := count(5)
	require.InDelta(t, 160, a, 30, "about 20%% of 200 datagrams dropped")
	require.Equal(t, a, count(5), "the same seed drops the same datagrams")
}
