package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/transport"
)

// connectAll runs Connect for every rank of boots at once over netw.
func connectAll(t *testing.T, netw transport.Network, boots []*Bootstrap, cfg Config) ([]*Mesh, []error) {
	t.Helper()
	meshes := make([]*Mesh, len(boots))
	errs := make([]error, len(boots))
	var wg sync.WaitGroup
	for r, b := range boots {
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			meshes[r], errs[r] = Connect(context.Background(), b, netw, cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range meshes {
			if m != nil {
				m.Close()
			}
		}
	})
	return meshes, errs
}

func memBoots(n int, rails []string, timeout time.Duration) []*Bootstrap {
	boots := make([]*Bootstrap, n)
	for r := range boots {
		boots[r] = &Bootstrap{Rank: r, Size: n, Coord: "coord", Secret: []byte("s"), Job: "mesh-test",
			Transport: "mem", Timeout: timeout, Rails: rails}
	}
	return boots
}

// TestConnectMesh: every pair of ranks gets one working link, a RailSet
// where the two have several rails, and every rank the same directory.
func TestConnectMesh(t *testing.T) {
	for _, rails := range []int{1, 2} {
		t.Run(fmt.Sprintf("rails=%d", rails), func(t *testing.T) {
			const n = 4
			var railNames []string
			if rails > 1 {
				railNames = []string{"a", "b"}
			}
			asked := make(chan int, n*n)
			cfg := Config{RailCosts: func(peer, k int) []transport.RailCost {
				asked <- k
				costs := make([]transport.RailCost, k)
				for i := range costs {
					costs[i] = transport.RailCost{Latency: 1e-5, Bandwidth: 1e9}
				}
				return costs
			}}
			meshes, errs := connectAll(t, transport.NewMemNetwork(1), memBoots(n, railNames, 10*time.Second), cfg)
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r, m := range meshes {
				require.Equal(t, transport.KindMem, m.Kind)
				require.Equal(t, meshes[0].Dir, m.Dir, "rank %d has another directory", r)
				require.Len(t, m.Dir.Peers[r].Addrs, rails)
				require.Equal(t, rails, m.Dir.Rails())
				require.Len(t, m.Listeners, rails)
				for p, l := range m.Links {
					if p == r {
						require.Nil(t, l)
						continue
					}
					require.Equal(t, p, l.Peer())
					if rails > 1 {
						require.Same(t, m.RailSets[p], l, "rank %d to %d", r, p)
					} else {
						require.Nil(t, m.RailSets)
					}
				}
			}
			if rails > 1 {
				require.Len(t, asked, n*(n-1), "every RailSet asked for its costs")
			}
			// Every link carries a message to its peer.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for r, m := range meshes {
				for p, l := range m.Links {
					if l == nil {
						continue
					}
					wg.Add(2)
					go func() {
						defer wg.Done()
						require.NoError(t, l.Send(ctx, transport.Header{Type: transport.MsgEager}, []byte{byte(r), byte(p)}))
					}()
					go func() {
						defer wg.Done()
						msg, err := l.Recv(ctx)
						require.NoError(t, err)
						require.Equal(t, []byte{byte(p), byte(r)}, msg.Payload)
					}()
				}
			}
			wg.Wait()
		})
	}
}

// TestConnectMissingRank: a rank that never comes is named, on the
// coordinator and on the ranks waiting for the directory.
func TestConnectMissingRank(t *testing.T) {
	boots := memBoots(3, nil, 300*time.Millisecond)
	boots[2] = nil
	_, errs := connectAll(t, transport.NewMemNetwork(1), boots, Config{})
	var pe *PeerError
	require.ErrorAs(t, errs[0], &pe)
	require.Equal(t, 2, pe.Rank)
	require.ErrorContains(t, errs[0], "missing ranks [2]")
	require.ErrorIs(t, errs[0], context.DeadlineExceeded)
	require.ErrorAs(t, errs[1], &pe)
	require.Equal(t, 0, pe.Rank, "rank 1 waits for the coordinator's directory")
}

// TestConnectWrongSecret: a rank with another secret is refused by the
// coordinator, and says so.
func TestConnectWrongSecret(t *testing.T) {
	boots := memBoots(2, nil, 2*time.Second)
	boots[1].Secret = []byte("another secret")
	_, errs := connectAll(t, transport.NewMemNetwork(1), boots, Config{})
	require.ErrorContains(t, errs[1], "authentication with the coordinator")
	var ae *transport.AuthError
	require.True(t, errors.As(errs[1], &ae), "%v", errs[1])
	require.Error(t, errs[0])
}

func TestConnectConfigErrors(t *testing.T) {
	_, err := Connect(context.Background(), &Bootstrap{Rank: 0, Size: 2, Transport: "mem", Timeout: time.Second}, nil, Config{})
	require.ErrorContains(t, err, "mem transport needs its network")
	_, err = Connect(context.Background(), &Bootstrap{Rank: 0, Size: 2, Transport: "carrier-pigeon", Timeout: time.Second}, nil, Config{})
	require.ErrorContains(t, err, "carrier-pigeon")
	boots := memBoots(2, []string{"a", "b"}, time.Second)
	_, err = Connect(context.Background(), boots[0], transport.NewMemNetwork(1), Config{})
	require.ErrorContains(t, err, "RailCosts")
}

func TestDirectoryRails(t *testing.T) {
	d := &Directory{Peers: []Peer{
		{Rank: 0, Addrs: []string{"10.0.0.1:1", "10.1.0.1:1"}},
		{Rank: 1, Addrs: []string{"10.0.0.2:1"}},
		{Rank: 2, Addrs: []string{"10.0.0.3:1", "10.1.0.3:1", "10.2.0.3:1"}},
	}}
	require.Equal(t, 1, d.RailsWith(0, 1))
	require.Equal(t, 2, d.RailsWith(2, 0))
	require.Equal(t, 2, d.Rails())
	require.Equal(t, []string{"10.0.0.3", "10.1.0.3", "10.2.0.3"}, d.Peers[2].RailHosts())
}

func TestBindAndAdvertise(t *testing.T) {
	require.Equal(t, "10.0.0.1:5000", bindAddr("10.0.0.1:5000"))
	require.Equal(t, "127.0.0.1:5000", bindAddr("localhost:5000"))
	require.Equal(t, ":5000", bindAddr("node01:5000"))
	require.Equal(t, "coord", bindAddr("coord"))
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 7}
	require.Equal(t, "10.0.0.9:7", advertise(any4, "10.0.0.9"), "an unspecified host is replaced")
	ip := &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 7}
	require.Equal(t, "10.0.0.1:7", advertise(ip, "10.0.0.9"), "a listening address is kept")
}

// TestIsAuthError: only a handshake that failed for good stops the
// dials; one cut short (a flooded or busy listener) is retried.
func TestIsAuthError(t *testing.T) {
	auth := func(err error) error { return &transport.AuthError{Role: "dialer", Rank: transport.AnyRank, Err: err} }
	for _, err := range []error{transport.ErrBadSecret, transport.ErrJobMismatch, transport.ErrVersion, transport.ErrFingerprint, transport.ErrRankMismatch} {
		require.True(t, isAuthError(fmt.Errorf("dial: %w", auth(err))), "%v", err)
	}
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, os.ErrDeadlineExceeded, context.DeadlineExceeded, transport.ErrMalformed} {
		require.False(t, isAuthError(auth(err)), "%v", err)
	}
	require.False(t, isAuthError(io.EOF))
}
