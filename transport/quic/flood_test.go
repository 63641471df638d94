package quic

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/transport"
	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

// TestIdleFlood: a thousand QUIC connections that finish QUIC's handshake
// and then say nothing do not keep a rank out: its link is accepted while
// they are all held, and the listener drops each of them after
// PreAuthTimeout rather than the handshake timeout (issue 17: with 64
// handshake slots of 10 s each, such a flood stopped a start-up).
func TestIdleFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 QUIC connections (-short)")
	}
	cfg := testConfig(1)
	cfg.PreAuthTimeout = 500 * time.Millisecond
	ln, err := transport.Listen(transport.KindQUIC, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })

	// The intruder: a job of its own, so a certificate the listener takes
	// (any certificate) but no secret.
	bad := testConfig(0)
	bad.Secret = []byte("not the job's secret, but long enough")
	tc, err := transport.TLSConfig(&bad, false)
	require.NoError(t, err)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { _ = tr.Close(); _ = udp.Close() })
	addr, err := net.ResolveUDPAddr("udp", ln.Addr().String())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a bound for a starved machine, not a measure
	defer cancel()
	const flood = 1000
	idle := make([]*quicgo.Conn, 0, flood)
	var established time.Time
	for len(idle) < flood {
		// Dial in batches: a batch completes well within PreAuthTimeout
		// even on a loaded machine, so most of the flood is held at once.
		batch := make(chan *quicgo.Conn, 50)
		for range cap(batch) {
			go func() {
				c, err := tr.Dial(ctx, addr, tc, &quicgo.Config{HandshakeIdleTimeout: 5 * time.Second, MaxIdleTimeout: time.Minute})
				if err != nil {
					batch <- nil
					return
				}
				batch <- c
			}()
		}
		for range cap(batch) {
			if c := <-batch; c != nil {
				idle = append(idle, c)
			}
		}
		established = time.Now()
		require.NoError(t, ctx.Err(), "opened only %d idle connections", len(idle))
	}

	// A real rank gets through beside them.
	start := time.Now()
	type accepted struct {
		l   transport.Link
		err error
	}
	done := make(chan accepted, 1)
	go func() {
		l, err := ln.Accept(ctx)
		done <- accepted{l, err}
	}()
	a, err := transport.Dial(ctx, transport.KindQUIC, ln.Addr().String(), 1, testConfig(0))
	require.NoError(t, err)
	b := <-done
	require.NoError(t, b.err)
	took := time.Since(start)
	require.Equal(t, 0, b.l.Peer())
	_ = a.Close()
	_ = b.l.Close()

	// Every idle connection is closed by the listener, PreAuthTimeout
	// after it was accepted: wait for each (an event, not a clock).
	for i, c := range idle {
		select {
		case <-c.Context().Done():
		case <-ctx.Done():
			t.Fatalf("idle connection %d of %d still open %v after the last was opened", i, len(idle), time.Since(established))
		}
	}
	t.Logf("a rank joined in %v beside %d idle QUIC connections; all were dropped within %v of the last one opening",
		took, len(idle), time.Since(established))
}
