package quic

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/transport"
	"github.com/stretchr/testify/require"
)

// lossyProxy relays UDP datagrams between one client and server, dropping
// each one, either way, with probability loss.
type lossyProxy struct {
	front *net.UDPConn // where the client sends
	back  *net.UDPConn // connected to the server
	wg    sync.WaitGroup

	mu     sync.Mutex
	client *net.UDPAddr
	rng    *rand.Rand
	loss   float64
}

func newLossyProxy(t *testing.T, server string, loss float64, seed uint64) *lossyProxy {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	sa, err := net.ResolveUDPAddr("udp", server)
	require.NoError(t, err)
	back, err := net.DialUDP("udp", nil, sa)
	require.NoError(t, err)
	p := &lossyProxy{front: front, back: back, rng: rand.New(rand.NewPCG(seed, seed)), loss: loss}
	p.wg.Add(2)
	go p.relay(true)
	go p.relay(false)
	t.Cleanup(func() {
		_ = front.Close()
		_ = back.Close()
		p.wg.Wait()
	})
	return p
}

func (p *lossyProxy) Addr() string { return p.front.LocalAddr().String() }

func (p *lossyProxy) drop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < p.loss
}

func (p *lossyProxy) relay(toServer bool) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		if toServer {
			n, from, err := p.front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			p.mu.Lock()
			p.client = from
			p.mu.Unlock()
			if !p.drop() {
				_, _ = p.back.Write(buf[:n])
			}
			continue
		}
		n, err := p.back.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED after the server closed
		}
		p.mu.Lock()
		to := p.client
		p.mu.Unlock()
		if to != nil && !p.drop() {
			_, _ = p.front.WriteToUDP(buf[:n], to)
		}
	}
}

// Over a link losing 20% of its datagrams, a sender writes N messages on
// both channels, then MsgClose, then closes at once: the peer receives
// all N before the MsgClose (the barrier across streams), and the Close
// did not throw away what was still unacknowledged.
func TestCloseUnderLossDeliversEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard only
	defer cancel()
	// Close's linger is a budget for the retransmissions: on a starved
	// machine 5 s may not be enough, and this test is about what Close
	// waits for, not for how long.
	d := closeLinger
	t.Cleanup(func() { closeLinger = d }) // after the links' Close
	closeLinger = 2 * time.Minute
	a, b := linkPair(ctx, t, func(addr string) string { return newLossyProxy(t, addr, 0.2, 17).Addr() })

	const n = 200
	bulk := make([]byte, 32<<10)
	for i := range bulk {
		bulk[i] = byte(i * 7)
	}
	sent := make(chan error, 1)
	closed := make(chan error, 1)
	go func() {
		for i := range n {
			h := transport.Header{Type: transport.MsgEager, Tag: int32(i)}
			payload := []byte("eager")
			if i%2 == 1 {
				h.Type, payload = transport.MsgRndvData, bulk
			}
			if err := a.Send(ctx, h, payload); err != nil {
				sent <- err
				return
			}
		}
		sent <- a.Send(ctx, transport.Header{Type: transport.MsgClose}, nil)
		closed <- a.Close()
	}()

	got := make(map[int32]bool)
	for {
		m, err := b.Recv(ctx)
		require.NoError(t, err, "after %d of %d messages", len(got), n)
		if m.Header.Type == transport.MsgClose {
			break
		}
		require.False(t, got[m.Header.Tag], "tag %d twice", m.Header.Tag)
		got[m.Header.Tag] = true
		if m.Header.Type == transport.MsgRndvData {
			require.Equal(t, bulk, m.Payload)
		}
	}
	require.Len(t, got, n, "every message arrives before the MsgClose")
	require.NoError(t, <-sent)
	require.NoError(t, <-closed)
	// Not b.Recv's end: the one datagram with a's CONNECTION_CLOSE may be
	// lost too, and then b sees the idle timeout, 30 s later.
}

// MsgClose waits for the data written before it on another stream even
// without loss, and is passed on once; Close after MsgClose returns once
// the peer acknowledged it (not after closeLinger: the peer read it).
func TestCloseBarrierAcknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := linkPair(ctx, t, nil)

	require.NoError(t, a.Send(ctx, transport.Header{Type: transport.MsgRndvData, Tag: 1}, make([]byte, 1<<20)))
	require.NoError(t, a.Send(ctx, transport.Header{Type: transport.MsgClose}, nil))
	m, err := b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, transport.MsgRndvData, m.Header.Type)
	m, err = b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, transport.MsgClose, m.Header.Type)
	// The acknowledgement reaches a and is consumed there.
	select {
	case <-a.(*link).acked:
	case <-ctx.Done():
		t.Fatal("no close acknowledgement")
	}
	require.NoError(t, a.Close())
	_, err = b.Recv(ctx)
	require.ErrorIs(t, err, transport.ErrPeerClosed)
}
