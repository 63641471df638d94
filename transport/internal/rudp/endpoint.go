package rudp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// endpoint is how a Conn reaches the network: its own socket (dialled) or a
// listener's shared one.
type endpoint interface {
	write(b []byte, to netip.AddrPort) error
	// detach is called once when the connection is torn down.
	detach(c *Conn)
	// wait is called by Close after detach: it waits for goroutines the
	// endpoint stopped on the connection's behalf.
	wait()
}

// apConn is the allocation-free datagram interface of *net.UDPConn, also
// implemented by *MemPacketConn.
type apConn interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

func asAPConn(pc net.PacketConn) apConn {
	if a, ok := pc.(apConn); ok {
		return a
	}
	return genericPC{pc}
}

// genericPC adapts any net.PacketConn whose addresses print as ip:port.
type genericPC struct{ net.PacketConn }

func (g genericPC) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, a, err := g.ReadFrom(b)
	if err != nil {
		return n, netip.AddrPort{}, err
	}
	ap, _ := addrPortOf(a)
	return n, ap, nil
}

func (g genericPC) WriteToUDPAddrPort(b []byte, ap netip.AddrPort) (int, error) {
	return g.WriteTo(b, net.UDPAddrFromAddrPort(ap))
}

// addrPortOf converts a net.Addr to a normalised (unmapped) AddrPort.
func addrPortOf(a net.Addr) (netip.AddrPort, bool) {
	var ap netip.AddrPort
	switch v := a.(type) {
	case *net.UDPAddr:
		ap = v.AddrPort()
	case nil:
		return ap, false
	default:
		var err error
		ap, err = netip.ParseAddrPort(a.String())
		if err != nil {
			return ap, false
		}
	}
	return normalize(ap), ap.IsValid()
}

func normalize(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func newID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// decodeDatagram validates a received datagram of n bytes read into buf.
func decodeDatagram(buf []byte, n int, h *header) ([]byte, error) {
	if n >= len(buf) {
		return nil, errOversized // possibly truncated by the read
	}
	return decodePacket(buf[:n], h)
}

var errOversized = errors.New("rudp: oversized datagram")

// readLoopBackoff slows a reader that keeps getting errors that are not a
// closed socket (for example ICMP port-unreachable reports on a connected
// socket) so that it cannot spin.
func readLoopBackoff(errs int) {
	if errs > 16 {
		time.Sleep(time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Dialling

// dialEP is the endpoint of a dialled connection: it owns the socket.
type dialEP struct {
	pc   net.PacketConn
	ap   apConn
	uc   *net.UDPConn // set when the socket is connected to the peer
	once sync.Once
}

func (d *dialEP) write(b []byte, to netip.AddrPort) error {
	if d.uc != nil {
		_, err := d.uc.Write(b)
		return err
	}
	_, err := d.ap.WriteToUDPAddrPort(b, to)
	return err
}

func (d *dialEP) detach(*Conn) { d.once.Do(func() { _ = d.pc.Close() }) }

func (d *dialEP) wait() {}

// Dial opens a connection to raddr ("host:port") from an ephemeral local
// port. network is "udp", "udp4" or "udp6". It returns when the handshake
// completes, ctx is done (the error wraps ctx.Err()), or nothing was heard
// for Config.IdleTimeout.
func Dial(ctx context.Context, network, raddr string, cfg Config) (*Conn, error) {
	return dialUDP(ctx, network, "", raddr, cfg)
}

// DialFrom is Dial from the local address laddr ("ip:port", port 0 for any),
// so that a rail's traffic leaves through its own NIC.
func DialFrom(ctx context.Context, laddr, raddr string, cfg Config) (*Conn, error) {
	return dialUDP(ctx, "udp", laddr, raddr, cfg)
}

func dialUDP(ctx context.Context, network, laddr, raddr string, cfg Config) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("rudp: dial: unsupported network %q", network)
	}
	ra, err := resolveUDP(ctx, network, raddr)
	if err != nil {
		return nil, fmt.Errorf("rudp: dial %s: %w", raddr, err)
	}
	var la *net.UDPAddr
	if laddr != "" {
		if la, err = resolveUDP(ctx, network, laddr); err != nil {
			return nil, fmt.Errorf("rudp: dial from %s: %w", laddr, err)
		}
	}
	uc, err := net.DialUDP(network, la, ra)
	if err != nil {
		return nil, fmt.Errorf("rudp: dial %s: %w", raddr, err)
	}
	setSocketBuffers(uc, cfg.resolved().SocketBuffer)
	return dialOn(ctx, uc, uc, normalize(ra.AddrPort()), cfg)
}

// DialPacketConn runs the handshake with raddr over pc, which the Conn then
// owns (Close closes it). pc must not be read by anyone else. Use it with
// MemNetwork for tests, or with a socket prepared by the caller.
func DialPacketConn(ctx context.Context, pc net.PacketConn, raddr net.Addr, cfg Config) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ap, ok := addrPortOf(raddr)
	if !ok {
		return nil, fmt.Errorf("rudp: dial: address %v is not ip:port", raddr)
	}
	if uc, ok := pc.(*net.UDPConn); ok {
		setSocketBuffers(uc, cfg.resolved().SocketBuffer)
	}
	return dialOn(ctx, pc, nil, ap, cfg)
}

func dialOn(ctx context.Context, pc net.PacketConn, connected *net.UDPConn, peer netip.AddrPort, cfg Config) (*Conn, error) {
	cfg = cfg.resolved()
	ep := &dialEP{pc: pc, ap: asAPConn(pc), uc: connected}
	local, _ := addrPortOf(pc.LocalAddr())
	size := cfg.MaxPacketSize
	if size == 0 {
		size = pathPacketSize(pc, local.Addr(), peer.Addr())
	}
	c := newConn(cfg, ep, pc.LocalAddr(), net.UDPAddrFromAddrPort(peer), peer, true)
	c.auth = newAuthKey(cfg.Key)
	c.localID = newID()
	c.maxPacket = size
	c.mu.Lock()
	c.synDue = true
	c.synAt = c.now() + cfg.InitialRTO
	c.armLocked(c.synAt)
	c.mu.Unlock()
	c.start(func() { c.dialReadLoop(ep.ap) })
	c.flush()
	select {
	case <-c.established:
		return c, nil
	case <-c.quit:
	case <-ctx.Done():
		c.teardown(ctx.Err(), false)
	}
	_ = c.Close()
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return nil, fmt.Errorf("rudp: dial %s: %w", peer, err)
}

func resolveUDP(ctx context.Context, network, addr string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		pn, err2 := net.DefaultResolver.LookupPort(ctx, network, port)
		if err2 != nil {
			return nil, err2
		}
		p = uint64(pn)
	}
	if host == "" {
		return &net.UDPAddr{Port: int(p)}, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(p))), nil
	}
	fam := "ip"
	switch network {
	case "udp4":
		fam = "ip4"
	case "udp6":
		fam = "ip6"
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, fam, host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ips[0].Unmap(), uint16(p))), nil
}

// keyMismatch ends a dial whose peer answered with a control packet that
// names our SYN's fresh id but does not verify under our key (a listener
// that refused our SYN's MAC, or one without a key). Only the peer saw
// that id, so a blind attacker cannot forge this; after the handshake such
// packets are merely dropped.
func (c *Conn) keyMismatch() {
	c.mu.Lock()
	dialling := c.state == stateSynSent
	c.mu.Unlock()
	if dialling { // only this reader moves the state on from stateSynSent
		c.teardown(ErrKeyMismatch, false)
	}
}

// reflectRST answers a packet naming id, which is not ours, with an RST
// naming it (rate limited; called by the reader only). The peer's
// connection whose peer id that is, if any, ends; the RST names no id of
// ours, so it cannot end ours.
func (c *Conn) reflectRST(id uint64, tsval uint32) {
	if !c.rstLim.allow(time.Now()) {
		return
	}
	var b [maxCtrlLen]byte
	_ = c.ep.write(buildRST(b[:], id, 0, tsval, c.auth), c.peer)
}

// dialReadLoop is the socket reader of a dialled connection.
func (c *Conn) dialReadLoop(ap apConn) {
	pb := getBuf(largeBufSize)
	defer func() { putBuf(pb) }()
	errs := 0
	for {
		n, from, err := ap.ReadFromUDPAddrPort(pb.b)
		if err != nil {
			select {
			case <-c.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				c.teardown(ErrClosed, false)
				return
			}
			errs++
			readLoopBackoff(errs)
			continue
		}
		errs = 0
		if normalize(from) != c.peer {
			c.drops.foreign.Add(1)
			continue
		}
		var h header
		payload, err := decodeDatagram(pb.b, n, &h)
		if err != nil {
			c.drops.malformed.Add(1)
			continue
		}
		if !c.auth.check(&h, pb.b[:n]) {
			c.drops.unauth.Add(1)
			if h.dst == c.localID && (h.typ == typeRST || h.typ == typeSYNACK) {
				c.keyMismatch()
			}
			continue
		}
		if h.dst != c.localID && (h.typ == typeSYNACK || h.typ == typeDATA || h.typ == typeACK) {
			// A packet from our peer for a connection id that is not
			// ours: one an earlier owner of this port had (we restarted).
			// Tell the peer that connection is gone, so that its
			// listener lets ours start (docs/rudp.md, "Restart").
			c.drops.foreign.Add(1)
			c.reflectRST(h.dst, h.tsecr)
			continue
		}
		if c.handlePacket(&h, payload, pb) {
			pb = getBuf(largeBufSize)
		}
	}
}
