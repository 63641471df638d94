package rudp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// MemLink describes one direction of a link of a MemNetwork. Loss,
// duplication and reordering are decided by a generator seeded from
// MemConfig.Seed and the two addresses, so a link drops the same datagrams
// (by index) in every run.
type MemLink struct {
	Loss         float64       // probability that a datagram is dropped
	Duplicate    float64       // probability that a datagram is delivered twice
	Reorder      float64       // probability that a datagram is held back by ReorderDelay
	ReorderDelay time.Duration // extra delay of a reordered datagram; 0 means 1 ms
	Delay        time.Duration // one-way latency
	Jitter       time.Duration // extra uniform random delay in [0, Jitter); keeps the link FIFO
	Rate         float64       // bytes per second (serialisation); 0 is unlimited
	// QueueBytes bounds the bytes scheduled towards one receiver and not
	// yet read (a router queue plus a socket buffer); datagrams beyond it
	// are dropped. 0 means 8 MiB.
	QueueBytes int
}

// MemConfig configures a MemNetwork.
type MemConfig struct {
	Seed uint64
	// MTU is the largest datagram; larger writes fail with EMSGSIZE, and
	// rudp sizes its packets from it (MTU method). 0 means 65507.
	MTU  int
	Link MemLink // used for every direction without SetLink
}

// MemNetwork is an in-memory datagram network for deterministic tests: no
// sockets, seeded loss, duplication, reordering, delay, jitter and rate
// limits. Endpoints have 127.0.0.x addresses that exist only inside it.
type MemNetwork struct {
	cfg MemConfig

	mu       sync.Mutex
	eps      map[netip.AddrPort]*MemPacketConn
	links    map[[2]netip.AddrPort]*memLink
	nextPort uint16
}

type memLink struct {
	cfg  MemLink
	rng  *rand.Rand
	busy time.Time // serialisation: the link is busy until then
	last time.Time // latest in-order delivery time (jitter keeps FIFO order)
	sent uint64
}

// NewMemNetwork returns an empty network.
func NewMemNetwork(cfg MemConfig) *MemNetwork {
	if cfg.MTU <= 0 {
		cfg.MTU = MaxPacketSizeLimit
	}
	return &MemNetwork{
		cfg:      cfg,
		eps:      make(map[netip.AddrPort]*MemPacketConn),
		links:    make(map[[2]netip.AddrPort]*memLink),
		nextPort: 40000,
	}
}

// MemPipe returns two connected endpoints of a new network with cfg.
func MemPipe(cfg MemConfig) (a, b *MemPacketConn) {
	n := NewMemNetwork(cfg)
	a, _ = n.Listen("127.0.0.1:0")
	b, _ = n.Listen("127.0.0.2:0")
	return a, b
}

// Listen creates an endpoint at addr ("ip:port"; port 0 picks one).
func (n *MemNetwork) Listen(addr string) (*MemPacketConn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("rudp: mem listen: %w", err)
	}
	ap = normalize(ap)
	n.mu.Lock()
	defer n.mu.Unlock()
	if ap.Port() == 0 {
		for {
			n.nextPort++
			if n.nextPort == 0 {
				n.nextPort = 1024
			}
			cand := netip.AddrPortFrom(ap.Addr(), n.nextPort)
			if n.eps[cand] == nil {
				ap = cand
				break
			}
		}
	}
	if n.eps[ap] != nil {
		return nil, fmt.Errorf("rudp: mem listen %s: %w", ap, syscall.EADDRINUSE)
	}
	c := &MemPacketConn{
		net:    n,
		addr:   ap,
		notify: make(chan struct{}, 1),
		closed: make(chan struct{}),
		rdl:    newDeadline(),
		wdl:    newDeadline(),
	}
	n.eps[ap] = c
	return c, nil
}

// SetLink sets the properties of the direction from -> to.
func (n *MemNetwork) SetLink(from, to net.Addr, l MemLink) {
	f, _ := addrPortOf(from)
	t, _ := addrPortOf(to)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.linkLocked(f, t).cfg = l
}

func (n *MemNetwork) linkLocked(from, to netip.AddrPort) *memLink {
	k := [2]netip.AddrPort{from, to}
	l := n.links[k]
	if l == nil {
		h := uint64(14695981039346656037)
		for _, s := range []string{from.String(), to.String()} {
			for i := 0; i < len(s); i++ {
				h = (h ^ uint64(s[i])) * 1099511628211
			}
		}
		l = &memLink{cfg: n.cfg.Link, rng: rand.New(rand.NewPCG(n.cfg.Seed, h))}
		n.links[k] = l
	}
	return l
}

// memPkt is a datagram scheduled for delivery.
type memPkt struct {
	at   time.Time
	id   uint64
	from netip.AddrPort
	pb   *pbuf
	n    int
}

// MemPacketConn is an endpoint of a MemNetwork. It implements
// net.PacketConn and the allocation-free AddrPort methods of *net.UDPConn.
type MemPacketConn struct {
	net  *MemNetwork
	addr netip.AddrPort

	mu      sync.Mutex
	q       []memPkt // min-heap by (at, id)
	qBytes  int
	nextID  uint64
	isClose bool
	timer   *time.Timer // used by the single reader

	notify chan struct{}
	closed chan struct{}
	rdl    *deadline
	wdl    *deadline

	// Counters (guarded by mu).
	dropped, delivered uint64
}

// MTU reports the network's datagram limit (rudp sizes packets from it).
func (c *MemPacketConn) MTU() int { return c.net.cfg.MTU }

// LocalAddr returns the endpoint's address.
func (c *MemPacketConn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.addr) }

// Close removes the endpoint; pending and future reads fail with
// net.ErrClosed.
func (c *MemPacketConn) Close() error {
	c.net.mu.Lock()
	if c.net.eps[c.addr] == c {
		delete(c.net.eps, c.addr)
	}
	c.net.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClose {
		return nil
	}
	c.isClose = true
	close(c.closed)
	for _, p := range c.q {
		putBuf(p.pb)
	}
	c.q = nil
	c.rdl.stop()
	c.wdl.stop()
	return nil
}

// SetDeadline sets the read and write deadlines.
func (c *MemPacketConn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the read deadline.
func (c *MemPacketConn) SetReadDeadline(t time.Time) error { c.rdl.set(t); return nil }

// SetWriteDeadline sets the write deadline (writes never block).
func (c *MemPacketConn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// Dropped returns how many datagrams towards this endpoint were lost
// (random loss or a full queue) and how many were delivered to its reader.
func (c *MemPacketConn) Dropped() (dropped, delivered uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped, c.delivered
}

func (c *MemPacketConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "memudp", Addr: c.LocalAddr(), Err: err}
}

// ReadFrom implements net.PacketConn.
func (c *MemPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, ap, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(ap), nil
}

// WriteTo implements net.PacketConn.
func (c *MemPacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ap, ok := addrPortOf(addr)
	if !ok {
		return 0, c.opErr("write", errors.New("address is not ip:port"))
	}
	return c.WriteToUDPAddrPort(b, ap)
}

// ReadFromUDPAddrPort reads the next due datagram; a datagram larger than b
// is truncated, as with a real socket.
func (c *MemPacketConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		c.mu.Lock()
		if c.isClose {
			c.mu.Unlock()
			return 0, netip.AddrPort{}, c.opErr("read", net.ErrClosed)
		}
		if c.rdl.expired() {
			c.mu.Unlock()
			return 0, netip.AddrPort{}, c.opErr("read", os.ErrDeadlineExceeded)
		}
		var wait time.Duration
		if len(c.q) > 0 {
			wait = time.Until(c.q[0].at)
			if wait <= 0 {
				p := c.popLocked()
				c.qBytes -= p.n
				c.delivered++
				c.mu.Unlock()
				n := copy(b, p.pb.b[:p.n])
				putBuf(p.pb)
				return n, p.from, nil
			}
		}
		var tc <-chan time.Time
		if wait > 0 {
			if c.timer == nil {
				c.timer = time.NewTimer(wait)
			} else {
				c.timer.Reset(wait)
			}
			tc = c.timer.C
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-tc:
		case <-c.closed:
		case <-c.rdl.wait():
		}
	}
}

// WriteToUDPAddrPort sends a datagram through the network. Like UDP it
// succeeds when the datagram is lost or nobody listens.
func (c *MemPacketConn) WriteToUDPAddrPort(b []byte, to netip.AddrPort) (int, error) {
	select {
	case <-c.closed:
		return 0, c.opErr("write", net.ErrClosed)
	default:
	}
	if c.wdl.expired() {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	if len(b) > c.net.cfg.MTU {
		return 0, c.opErr("write", syscall.EMSGSIZE)
	}
	to = normalize(to)
	now := time.Now()
	n := c.net
	n.mu.Lock()
	dst := n.eps[to]
	l := n.linkLocked(c.addr, to)
	cfg := l.cfg
	l.sent++
	lost := cfg.Loss > 0 && l.rng.Float64() < cfg.Loss
	dup := cfg.Duplicate > 0 && l.rng.Float64() < cfg.Duplicate
	reorder := cfg.Reorder > 0 && l.rng.Float64() < cfg.Reorder
	var jitter time.Duration
	if cfg.Jitter > 0 {
		jitter = time.Duration(l.rng.Int64N(int64(cfg.Jitter)))
	}
	at := now
	if cfg.Rate > 0 {
		if l.busy.Before(now) {
			l.busy = now
		}
		l.busy = l.busy.Add(time.Duration(float64(len(b)) / cfg.Rate * float64(time.Second)))
		at = l.busy
	}
	at = at.Add(cfg.Delay + jitter)
	if !reorder && !lost {
		if at.Before(l.last) {
			at = l.last
		}
		l.last = at
	}
	n.mu.Unlock()
	if dst == nil {
		return len(b), nil
	}
	if lost {
		dst.mu.Lock()
		dst.dropped++
		dst.mu.Unlock()
		return len(b), nil
	}
	if reorder {
		rd := cfg.ReorderDelay
		if rd <= 0 {
			rd = time.Millisecond
		}
		at = at.Add(rd)
	}
	limit := cfg.QueueBytes
	if limit <= 0 {
		limit = 8 << 20
	}
	copies := 1
	if dup {
		copies = 2
	}
	for range copies {
		dst.deliver(b, c.addr, at, limit)
	}
	return len(b), nil
}

func (c *MemPacketConn) deliver(b []byte, from netip.AddrPort, at time.Time, limit int) {
	c.mu.Lock()
	if c.isClose {
		c.mu.Unlock()
		return
	}
	if c.qBytes+len(b) > limit {
		c.dropped++
		c.mu.Unlock()
		return
	}
	pb := getBuf(len(b))
	copy(pb.b, b)
	c.pushLocked(memPkt{at: at, id: c.nextID, from: from, pb: pb, n: len(b)})
	c.nextID++
	c.qBytes += len(b)
	c.mu.Unlock()
	signal(c.notify)
}

func (c *MemPacketConn) less(i, j int) bool {
	if !c.q[i].at.Equal(c.q[j].at) {
		return c.q[i].at.Before(c.q[j].at)
	}
	return c.q[i].id < c.q[j].id
}

func (c *MemPacketConn) pushLocked(p memPkt) {
	c.q = append(c.q, p)
	i := len(c.q) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !c.less(i, parent) {
			break
		}
		c.q[i], c.q[parent] = c.q[parent], c.q[i]
		i = parent
	}
}

func (c *MemPacketConn) popLocked() memPkt {
	top := c.q[0]
	last := len(c.q) - 1
	c.q[0] = c.q[last]
	c.q[last] = memPkt{}
	c.q = c.q[:last]
	i := 0
	for {
		l, r := 2*i+1, 2*i+2
		m := i
		if l < len(c.q) && c.less(l, m) {
			m = l
		}
		if r < len(c.q) && c.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		c.q[i], c.q[m] = c.q[m], c.q[i]
		i = m
	}
	return top
}

var (
	_ net.PacketConn = (*MemPacketConn)(nil)
	_ apConn         = (*MemPacketConn)(nil)
)
