package transport

import (
	"context"
	"net"

	"github.com/hetcomm/hetcomm/transport/internal/rudp"
)

// udpNetwork is the reliable UDP transport: the byte stream of
// transport/internal/rudp (selective acknowledgements, retransmission on an
// RTT estimate, CUBIC congestion control with pacing; docs/rudp.md) carries
// the same framing and membership handshake as TCP.
type udpNetwork struct{}

var _ Network = udpNetwork{}

func (udpNetwork) Kind() Kind { return KindUDP }

func (udpNetwork) Listen(addr string, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := rudp.Listen("udp", addr, rudp.DefaultConfig())
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
		conn, err = rudp.DialFrom(ctx, la, addr, rudp.DefaultConfig())
	} else {
		conn, err = rudp.Dial(ctx, "udp", addr, rudp.DefaultConfig())
	}
	if err != nil {
		return nil, &OpError{Op: "dial", Transport: KindUDP, Peer: peer, Err: err}
	}
	return dialStream(ctx, KindUDP, conn, &c, peer, nil, nil)
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
	ln, err := rudp.ListenPacketConn(pc, rudp.DefaultConfig())
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
	conn, err := rudp.DialPacketConn(ctx, pc, raddr, rudp.DefaultConfig())
	if err != nil {
		return nil, &OpError{Op: "dial", Transport: KindUDP, Peer: peer, Err: err}
	}
	return dialStream(ctx, KindUDP, conn, &c, peer, nil, nil)
}
