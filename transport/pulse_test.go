package transport

import (
	"crypto/rand"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pulseRig is a pulse receiver (rank 1 of 3) and what it heard.
type pulseRig struct {
	p    *Pulses
	mu   sync.Mutex
	from []int
}

func newPulseRig(t *testing.T, rank int, secret string) *pulseRig {
	r := &pulseRig{}
	p, err := ListenPulses("127.0.0.1:0", PulseConfig{JobID: 7, Rank: rank, Size: 3, Secret: []byte(secret),
		OnPulse: func(src int) {
			r.mu.Lock()
			r.from = append(r.from, src)
			r.mu.Unlock()
		}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	r.p = p
	return r
}

func (r *pulseRig) heard() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.from...)
}

// settled waits until the receiver has judged n datagrams.
func (r *pulseRig) settled(t *testing.T, n uint64) {
	require.Eventually(t, func() bool { return r.p.Accepted()+r.p.Rejected() >= n },
		10*time.Second, time.Millisecond, "accepted %d, rejected %d of %d", r.p.Accepted(), r.p.Rejected(), n)
}

const pulseTestSecret = "pulse-test-secret-0123456789"

// sniffer is a UDP socket that pulses can be sent to instead of their
// receiver, to capture them.
func sniffer(t *testing.T) (*net.UDPConn, func() []byte) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, func() []byte {
		b := make([]byte, 256)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, _, err := c.ReadFromUDP(b)
		require.NoError(t, err)
		return b[:n]
	}
}

func TestPulses(t *testing.T) {
	t.Run("a pulse reaches its receiver and names its sender", func(t *testing.T) {
		a, b := newPulseRig(t, 0, pulseTestSecret), newPulseRig(t, 1, pulseTestSecret)
		require.NoError(t, a.p.SetPeer(1, []*net.UDPAddr{b.p.Addr()}, b.p.Nonce()))
		require.NoError(t, b.p.SetPeer(0, []*net.UDPAddr{a.p.Addr()}, a.p.Nonce()))
		require.True(t, a.p.HasPeer(1))
		require.False(t, a.p.HasPeer(2))
		for range 3 {
			require.NoError(t, a.p.Send(1))
			require.NoError(t, b.p.Send(0))
		}
		require.NoError(t, a.p.Send(2)) // no address yet: nothing sent
		b.settled(t, 3)
		a.settled(t, 3)
		require.Equal(t, []int{0, 0, 0}, b.heard())
		require.Equal(t, []int{1, 1, 1}, a.heard())
		require.Zero(t, a.p.Rejected()+b.p.Rejected())
	})

	t.Run("pulses take the peer's addresses in turn", func(t *testing.T) {
		recv := newPulseRig(t, 1, pulseTestSecret)
		sender := newPulseRig(t, 0, pulseTestSecret)
		s, capture := sniffer(t)
		require.NoError(t, sender.p.SetPeer(1, to(s.LocalAddr().(*net.UDPAddr), recv.p.Addr()), recv.p.Nonce()))
		for range 4 {
			require.NoError(t, sender.p.Send(1))
		}
		recv.settled(t, 2)
		require.Equal(t, []int{0, 0}, recv.heard(), "every other pulse")
		require.Len(t, capture(), pulseLen)
		require.Len(t, capture(), pulseLen)
	})

	t.Run("replays, forgeries and strangers do not count", func(t *testing.T) {
		recv := newPulseRig(t, 1, pulseTestSecret)
		s, capture := sniffer(t)
		send := func(b []byte) {
			_, err := s.WriteToUDP(b, recv.p.Addr())
			require.NoError(t, err)
		}
		// A real pulse, captured on its way, then delivered twice.
		sender := newPulseRig(t, 0, pulseTestSecret)
		require.NoError(t, sender.p.SetPeer(1, to(s.LocalAddr().(*net.UDPAddr)), recv.p.Nonce()))
		require.NoError(t, sender.p.Send(1))
		real := capture()
		require.Len(t, real, pulseLen)
		send(real)
		recv.settled(t, 1)
		require.Equal(t, uint64(1), recv.p.Accepted())
		send(real) // replayed
		// Every field changed in turn: the MAC no longer verifies, or
		// the pulse is not for this job or rank.
		for i := range pulseLen {
			b := append([]byte(nil), real...)
			b[i] ^= 0x40
			send(b)
		}
		// Another secret; another receiver's nonce; a sender out of range;
		// a pulse to another rank.
		forger := newPulseRig(t, 0, "some-other-secret-0123456789")
		require.NoError(t, forger.p.SetPeer(1, to(s.LocalAddr().(*net.UDPAddr)), recv.p.Nonce()))
		require.NoError(t, forger.p.Send(1))
		send(capture())
		other := newPulseRig(t, 2, pulseTestSecret)
		require.NoError(t, sender.p.SetPeer(1, to(s.LocalAddr().(*net.UDPAddr)), other.p.Nonce()))
		for range 5 { // newer counters, but sealed for another nonce
			require.NoError(t, sender.p.Send(1))
			send(capture())
		}
		require.NoError(t, sender.p.SetPeer(2, to(s.LocalAddr().(*net.UDPAddr)), recv.p.Nonce()))
		require.NoError(t, sender.p.Send(2))
		send(capture())
		// Garbage: empty, short, long, random.
		send(nil)
		send(real[:pulseLen-1])
		send(append(append([]byte(nil), real...), 0))
		for range 100 {
			b := make([]byte, pulseLen)
			rand.Read(b)
			send(b)
		}
		n := uint64(1 + 1 + pulseLen + 1 + 5 + 1 + 3 + 100)
		recv.settled(t, n)
		require.Equal(t, uint64(1), recv.p.Accepted(), "only the first real pulse counts")
		require.Equal(t, []int{0}, recv.heard())
		// The real sender still gets through, with its next counter.
		require.NoError(t, sender.p.SetPeer(1, to(recv.p.Addr()), recv.p.Nonce()))
		require.NoError(t, sender.p.Send(1))
		recv.settled(t, n+1)
		require.Equal(t, []int{0, 0}, recv.heard())
	})

	t.Run("bad configuration", func(t *testing.T) {
		on := func(int) {}
		for _, c := range []PulseConfig{
			{Rank: 0, Size: 2, Secret: []byte("short"), OnPulse: on},
			{Rank: 2, Size: 2, Secret: []byte(pulseTestSecret), OnPulse: on},
			{Rank: 0, Size: 2, Secret: []byte(pulseTestSecret)},
		} {
			_, err := ListenPulses("127.0.0.1:0", c)
			require.ErrorIs(t, err, ErrBadConfig)
		}
		r := newPulseRig(t, 0, pulseTestSecret)
		require.ErrorIs(t, r.p.SetPeer(0, to(r.p.Addr()), r.p.Nonce()), ErrBadConfig, "itself")
		require.ErrorIs(t, r.p.SetPeer(3, to(r.p.Addr()), r.p.Nonce()), ErrBadConfig, "out of range")
		require.ErrorIs(t, r.p.SetPeer(1, to(r.p.Addr()), []byte("short")), ErrMalformed)
		require.ErrorIs(t, r.p.SetPeer(1, nil, r.p.Nonce()), ErrMalformed)
		require.ErrorIs(t, r.p.SetPeer(1, to(nil), r.p.Nonce()), ErrMalformed)
		require.NoError(t, r.p.Close())
		require.NoError(t, r.p.Close(), "idempotent")
	})
}

func TestAddrIPs(t *testing.T) {
	ip, ip2 := net.IPv4(10, 1, 2, 3), net.IPv4(10, 2, 2, 3)
	require.Equal(t, []net.IP{ip}, AddrIPs(&net.TCPAddr{IP: ip, Port: 1}))
	require.Equal(t, []net.IP{ip}, AddrIPs(&net.UDPAddr{IP: ip, Port: 1}))
	require.Equal(t, []net.IP{ip, ip2}, AddrIPs(RailAddrs{nil, &net.TCPAddr{IP: ip, Port: 1},
		&net.TCPAddr{IP: ip, Port: 2}, &net.TCPAddr{IP: ip2, Port: 1}}))
	require.Empty(t, AddrIPs(nil))
	require.Empty(t, AddrIPs(RailAddrs{}))
	require.Empty(t, AddrIPs(memAddr("rank-1")))
	require.Equal(t, []net.IP{net.ParseIP("10.1.2.3")}, AddrIPs(memAddr("10.1.2.3:4")))
}

// to is the address list of SetPeer.
func to(a ...*net.UDPAddr) []*net.UDPAddr { return a }
