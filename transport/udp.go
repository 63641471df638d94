package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/hetcomm/hetcomm/transport/internal/rudp"
)

// udpNetwork is the reliable UDP transport: the byte stream of
// transport/internal/rudp (selective acknowledgements, retransmission on an
// RTT estimate, CUBIC congestion control with pacing; docs/rudp.md) carries
// the same framing and membership handshake as TCP. rudp's connection
// control (SYN, SYNACK, RST) is authenticated with a key derived from the
// job's secret, so that nobody without it can open or reset a connection.
type udpNetwork struct{}

// rudpConfig is the rudp configuration of every UDP socket of a link
// configured by c (defaults already applied): rudp's defaults, keyed with
// the job's secret.
func rudpConfig(c *Config) rudp.Config {
	rc := rudp.DefaultConfig()
	rc.Key = c.Secret
	return rc
}

var _ Network = udpNetwork{}

func (udpNetwork) Kind() Kind { return KindUDP }

func (udpNetwork) Listen(addr string, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := rudp.Listen("udp", addr, rudpConfig(&c))
	if err != nil {
		return nil, &OpError{Op: "listen", Transport: KindUDP, Peer: AnyRank, Err: err}
	}
	return startUDPListener(ln, &c), nil
}

func (udpNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var conn *rudp.Conn
	if c.LocalAddr != "" {
		la := c.LocalAddr
		if _, _, splitErr := net.SplitHostPort(la); splitErr != nil {
			la = net.JoinHostPort(la, "0")
		}
		conn, err = rudp.DialFrom(ctx, la, addr, rudpConfig(&c))
	} else {
		conn, err = rudp.Dial(ctx, "udp", addr, rudpConfig(&c))
	}
	if err != nil {
		return nil, udpDialError(err, addr, peer)
	}
	return dialStream(ctx, KindUDP, conn, &c, peer, nil, nil)
}

// udpDialError reports a failed rudp dial. A peer whose rudp handshake
// does not verify under our key (derived from the secret) holds another
// secret: that is the handshake failure ErrBadSecret, as on the other
// transports, although it is detected below the membership handshake.
func udpDialError(err error, addr string, peer int) error {
	var raddr net.Addr
	if ap, perr := netip.ParseAddrPort(addr); perr == nil {
		raddr = net.UDPAddrFromAddrPort(ap)
	}
	if errors.Is(err, rudp.ErrKeyMismatch) {
		err = &AuthError{Role: "dialer", Remote: raddr, Rank: peer, Err: fmt.Errorf("%w: %w", ErrBadSecret, err)}
	}
	return &OpError{Op: "dial", Transport: KindUDP, Peer: peer, Addr: raddr, Err: err}
}

func startUDPListener(ln *rudp.Listener, c *Config) Listener {
	s := newStreamListener(KindUDP, c, ln.Addr(), func() (net.Conn, error) {
		return ln.Accept(context.Background())
	}, ln.Close)
	s.start()
	return s
}

// listenUDPPacket and dialUDPPacket run the UDP transport over a packet
// connection of the caller's (a lossy one, in tests).
func listenUDPPacket(pc net.PacketConn, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := rudp.ListenPacketConn(pc, rudpConfig(&c))
	if err != nil {
		return nil, err
	}
	return startUDPListener(ln, &c), nil
}

func dialUDPPacket(ctx context.Context, pc net.PacketConn, raddr net.Addr, peer int, cfg Config) (Link, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	conn, err := rudp.DialPacketConn(ctx, pc, raddr, rudpConfig(&c))
	if err != nil {
		return nil, udpDialError(err, raddr.String(), peer)
	}
	return dialStream(ctx, KindUDP, conn, &c, peer, nil, nil)
}
