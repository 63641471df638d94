package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// tcpNetwork is the TCP transport, optionally with TLS 1.3. One connection
// carries one link; header and payload leave in one writev; TCP_NODELAY is
// on so small control messages are not held back.
type tcpNetwork struct{ tls bool }

var _ Network = tcpNetwork{}

func (n tcpNetwork) Kind() Kind {
	if n.tls {
		return KindTLS
	}
	return KindTCP
}

// SetLoopbackBuffers sets SO_SNDBUF and SO_RCVBUF to size on l's socket
// when l is a TCP or TLS link to a loopback peer whose buffers follow the
// default policy (Config.SocketBuffer 0), and reports whether it did. An
// upper layer that learns more about its host after connecting (how many
// processes share its cores) retunes its links with it.
func SetLoopbackBuffers(l Link, size int) bool {
	sl, ok := l.(*streamLink)
	if !ok || size <= 0 || sl.cfg.SocketBuffer != 0 {
		return false
	}
	tc := tcpConn(sl.r.raw)
	if tc == nil {
		if tlsc, ok := sl.conn.(*tls.Conn); ok {
			tc, _ = tlsc.NetConn().(*net.TCPConn)
		}
	}
	if tc == nil {
		return false
	}
	if ra, ok := tc.RemoteAddr().(*net.TCPAddr); !ok || !ra.IP.IsLoopback() {
		return false
	}
	return tc.SetReadBuffer(size) == nil && tc.SetWriteBuffer(size) == nil
}

func tuneTCP(c net.Conn, cfg *Config) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	size := cfg.SocketBuffer
	if size == 0 {
		if ra, ok := tc.RemoteAddr().(*net.TCPAddr); ok && ra.IP.IsLoopback() {
			size = LoopbackSocketBuffer
		}
	}
	if size > 0 {
		_ = tc.SetReadBuffer(size)
		_ = tc.SetWriteBuffer(size)
	}
	if cfg.UserTimeout > 0 {
		setUserTimeout(tc, cfg.UserTimeout)
	}
}

// identity returns cfg's identity, generating an ephemeral one if unset.
func identity(cfg *Config) (*Identity, error) {
	if cfg.Identity != nil {
		return cfg.Identity, nil
	}
	return NewIdentity(cfg.JobID, cfg.Rank)
}

func (n tcpNetwork) Listen(addr string, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kind := n.Kind()
	var tconf *tls.Config
	if n.tls {
		id, err := identity(&c)
		if err != nil {
			return nil, &OpError{Op: "listen", Transport: kind, Peer: AnyRank, Err: err}
		}
		tconf = tlsConfig(&c, id, true)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &OpError{Op: "listen", Transport: kind, Peer: AnyRank, Err: err}
	}
	s := newStreamListener(kind, &c, ln.Addr(), func() (net.Conn, error) {
		conn, err := ln.Accept()
		if err == nil {
			tuneTCP(conn, &c)
		}
		return conn, err
	}, ln.Close)
	if n.tls {
		s.upgrade = func(ctx context.Context, conn net.Conn) (net.Conn, []byte, error) {
			tc := tls.Server(conn, tconf)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, nil, err
			}
			cs := tc.ConnectionState()
			b, err := tlsBinding(&cs)
			return tc, b, err
		}
		s.verify = func(conn net.Conn, peer int) error {
			cs := conn.(*tls.Conn).ConnectionState()
			return checkFingerprint(&c, peer, &cs)
		}
	}
	s.start()
	return s, nil
}

func (n tcpNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kind := n.Kind()
	fail := func(err error) (Link, error) {
		return nil, &OpError{Op: "dial", Transport: kind, Peer: peer, Err: err}
	}
	if peer < AnyRank {
		return fail(fmt.Errorf("%w: peer rank %d", ErrBadConfig, peer))
	}
	var d net.Dialer
	if c.LocalAddr != "" {
		la, err := resolveLocal("tcp", c.LocalAddr)
		if err != nil {
			return fail(err)
		}
		d.LocalAddr = la
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail(err)
	}
	tuneTCP(conn, &c)
	if !n.tls {
		return dialStream(ctx, kind, conn, &c, peer, nil, nil)
	}
	id, err := identity(&c)
	if err != nil {
		_ = conn.Close()
		return fail(err)
	}
	tc := tls.Client(conn, tlsConfig(&c, id, false))
	hctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return fail(&AuthError{Role: "dialer", Remote: conn.RemoteAddr(), Rank: peer, Err: timeoutErr(hctx, err)})
	}
	cs := tc.ConnectionState()
	binding, err := tlsBinding(&cs)
	if err != nil {
		_ = conn.Close()
		return fail(err)
	}
	return dialStream(ctx, kind, tc, &c, peer, binding, func(got int) error {
		return checkFingerprint(&c, got, &cs)
	})
}

// resolveLocal turns "ip" or "ip:port" into a local address for network.
func resolveLocal(network, s string) (net.Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, "0"
	}
	hp := net.JoinHostPort(host, port)
	switch network {
	case "udp":
		return net.ResolveUDPAddr("udp", hp)
	default:
		return net.ResolveTCPAddr("tcp", hp)
	}
}
