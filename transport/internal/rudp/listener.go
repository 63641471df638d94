package rudp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Listener accepts connections on one UDP socket and demultiplexes their
// datagrams by the peer's address (and checks the connection id).
//
// A SYN creates a half-open connection, which Accept returns once the peer
// has sent a packet naming the connection's id (proof that it received the
// SYNACK). A SYN never replaces a connection that its address already has
// (docs/rudp.md, "Restart"). With Config.Key, control packets without a
// valid MAC are dropped before they reach any connection.
//
// Closing a Listener stops new connections and aborts those not yet
// accepted; accepted connections keep working on the shared socket, which is
// closed when the last of them closes (the last Conn.Close then also waits
// for the listener's reader goroutine).
type Listener struct {
	pc   net.PacketConn
	ap   apConn
	cfg  Config
	addr net.Addr
	auth *authKey

	rstLim rstLimiter // reflected RSTs; used by the reader only

	acceptq chan *Conn
	quit    chan struct{}
	wg      sync.WaitGroup // the reader goroutine
	once    sync.Once

	mu         sync.Mutex
	conns      map[netip.AddrPort]*Conn // by peer address
	ids        map[uint64]*Conn         // the same connections by their local id
	pending    map[*Conn]struct{}       // half-open (stateSynRcvd), not yet queued for Accept
	refs       int                      // live connections using the socket
	closed     bool
	sockClosed bool

	malformed, unknown, backlogDrops, created, unauth, contested atomic.Uint64
}

// ListenerStats counts what the listener's reader saw.
type ListenerStats struct {
	Malformed    uint64 // datagrams that failed validation (garbage, truncated, oversized)
	Unknown      uint64 // well-formed non-SYN datagrams from addresses with no connection
	BacklogDrops uint64 // SYNs dropped because the accept queue (half-open connections included) was full
	Created      uint64 // connections created by SYNs (half-open at first)
	// Unauthenticated counts control packets (SYN, SYNACK, RST) dropped
	// because their MAC was missing or wrong (only with Config.Key).
	Unauthenticated uint64
	// Contested counts SYNs with a new connection id from an address that
	// has a connection: ignored, the connection was probed instead.
	Contested uint64
	Conns     int // live connections, half-open ones included
	HalfOpen  int // connections waiting for the handshake's last packet
}

// Listen opens a UDP socket on laddr ("ip:port"; network "udp", "udp4" or
// "udp6") and accepts rudp connections on it.
func Listen(network, laddr string, cfg Config) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("rudp: listen: unsupported network %q", network)
	}
	ua, err := resolveUDP(context.Background(), network, laddr)
	if err != nil {
		return nil, fmt.Errorf("rudp: listen %s: %w", laddr, err)
	}
	uc, err := net.ListenUDP(network, ua)
	if err != nil {
		return nil, fmt.Errorf("rudp: listen %s: %w", laddr, err)
	}
	setSocketBuffers(uc, cfg.resolved().SocketBuffer)
	return listenOn(uc, cfg), nil
}

// ListenPacketConn accepts rudp connections on pc, which the Listener then
// owns. Use it with MemNetwork for tests.
func ListenPacketConn(pc net.PacketConn, cfg Config) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if uc, ok := pc.(*net.UDPConn); ok {
		setSocketBuffers(uc, cfg.resolved().SocketBuffer)
	}
	return listenOn(pc, cfg), nil
}

func listenOn(pc net.PacketConn, cfg Config) *Listener {
	cfg = cfg.resolved()
	l := &Listener{
		pc:      pc,
		ap:      asAPConn(pc),
		cfg:     cfg,
		addr:    pc.LocalAddr(),
		auth:    newAuthKey(cfg.Key),
		acceptq: make(chan *Conn, cfg.AcceptBacklog),
		quit:    make(chan struct{}),
		conns:   make(map[netip.AddrPort]*Conn),
		ids:     make(map[uint64]*Conn),
		pending: make(map[*Conn]struct{}),
	}
	l.wg.Add(1)
	go l.readLoop()
	return l
}

// Addr returns the listener's local address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Accept waits for the next connection. The error wraps ctx.Err() when ctx
// ends first, and matches net.ErrClosed after Close.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.acceptq:
		return c, nil
	default:
	}
	select {
	case c := <-l.acceptq:
		return c, nil
	case <-l.quit:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("rudp: accept: %w", ctx.Err())
	}
}

// Close stops accepting. Connections not yet accepted (half-open ones
// included) are aborted; accepted ones are not (see Listener). Close is
// idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.quit)
		l.mu.Unlock()
		for {
			select {
			case c := <-l.acceptq:
				c.teardown(ErrClosed, true)
				c.wg.Wait()
				continue
			default:
			}
			break
		}
		// No connection joins pending once closed is set (newConn checks
		// it), and promote aborts those it finds after it.
		l.mu.Lock()
		pend := make([]*Conn, 0, len(l.pending))
		for c := range l.pending {
			pend = append(pend, c)
		}
		l.mu.Unlock()
		for _, c := range pend {
			c.teardown(ErrClosed, true)
			c.wg.Wait()
		}
		l.mu.Lock()
		closeSock := l.refs == 0 && !l.sockClosed
		if closeSock {
			l.sockClosed = true
		}
		l.mu.Unlock()
		if closeSock {
			_ = l.pc.Close()
		}
	})
	l.wait()
	return nil
}

// wait waits for the reader once the socket is being closed.
func (l *Listener) wait() {
	l.mu.Lock()
	done := l.sockClosed
	l.mu.Unlock()
	if done {
		l.wg.Wait()
	}
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	n, half := len(l.conns), len(l.pending)
	l.mu.Unlock()
	return ListenerStats{
		Malformed:       l.malformed.Load(),
		Unknown:         l.unknown.Load(),
		BacklogDrops:    l.backlogDrops.Load(),
		Created:         l.created.Load(),
		Unauthenticated: l.unauth.Load(),
		Contested:       l.contested.Load(),
		Conns:           n,
		HalfOpen:        half,
	}
}

func (l *Listener) readLoop() {
	defer l.wg.Done()
	pb := getBuf(largeBufSize)
	defer func() { putBuf(pb) }()
	errs := 0
	for {
		n, from, err := l.ap.ReadFromUDPAddrPort(pb.b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.socketGone()
				return
			}
			errs++
			readLoopBackoff(errs)
			continue
		}
		errs = 0
		from = normalize(from)
		var h header
		payload, err := decodeDatagram(pb.b, n, &h)
		if err != nil {
			l.malformed.Add(1)
			continue
		}
		if !l.auth.check(&h, pb.b[:n]) {
			// Without proof of the key: no connection sees it.
			l.unauth.Add(1)
			if h.typ == typeSYN {
				l.refuseSYN(&h, payload, from)
			}
			continue
		}
		l.mu.Lock()
		c := l.conns[from]
		l.mu.Unlock()
		if h.typ == typeSYN {
			info, err := decodeSYN(payload)
			if err != nil {
				l.malformed.Add(1)
				continue
			}
			if c == nil {
				l.newConn(from, &h, info)
				continue
			}
			if c.peerID != info.srcID {
				// Another connection id from an address that has a
				// connection: a peer that restarted on the same port, or
				// a delayed or replayed SYN. A SYN is no proof that the
				// connection is dead, so it stays; it is probed, and a
				// restarted peer's socket answers the probe with an RST
				// that ends it (docs/rudp.md, "Restart").
				l.contested.Add(1)
				c.probe()
				continue
			}
		}
		if c == nil {
			l.unknown.Add(1)
			if h.typ != typeRST {
				l.reflectRST(&h, from)
			}
			continue
		}
		if c.handlePacket(&h, payload, pb) {
			pb = getBuf(largeBufSize)
		}
	}
}

// reflectRST answers a packet for a connection this listener no longer has
// (closed, or lost in a restart) with an RST naming the id the packet was
// addressed to; the peer accepts it because that is the id it knows for
// us. It never names the id of a live connection (a packet naming one from
// another address is misdirected or forged), and reflected RSTs are rate
// limited (rstLimiter).
func (l *Listener) reflectRST(h *header, to netip.AddrPort) {
	l.mu.Lock()
	live := l.ids[h.dst] != nil
	l.mu.Unlock()
	if live || !l.rstLim.allow(time.Now()) {
		return
	}
	var b [maxCtrlLen]byte
	_, _ = l.ap.WriteToUDPAddrPort(buildRST(b[:], h.dst, 0, h.tsecr, l.auth), to)
}

// refuseSYN answers a SYN whose MAC did not verify, from an address that
// has no connection, with an RST (unauthenticated, 36 bytes) naming the id
// the SYN carried. A dialling client with a key, the only one that knows
// that fresh id, then fails at once with ErrKeyMismatch instead of waiting
// for its idle timeout; anyone else drops it. Rate limited with the
// reflected RSTs.
func (l *Listener) refuseSYN(h *header, payload []byte, from netip.AddrPort) {
	info, err := decodeSYN(payload)
	if err != nil {
		return
	}
	l.mu.Lock()
	busy := l.conns[from] != nil || l.ids[info.srcID] != nil
	l.mu.Unlock()
	if busy || !l.rstLim.allow(time.Now()) {
		return
	}
	var b [headerLen]byte
	rst := header{typ: typeRST, dst: info.srcID, tsval: h.tsecr}
	_, _ = l.ap.WriteToUDPAddrPort(b[:rst.encode(b[:])], from)
}

// socketGone tears down every connection when the socket closed under them.
func (l *Listener) socketGone() {
	l.mu.Lock()
	l.sockClosed = true
	conns := make([]*Conn, 0, len(l.conns))
	for _, c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.teardown(ErrClosed, false)
	}
}

func (l *Listener) newConn(from netip.AddrPort, h *header, info synInfo) {
	size := l.cfg.MaxPacketSize
	if size == 0 {
		local, _ := addrPortOf(l.addr)
		size = pathPacketSize(l.pc, local.Addr(), from.Addr())
	}
	size = min(size, int(info.maxPacket))

	l.mu.Lock()
	if l.closed || l.sockClosed {
		l.mu.Unlock()
		return
	}
	// Half-open connections hold a place in the accept queue, so that
	// promote never blocks.
	if len(l.acceptq)+len(l.pending) >= cap(l.acceptq) {
		l.mu.Unlock()
		l.backlogDrops.Add(1)
		return
	}
	c := newConn(l.cfg, listenEP{l}, l.addr, net.UDPAddrFromAddrPort(from), from, false)
	c.auth = l.auth
	c.promote = func() { l.promote(c) }
	c.localID = newID()
	for l.ids[c.localID] != nil {
		c.localID = newID()
	}
	c.peerID = info.srcID
	c.setPacketSize(size)
	c.state = stateSynRcvd
	c.snd.peerEdge = uint64(min(h.wnd, 1<<24))
	now := c.now()
	c.noteEchoLocked(h, now)
	c.synackDue = true
	// A half-open connection lives for the idle timeout at most, whatever
	// arrives meanwhile (SYN retransmissions do not extend it).
	halfOpen := l.cfg.IdleTimeout
	if halfOpen <= 0 {
		halfOpen = defaultIdleTimeout
	}
	c.synAt = now + halfOpen
	c.armLocked(c.synAt)
	l.conns[from] = c
	l.ids[c.localID] = c
	l.pending[c] = struct{}{}
	l.refs++
	// Started under l.mu, so that Close, which finds c in pending, also
	// waits for its goroutine.
	c.start(nil)
	l.mu.Unlock()
	l.created.Add(1)
	c.flush()
}

// promote queues a connection whose handshake completed for Accept. It is
// called by the reader, without any lock held.
func (l *Listener) promote(c *Conn) {
	l.mu.Lock()
	if _, ok := l.pending[c]; !ok {
		l.mu.Unlock()
		return // torn down meanwhile
	}
	delete(l.pending, c)
	if l.closed || l.sockClosed {
		l.mu.Unlock()
		c.teardown(ErrClosed, true)
		return
	}
	l.acceptq <- c // cannot block: c held a place since newConn
	l.mu.Unlock()
}

// listenEP is the endpoint of a connection accepted by a Listener.
type listenEP struct{ l *Listener }

func (e listenEP) write(b []byte, to netip.AddrPort) error {
	_, err := e.l.ap.WriteToUDPAddrPort(b, to)
	return err
}

func (e listenEP) detach(c *Conn) {
	l := e.l
	l.mu.Lock()
	if l.conns[c.peer] == c {
		delete(l.conns, c.peer)
	}
	if l.ids[c.localID] == c {
		delete(l.ids, c.localID)
	}
	delete(l.pending, c)
	l.refs--
	closeSock := l.closed && l.refs == 0 && !l.sockClosed
	if closeSock {
		l.sockClosed = true
	}
	l.mu.Unlock()
	if closeSock {
		_ = l.pc.Close()
	}
}

func (e listenEP) wait() { e.l.wait() }

// NetListener adapts l to net.Listener (Accept without a context), for code
// written against TCP listeners. Closing it closes l.
func (l *Listener) NetListener() net.Listener { return netListener{l} }

type netListener struct{ l *Listener }

func (n netListener) Accept() (net.Conn, error) {
	c, err := n.l.Accept(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (n netListener) Close() error   { return n.l.Close() }
func (n netListener) Addr() net.Addr { return n.l.Addr() }

var _ net.Listener = netListener{}
