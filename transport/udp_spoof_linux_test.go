package transport

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hetcomm/hetcomm/transport/internal/rudp"
)

// The attack of issue 17 (item 2), over real UDP sockets on 127.0.0.1: two
// ranks' UDP links exchange messages both ways while spoofed datagrams
// arrive at the listener of rank 0 from the exact address (ip and port) of
// rank 1's socket. Before rudp authenticated its connection control, one
// SYN with a new connection id from that address reset the link and killed
// the job. Now:
//
//   - SYNs without a MAC (the datagram of the issue), with a wrong MAC, and
//     RSTs without one are dropped: the listener counts them as
//     unauthenticated;
//   - random bytes and well-formed packets with random connection ids reach
//     the link's connection (they come from its peer's address) and are
//     dropped there as foreign;
//   - a few SYNs correctly signed with the job's secret (which only a
//     member of the job can make) prove that the spoofing works: the
//     listener counts them as contested (a SYN from an address that has a
//     connection), not as new connections, and probes the link, whose
//     live peer answers;
//
// and every message arrives intact, in order, and the links still work
// afterwards.
//
// Two ways to send from rank 1's address, as two subtests:
//
//   - raw: an IPv4 raw socket (IP_HDRINCL) writes UDP datagrams with any
//     source address, as the attacker of the issue did. Rank 1 dials
//     through the production path (udpNetwork.Dial, its own connected
//     socket). Needs CAP_NET_RAW; skipped without it.
//   - reuseport: rank 1 dials from a socket bound with SO_REUSEPORT (the
//     transport's Dial over a caller's socket, dialUDPPacket), and the
//     attacker binds a second socket to the same address with
//     SO_REUSEPORT, connected to an unrelated port so that the kernel
//     never hands it rank 0's datagrams. Works without privileges; the
//     datagrams leave from rank 1's address just the same.
func TestUDPSpoofedControlFromPeerAddress(t *testing.T) {
	cases := []struct {
		name string
		// dial connects rank 1 to addr and returns its link and a socket
		// that sends datagrams with rank 1's source address.
		dial func(t *testing.T, ctx context.Context, addr net.Addr, cfg Config) (Link, spoofer)
	}{
		{"raw", func(t *testing.T, ctx context.Context, addr net.Addr, cfg Config) (Link, spoofer) {
			sp, err := newRawSpoofer()
			if err != nil {
				t.Skipf("no raw socket (needs CAP_NET_RAW): %v", err)
			}
			t.Cleanup(func() { _ = sp.Close() })
			d, err := udpNetwork{}.Dial(ctx, addr.String(), 0, cfg)
			require.NoError(t, err)
			sp.src = d.LocalAddr().(*net.UDPAddr).AddrPort()
			return d, sp
		}},
		{"reuseport", func(t *testing.T, ctx context.Context, addr net.Addr, cfg Config) (Link, spoofer) {
			lc := net.ListenConfig{Control: setReusePort}
			pc, err := lc.ListenPacket(ctx, "udp4", "127.0.0.1:0")
			require.NoError(t, err)
			sp, err := newReusePortSpoofer(ctx, pc.LocalAddr().String())
			if err != nil {
				_ = pc.Close()
				t.Skipf("cannot share the address with SO_REUSEPORT: %v", err)
			}
			t.Cleanup(func() { _ = sp.Close() })
			d, err := dialUDPPacket(ctx, pc, addr, 0, cfg)
			require.NoError(t, err)
			return d, sp
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c0, c1 := testConfig(0), testConfig(1)
			c0, err := c0.withDefaults()
			require.NoError(t, err)
			// What udpNetwork.Listen does, keeping the rudp listener to
			// read its counters.
			rl, err := rudp.Listen("udp4", "127.0.0.1:0", rudpConfig(&c0))
			require.NoError(t, err)
			ln := startUDPListener(rl, &c0)
			defer ln.Close()
			acc := make(chan Link, 1)
			go func() {
				l, _ := ln.Accept(ctx)
				acc <- l
			}()
			d, sp := tc.dial(t, ctx, ln.Addr(), c1)
			defer d.Close()
			a := <-acc
			require.NotNil(t, a, "Accept failed")
			defer a.Close()
			dst := ln.Addr().(*net.UDPAddr).AddrPort()

			// The attacker: 10,000 of the datagrams described above,
			// spread over time.
			const total = 10000
			attacked := make(chan error, 1)
			go func() {
				r := rand.New(rand.NewPCG(1, 17))
				for i := range total {
					var b []byte
					switch {
					case i%500 == 250:
						b = spoofSYN(r.Uint64()|1, testSecret)
					case i%4 == 0:
						b = spoofSYN(r.Uint64()|1, nil) // the datagram of the issue
					case i%4 == 1:
						b = spoofSYN(r.Uint64()|1, []byte("a guess at the secret, 32 bytes!"))
					case i%4 == 2:
						b = spoofPacket(r, 5, r.Uint64()|1) // RST with a random id, no MAC
					default:
						if i%8 == 3 {
							b = spoofPacket(r, uint8(3+r.IntN(2)), r.Uint64()|1) // DATA or ACK, random id
						} else {
							b = make([]byte, r.IntN(200))
							for k := range b {
								b[k] = byte(r.Uint32())
							}
						}
					}
					if err := sp.send(b, dst); err != nil {
						attacked <- err
						return
					}
					if i%32 == 31 {
						time.Sleep(time.Millisecond)
					}
				}
				attacked <- nil
			}()

			// Messages flow both ways for as long as the attack lasts,
			// and afterwards.
			var attackErr error
			rounds := 0
			for done := false; !done; rounds++ {
				exchangeUDP(t, ctx, d, a, 60)
				select {
				case attackErr = <-attacked:
					done = true
				default:
				}
			}
			require.NoError(t, attackErr)
			exchangeUDP(t, ctx, d, a, 6)

			st := rl.Stats()
			srv := a.(*streamLink).conn.(*rudp.Conn).Stats()
			t.Logf("%d spoofed datagrams during %d rounds of 60 messages each way; listener %+v; server conn: malformed %d foreign %d",
				total, rounds, st, srv.Malformed, srv.Foreign)
			require.NotZero(t, st.Unauthenticated, "unauthenticated SYNs and RSTs were counted")
			require.NotZero(t, st.Contested, "signed SYNs came from rank 1's address")
			require.EqualValues(t, 1, st.Created, "a spoofed SYN opened a connection")
			require.Zero(t, st.Unknown, "every datagram came from rank 1's address")
			require.NotZero(t, srv.Foreign+srv.Malformed, "the link's connection saw the garbage")
		})
	}
}

// exchangeUDP sends n messages of varied sizes each way at once and checks
// that they arrive intact and in order.
func exchangeUDP(t *testing.T, ctx context.Context, d, a Link, n int) {
	t.Helper()
	msg := func(from, i int) []byte {
		size := []int{0, 1, 100, 1400, 70000, 300 << 10}[i%6]
		r := rand.New(rand.NewPCG(uint64(from), uint64(i)))
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(r.Uint32())
		}
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, p := range []struct {
		from, to Link
		rank     int
	}{{d, a, 1}, {a, d, 0}} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range n {
				if err := p.from.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, msg(p.rank, i)); err != nil {
					errs <- fmt.Errorf("rank %d send %d: %w", p.rank, i, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range n {
				m, err := p.to.Recv(ctx)
				if err != nil {
					errs <- fmt.Errorf("from rank %d: recv %d: %w", p.rank, i, err)
					return
				}
				if m.Header.Seq != uint64(i) || !bytes.Equal(m.Payload, msg(p.rank, i)) {
					errs <- fmt.Errorf("from rank %d: message %d: seq %d, %d bytes: out of order or corrupted", p.rank, i, m.Header.Seq, len(m.Payload))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// spoofSYN builds a reliable-UDP SYN (docs/rudp.md, wire format) carrying
// the connection id id: without a MAC when secret is nil, else signed as
// docs/rudp.md ("Authentication") specifies, with a key derived from
// secret.
func spoofSYN(id uint64, secret []byte) []byte {
	const hdr, body, tag = 36, 12, 16
	n := hdr + body
	if secret != nil {
		n += tag
	}
	b := make([]byte, n)
	b[0], b[1] = 1, 1 // version, SYN
	binary.BigEndian.PutUint32(b[20:], 100)
	binary.BigEndian.PutUint16(b[32:], uint16(n-hdr))
	binary.BigEndian.PutUint64(b[hdr:], id)
	binary.BigEndian.PutUint16(b[hdr+8:], 1400)
	if secret != nil {
		b[2] = 0x08 // AUTH
		kd := hmac.New(sha256.New, secret)
		kd.Write([]byte("hetcomm rudp v1"))
		m := hmac.New(sha256.New, kd.Sum(nil))
		m.Write(b[:n-tag])
		copy(b[n-tag:], m.Sum(nil))
	}
	return b
}

// spoofPacket builds a well-formed packet of type typ (DATA 3, ACK 4, RST
// 5) with destination id dst and random fields, without a MAC.
func spoofPacket(r *rand.Rand, typ uint8, dst uint64) []byte {
	var payload []byte
	if typ == 3 {
		payload = make([]byte, r.IntN(100))
	}
	b := make([]byte, 36+len(payload))
	b[0], b[1] = 1, typ
	binary.BigEndian.PutUint64(b[4:], dst)
	for o := 12; o < 32; o += 4 {
		binary.BigEndian.PutUint32(b[o:], r.Uint32())
	}
	binary.BigEndian.PutUint16(b[32:], uint16(len(payload)))
	return b
}

// spoofer sends UDP datagrams with a chosen source address.
type spoofer interface {
	send(b []byte, to netip.AddrPort) error
	Close() error
}

// rawSpoofer writes whole IPv4 packets through a raw socket.
type rawSpoofer struct {
	fd  int
	src netip.AddrPort
}

func newRawSpoofer() (*rawSpoofer, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW) // IP_HDRINCL implied
	if err != nil {
		return nil, err
	}
	return &rawSpoofer{fd: fd}, nil
}

func (s *rawSpoofer) send(b []byte, to netip.AddrPort) error {
	pkt := make([]byte, 28+len(b))
	pkt[0] = 0x45 // IPv4, 20-byte header
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[8] = 64 // TTL
	pkt[9] = unix.IPPROTO_UDP
	src, dst := s.src.Addr().As4(), to.Addr().As4()
	copy(pkt[12:16], src[:])
	copy(pkt[16:20], dst[:]) // the kernel fills in the IP checksum
	binary.BigEndian.PutUint16(pkt[20:], s.src.Port())
	binary.BigEndian.PutUint16(pkt[22:], to.Port())
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(b))) // UDP checksum 0: none (IPv4)
	copy(pkt[28:], b)
	err := unix.Sendto(s.fd, pkt, 0, &unix.SockaddrInet4{Addr: dst})
	if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
		return nil // a datagram lost, as UDP may
	}
	return err
}

func (s *rawSpoofer) Close() error { return unix.Close(s.fd) }

// reusePortSpoofer is a second socket on the peer's address.
type reusePortSpoofer struct{ uc *net.UDPConn }

func newReusePortSpoofer(ctx context.Context, addr string) (*reusePortSpoofer, error) {
	lc := net.ListenConfig{Control: setReusePort}
	pc, err := lc.ListenPacket(ctx, "udp4", addr)
	if err != nil {
		return nil, err
	}
	uc := pc.(*net.UDPConn)
	// Connected to the discard port, it is never chosen for datagrams
	// from anyone else (the kernel prefers the socket that matches the
	// sender), so rank 1 still gets all of its own.
	rc, err := uc.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.Connect(int(fd), &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: 9})
		})
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		_ = uc.Close()
		return nil, err
	}
	return &reusePortSpoofer{uc}, nil
}

func (s *reusePortSpoofer) send(b []byte, to netip.AddrPort) error {
	rc, err := s.uc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())})
		return !errors.Is(serr, unix.EAGAIN)
	}); err != nil {
		return err
	}
	if errors.Is(serr, unix.ENOBUFS) {
		return nil
	}
	return serr
}

func (s *reusePortSpoofer) Close() error { return s.uc.Close() }

func setReusePort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}
