package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// MemNetwork is an in-process network: links are message queues between
// goroutines, with no sockets. Connections still run the membership
// handshake (over an in-memory pipe), so authentication behaves as on the
// wire. Each direction of each link can be shaped (rate, delay, seeded
// loss, see ShapeConfig), which makes deterministic tests of higher layers
// and emulated heterogeneous networks possible without root.
type MemNetwork struct {
	mu        sync.Mutex
	seed      uint64
	listeners map[string]*memListener
	def       ShapeConfig
	shapes    map[[2]int]ShapeConfig
	streams   uint64 // pacer streams handed out, for distinct seeds
}

var _ Network = (*MemNetwork)(nil)

// NewMemNetwork returns an empty in-process network. seed seeds the loss
// draws of every shaped link (combined with ShapeConfig.Seed).
func NewMemNetwork(seed uint64) *MemNetwork {
	return &MemNetwork{seed: seed, listeners: map[string]*memListener{}, shapes: map[[2]int]ShapeConfig{}}
}

// Kind is KindMem.
func (n *MemNetwork) Kind() Kind { return KindMem }

// SetDefaultShape shapes every link direction dialed afterwards that has no
// shape of its own.
func (n *MemNetwork) SetDefaultShape(s ShapeConfig) error {
	if err := s.validate(); err != nil {
		return err
	}
	n.mu.Lock()
	n.def = s
	n.mu.Unlock()
	return nil
}

// SetShape shapes the direction from rank from to rank to of links dialed
// afterwards.
func (n *MemNetwork) SetShape(from, to int, s ShapeConfig) error {
	if err := s.validate(); err != nil {
		return err
	}
	n.mu.Lock()
	n.shapes[[2]int{from, to}] = s
	n.mu.Unlock()
	return nil
}

func (n *MemNetwork) newPipe(from, to int, alloc func(Header) []byte) *memPipe {
	n.mu.Lock()
	s, ok := n.shapes[[2]int{from, to}]
	if !ok {
		s = n.def
	}
	n.streams++
	stream := n.streams
	n.mu.Unlock()
	p := &memPipe{alloc: alloc, notify: make(chan struct{}), window: s.window()}
	if !s.isZero() {
		s.Seed ^= n.seed * 0x9e3779b97f4a7c15
		p.pacer = newPacer(s, stream)
	}
	return p
}

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// Listen registers a listener under the name addr.
func (n *MemNetwork) Listen(addr string, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ml := &memListener{n: n, addr: memAddr(addr), cfg: &c, conns: make(chan net.Conn)}
	s := newStreamListener(KindMem, &c, ml.addr, ml.accept, ml.stop)
	s.newLink = func(conn net.Conn, peer int) Link {
		mc := conn.(*memConn)
		return newMemLink(mc.end, &c, peer, mc.remote, ml.addr)
	}
	ml.s = s
	ml.quit = s.c.Quit
	// Publish the listener only once it is complete: Dial reads it.
	n.mu.Lock()
	if _, dup := n.listeners[addr]; dup {
		n.mu.Unlock()
		return nil, &OpError{Op: "listen", Transport: KindMem, Peer: AnyRank, Addr: memAddr(addr), Err: errors.New("address in use")}
	}
	n.listeners[addr] = ml
	n.mu.Unlock()
	s.start()
	return s, nil
}

// memListener feeds handshake pipes to a streamListener.
type memListener struct {
	n     *MemNetwork
	addr  memAddr
	cfg   *Config
	conns chan net.Conn
	s     *streamListener
	quit  <-chan struct{}
}

func (ml *memListener) accept() (net.Conn, error) {
	select {
	case c := <-ml.conns:
		return c, nil
	case <-ml.quit:
		return nil, net.ErrClosed
	}
}

func (ml *memListener) stop() error {
	ml.n.mu.Lock()
	if ml.n.listeners[string(ml.addr)] == ml {
		delete(ml.n.listeners, string(ml.addr))
	}
	ml.n.mu.Unlock()
	return nil
}

// memConn is one end of the handshake pipe; it carries the link's queues
// to the listener.
type memConn struct {
	net.Conn
	end    memEnd
	local  net.Addr
	remote net.Addr
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

// memEnd is one side's view of a link: the queue it sends on and the one
// it receives from.
type memEnd struct {
	out, in *memPipe
}

// Dial connects to the listener registered as addr.
func (n *MemNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	ml := n.listeners[addr]
	n.mu.Unlock()
	if ml == nil {
		return nil, &OpError{Op: "dial", Transport: KindMem, Peer: peer, Addr: memAddr(addr), Err: errors.New("connection refused")}
	}
	// Both queues are made now, with the shape of each direction and the
	// receiver's Alloc hook; the handshake decides whether they are used.
	up := n.newPipe(c.Rank, ml.cfg.Rank, ml.cfg.Alloc)
	down := n.newPipe(ml.cfg.Rank, c.Rank, c.Alloc)
	local := memAddr(fmt.Sprintf("%s<-rank-%d", addr, c.Rank))
	dc, lc := net.Pipe()
	dconn := &memConn{Conn: dc, end: memEnd{out: up, in: down}, local: local, remote: ml.addr}
	lconn := &memConn{Conn: lc, end: memEnd{out: down, in: up}, local: ml.addr, remote: local}
	select {
	case ml.conns <- lconn:
	case <-ctx.Done():
		return nil, &OpError{Op: "dial", Transport: KindMem, Peer: peer, Addr: ml.addr, Err: ctx.Err()}
	case <-ml.quit:
		return nil, &OpError{Op: "dial", Transport: KindMem, Peer: peer, Addr: ml.addr, Err: errors.New("connection refused")}
	}
	l, err := dialStream(ctx, KindMem, dconn, &c, peer, nil, nil)
	if err != nil {
		return nil, err
	}
	sl := l.(*streamLink)
	_ = dconn.Close()
	return newMemLink(dconn.end, &c, sl.peer, ml.addr, local), nil
}

// memItem is a message in flight on a memPipe.
type memItem struct {
	m  Message
	at time.Time // arrival
}

// memPipe is one direction of a mem link. Lock order: memPipe.mu, then
// pacer.mu. MemNetwork.mu is never held with either.
type memPipe struct {
	alloc  func(Header) []byte // the receiver's Config.Alloc
	pacer  *pacer              // nil if unshaped
	window int

	mu             sync.Mutex // guards everything below
	q              []memItem
	queued         int
	senderClosed   bool
	receiverClosed bool
	notify         chan struct{} // closed and replaced on every change
}

func (p *memPipe) changed() {
	close(p.notify)
	p.notify = make(chan struct{})
}

type memLink struct {
	end    memEnd
	cfg    *Config
	peer   int
	local  net.Addr
	remote net.Addr
	c      closer

	stopped bool // stopRecv was called and not yet consumed; guarded by end.in.mu
	// pace paces the messages sent (SetPacing), a message at a time;
	// messages under pacedSmall, the control messages, pass, as on the
	// paced streams.
	pace userPacer
}

var _ Link = (*memLink)(nil)

// SetPacing implements Pacer in user space.
func (l *memLink) SetPacing(rate float64) error {
	l.pace.setRate(rate)
	return nil
}

// PacingRate returns the rate SetPacing set (0: unlimited).
func (l *memLink) PacingRate() float64 { return l.pace.limit() }

func newMemLink(end memEnd, cfg *Config, peer int, remote, local net.Addr) *memLink {
	return &memLink{end: end, cfg: cfg, peer: peer, local: local, remote: remote, c: newCloser()}
}

func (l *memLink) Peer() int            { return l.peer }
func (l *memLink) Kind() Kind           { return KindMem }
func (l *memLink) LocalAddr() net.Addr  { return l.local }
func (l *memLink) RemoteAddr() net.Addr { return l.remote }

func (l *memLink) opErr(op string, err error) error {
	return &OpError{Op: op, Transport: KindMem, Peer: l.peer, Addr: l.remote, Err: err}
}

func (l *memLink) Send(ctx context.Context, h Header, payload []byte) error {
	if h.Type == 0 {
		return l.opErr("send", fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	if int64(len(payload)) > l.cfg.MaxMessage {
		return l.opErr("send", &FrameError{Field: "length", Value: uint64(len(payload)), Limit: uint64(l.cfg.MaxMessage), Err: ErrTooLarge})
	}
	if len(payload) >= pacedSmall {
		if err := l.pace.wait(len(payload), l.c.Quit, ctx.Done(), nil); err != nil {
			if errors.Is(err, context.Canceled) {
				err = ctx.Err()
			}
			return l.opErr("send", err)
		}
	}
	p := l.end.out
	size := len(payload) + HeaderSize
	h.Version, h.Job, h.Src, h.Len = Version, l.cfg.JobID, uint32(l.cfg.Rank), uint64(len(payload))
	// The copy is the "transmission": it lands where the receiver's Alloc
	// hook says, as a socket read would. The hook runs outside p.mu.
	var buf []byte
	if p.alloc != nil {
		if b := p.alloc(h); cap(b) >= len(payload) {
			buf = b[:len(payload)]
		}
	}
	if buf == nil {
		buf = make([]byte, len(payload))
	}
	copy(buf, payload)
	p.mu.Lock()
	for {
		switch {
		case p.senderClosed:
			p.mu.Unlock()
			return l.opErr("send", ErrClosed)
		case p.receiverClosed:
			p.mu.Unlock()
			return l.opErr("send", ErrPeerClosed)
		}
		if p.queued == 0 || p.queued+size <= p.window {
			break
		}
		ch := p.notify
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return l.opErr("send", ctx.Err())
		}
		p.mu.Lock()
	}
	now := time.Now()
	depart, arrive := now, now
	if p.pacer != nil {
		depart, arrive = p.pacer.schedule(now, len(payload))
	}
	p.q = append(p.q, memItem{m: Message{Header: h, Payload: buf}, at: arrive})
	p.queued += size
	p.changed()
	p.mu.Unlock()
	if err := sleepUntil(ctx, depart, l.c.Quit); err != nil {
		if !errors.Is(err, ErrClosed) {
			l.Close() // the message is half sent: end the link
		}
		return l.opErr("send", err)
	}
	return nil
}

func (l *memLink) Recv(ctx context.Context) (Message, error) {
	return l.recv(ctx, false)
}

// recvStoppable implements stoppableLink.
func (l *memLink) recvStoppable() (Message, error) {
	return l.recv(context.Background(), true)
}

// stopRecv implements stoppableLink.
func (l *memLink) stopRecv() {
	p := l.end.in
	p.mu.Lock()
	if !l.stopped {
		l.stopped = true
		p.changed()
	}
	p.mu.Unlock()
}

func (l *memLink) recv(ctx context.Context, stoppable bool) (Message, error) {
	p := l.end.in
	p.mu.Lock()
	for {
		if p.receiverClosed {
			p.mu.Unlock()
			return Message{}, l.opErr("recv", ErrClosed)
		}
		var timer *time.Timer
		var wait <-chan time.Time
		if len(p.q) > 0 {
			it := p.q[0]
			d := time.Until(it.at)
			if d <= 0 {
				p.q[0] = memItem{}
				p.q = p.q[1:]
				p.queued -= len(it.m.Payload) + HeaderSize
				p.changed()
				p.mu.Unlock()
				return it.m, nil
			}
			timer = time.NewTimer(d)
			wait = timer.C
		} else if p.senderClosed {
			p.mu.Unlock()
			return Message{}, l.opErr("recv", ErrPeerClosed)
		}
		if stoppable && l.stopped {
			l.stopped = false
			p.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return Message{}, errRecvStopped
		}
		ch := p.notify
		p.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-wait:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return Message{}, l.opErr("recv", err)
		}
		p.mu.Lock()
	}
}

func (l *memLink) Close() error {
	l.c.Close(func() {
		out, in := l.end.out, l.end.in
		out.mu.Lock()
		out.senderClosed = true
		out.changed()
		out.mu.Unlock()
		in.mu.Lock()
		in.receiverClosed = true
		in.q = nil
		in.queued = 0
		in.changed()
		in.mu.Unlock()
	})
	return nil
}
