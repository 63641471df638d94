package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// streamLink is a Link over one reliable ordered byte stream (TCP, TLS,
// reliable UDP). It is the "generic stream link": anything that implements
// net.Conn can carry it.
type streamLink struct {
	kind Kind
	conn net.Conn
	cfg  *Config
	peer int
	w    *frameWriter
	r    *frameReader
	c    closer
	// progress counts the bytes of large payloads read (Progress).
	progress atomic.Uint64
	// upace paces the writes in user space where the kernel cannot (nil
	// where it can: TCP and TLS on Linux).
	upace *userPacer
	// broken is set when framing was lost (a cancelled partial write or
	// read, an invalid frame); the link is then closed.
	broken atomic.Pointer[error]

	// recvStoppable's wait, guarded by stopMu.
	stopMu   sync.Mutex
	waiting  bool // recvStoppable waits for a frame to begin
	stopped  bool // stopRecv was called and not yet consumed
	deadline bool // stopRecv set a read deadline in the past
}

var (
	_ Link            = (*streamLink)(nil)
	_ PartsSender     = (*streamLink)(nil)
	_ ProgressCounter = (*streamLink)(nil)
)

// newStreamLink wraps an authenticated connection.
func newStreamLink(kind Kind, conn net.Conn, cfg *Config, peer int) *streamLink {
	var rw io.ReadWriter = conn
	tc, vectored := conn.(*net.TCPConn)
	if vectored {
		if raw := rawStream(tc); raw != nil {
			rw = raw
		}
	}
	l := &streamLink{
		kind: kind,
		conn: conn,
		cfg:  cfg,
		peer: peer,
		r:    newFrameReader(rw, conn.SetReadDeadline, cfg, peer),
		c:    newCloser(),
	}
	if l.tcp() != nil && kernelPacing {
		l.w = newFrameWriter(rw, conn.SetWriteDeadline, vectored)
	} else {
		// Paced in user space (SetPacing), a chunk at a time.
		l.upace = &userPacer{}
		pw := &pacedWriter{w: rw, p: l.upace, quit: l.c.Quit}
		l.w = newFrameWriter(pw, pw.setDeadline(conn.SetWriteDeadline), false)
	}
	l.r.countInto(&l.progress)
	return l
}

// Progress implements ProgressCounter.
func (l *streamLink) Progress() uint64 { return l.progress.Load() }

func (l *streamLink) Peer() int            { return l.peer }
func (l *streamLink) Kind() Kind           { return l.kind }
func (l *streamLink) LocalAddr() net.Addr  { return l.conn.LocalAddr() }
func (l *streamLink) RemoteAddr() net.Addr { return l.conn.RemoteAddr() }

func (l *streamLink) opErr(op string, err error) error {
	return &OpError{Op: op, Transport: l.kind, Peer: l.peer, Addr: l.conn.RemoteAddr(), Err: err}
}

// deadErr returns the error for an operation on a closed or broken link.
func (l *streamLink) deadErr() error {
	if p := l.broken.Load(); p != nil {
		return fmt.Errorf("%w: link broken: %w", ErrClosed, *p)
	}
	return ErrClosed
}

// breakLink records why framing was lost, logs it and closes the link.
func (l *streamLink) breakLink(op string, err error) {
	if l.broken.CompareAndSwap(nil, &err) {
		l.cfg.Logger.Warn("transport: closing link", "op", op, "transport", l.kind.String(),
			"peer", l.peer, "remote", l.conn.RemoteAddr().String(), "err", err)
	}
	l.Close()
}

func (l *streamLink) Send(ctx context.Context, h Header, payload []byte) error {
	return l.SendParts(ctx, h, payload)
}

// SendParts implements PartsSender: the header and the parts leave in one
// vectored write (or one copy into the header's buffer when small).
func (l *streamLink) SendParts(ctx context.Context, h Header, parts ...[]byte) error {
	if h.Type == 0 {
		return l.opErr("send", fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	if int64(size) > l.cfg.MaxMessage {
		return l.opErr("send", &FrameError{Field: "length", Value: uint64(size), Limit: uint64(l.cfg.MaxMessage), Err: ErrTooLarge})
	}
	if err := l.w.mu.Acquire(ctx, l.c.Quit, ErrClosed); err != nil {
		if errors.Is(err, ErrClosed) {
			err = l.deadErr()
		}
		return l.opErr("send", err)
	}
	defer l.w.mu.Release()
	if l.c.IsClosed() {
		return l.opErr("send", l.deadErr())
	}
	h.Version, h.Job, h.Src, h.Len = Version, l.cfg.JobID, uint32(l.cfg.Rank), uint64(size)
	n, err := l.w.write(ctx, &h, parts...)
	if err == nil {
		return nil
	}
	cerr := classify(ctx, err, l.c.IsClosed())
	if l.c.IsClosed() {
		cerr = l.deadErr()
	} else if (n > 0 || !l.w.vectored) && !errors.Is(cerr, ErrPeerClosed) {
		// Framing is lost if part of the message went out. On anything but
		// a plain TCP socket (TLS, whose write timeouts are fatal to the
		// session; reliable UDP) an interrupted write is never trusted.
		l.breakLink("send", cerr)
	}
	return l.opErr("send", cerr)
}

func (l *streamLink) Recv(ctx context.Context) (Message, error) {
	if err := l.r.mu.Acquire(ctx, l.c.Quit, ErrClosed); err != nil {
		if errors.Is(err, ErrClosed) {
			err = l.deadErr()
		}
		return Message{}, l.opErr("recv", err)
	}
	defer l.r.mu.Release()
	if l.c.IsClosed() {
		return Message{}, l.opErr("recv", l.deadErr())
	}
	m, started, err := l.r.read(ctx)
	if err == nil {
		return m, nil
	}
	return Message{}, l.recvErr(ctx, err, started)
}

// recvStoppable implements stoppableLink: Recv(context.Background()),
// except that stopRecv ends its wait for the first byte of a frame.
func (l *streamLink) recvStoppable() (Message, error) {
	ctx := context.Background()
	if err := l.r.mu.Acquire(ctx, l.c.Quit, ErrClosed); err != nil {
		return Message{}, l.opErr("recv", l.deadErr())
	}
	defer l.r.mu.Release()
	if l.c.IsClosed() {
		return Message{}, l.opErr("recv", l.deadErr())
	}
	if l.r.r.Buffered() == 0 {
		l.stopMu.Lock()
		if l.stopped {
			l.stopped = false
			l.stopMu.Unlock()
			return Message{}, errRecvStopped
		}
		l.waiting = true
		l.stopMu.Unlock()
		_, err := l.r.r.Peek(1) // consumes nothing, whatever happens
		l.stopMu.Lock()
		l.waiting = false
		stopped := l.stopped
		l.stopped = false
		if l.deadline {
			// Cleared before any byte of the frame is consumed.
			l.deadline = false
			_ = l.r.setDeadline(time.Time{})
		}
		l.stopMu.Unlock()
		if stopped {
			return Message{}, errRecvStopped // what arrived stays buffered
		}
		if err != nil {
			return Message{}, l.recvErr(ctx, err, false)
		}
	}
	// A frame has begun: read it whole (read skips the wait, as the
	// buffer is not empty and ctx cannot end).
	m, started, err := l.r.read(ctx)
	if err == nil {
		return m, nil
	}
	return Message{}, l.recvErr(ctx, err, started)
}

// stopRecv implements stoppableLink.
func (l *streamLink) stopRecv() {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if l.waiting && !l.deadline {
		l.deadline = true
		_ = l.r.setDeadline(aLongTimeAgo)
	}
}

// recvErr classifies a failed read; started says whether it consumed
// part of a frame. It closes the link if framing was lost.
func (l *streamLink) recvErr(ctx context.Context, err error, started bool) error {
	cerr := classify(ctx, err, l.c.IsClosed())
	var fe *FrameError
	switch {
	case l.c.IsClosed():
		cerr = l.deadErr()
	case errors.As(cerr, &fe):
		l.breakLink("recv", cerr)
	case started && !errors.Is(cerr, ErrPeerClosed):
		l.breakLink("recv", cerr)
	}
	return l.opErr("recv", cerr)
}

func (l *streamLink) Close() error {
	l.c.Close(func() { _ = l.conn.Close() })
	return nil
}

// streamListener accepts connections from a byte-stream listener, runs the
// optional TLS upgrade and the membership handshake for each concurrently,
// and queues authenticated links for Accept.
type streamListener struct {
	kind   Kind
	cfg    *Config
	accept func() (net.Conn, error) // the raw listener's Accept
	addr   net.Addr
	lnStop func() error // closes the raw listener
	// upgrade, if set, wraps an accepted connection (TLS) before the
	// handshake and returns the channel binding.
	upgrade func(ctx context.Context, c net.Conn) (net.Conn, []byte, error)
	// verify, if set, checks the authenticated peer against the
	// connection (certificate fingerprint) before the handshake completes.
	verify func(c net.Conn, peer int) error
	// newLink makes the link of an authenticated connection; nil means a
	// streamLink over the connection.
	newLink func(c net.Conn, peer int) Link

	links chan Link
	c     closer
	wg    sync.WaitGroup // the accept loop and handshake goroutines
	mu    sync.Mutex     // guards pending
	// pending holds connections in handshake, closed by Close.
	pending map[net.Conn]struct{}
	sem     chan struct{} // bounds concurrent handshakes
}

var _ Listener = (*streamListener)(nil)

// maxConcurrentHandshakes bounds the connections a listener
// authenticates at once (a goroutine and a socket each). Beyond it the
// accept loop waits; a connection that says nothing is closed after
// Config.PreAuthTimeout, so a thousand idle ones delay a rank by that,
// not by the handshake timeout.
const maxConcurrentHandshakes = 4096

func newStreamListener(kind Kind, cfg *Config, addr net.Addr, accept func() (net.Conn, error), stop func() error) *streamListener {
	return &streamListener{
		kind:    kind,
		cfg:     cfg,
		accept:  accept,
		addr:    addr,
		lnStop:  stop,
		links:   make(chan Link, 16),
		c:       newCloser(),
		pending: make(map[net.Conn]struct{}),
		sem:     make(chan struct{}, maxConcurrentHandshakes),
	}
}

// start launches the accept loop; the listener owns it.
func (s *streamListener) start() {
	s.wg.Add(1)
	go s.acceptLoop()
}

func (s *streamListener) Addr() net.Addr { return s.addr }

func (s *streamListener) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.accept()
		if err != nil {
			if s.c.IsClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.cfg.Logger.Warn("transport: accept failed", "transport", s.kind.String(), "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-s.c.Quit:
				return
			}
			continue
		}
		select {
		case s.sem <- struct{}{}:
		case <-s.c.Quit:
			_ = conn.Close()
			return
		}
		s.mu.Lock()
		if s.c.IsClosed() {
			s.mu.Unlock()
			_ = conn.Close()
			<-s.sem
			return
		}
		s.pending[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

// serve authenticates one connection and queues its link.
func (s *streamListener) serve(conn net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.sem }()
	link, err := s.handshake(conn)
	s.mu.Lock()
	delete(s.pending, conn)
	s.mu.Unlock()
	if err != nil {
		_ = conn.Close()
		if !s.c.IsClosed() {
			logReject(s.cfg.Logger, s.kind, conn.RemoteAddr(), err)
		}
		return
	}
	select {
	case s.links <- link:
	case <-s.c.Quit:
		_ = link.Close()
	}
}

func (s *streamListener) handshake(conn net.Conn) (Link, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HandshakeTimeout)
	defer cancel()
	end, _ := ctx.Deadline()
	raw := conn
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(aLongTimeAgo) })
	defer stop()
	// The dialer speaks first, at once: a connection that stays silent
	// for PreAuthTimeout is dropped (see preAuthConn). With TLS the whole
	// TLS handshake must fit in it.
	var binding []byte
	if s.upgrade != nil {
		_ = raw.SetReadDeadline(time.Now().Add(s.cfg.PreAuthTimeout))
		c, b, err := s.upgrade(ctx, raw)
		if err != nil {
			return nil, &AuthError{Role: "listener", Remote: conn.RemoteAddr(), Rank: AnyRank, Err: timeoutErr(ctx, err)}
		}
		_ = raw.SetReadDeadline(end)
		conn, binding = c, b
	} else {
		conn = newPreAuthConn(raw, s.cfg.PreAuthTimeout, end)
	}
	p := hsParams{job: s.cfg.JobID, rank: s.cfg.Rank, secret: s.cfg.Secret, binding: binding}
	if s.verify != nil {
		p.check = func(peer int) error { return s.verify(conn, peer) }
	}
	peer, err := listenHandshake(conn, p)
	if pc, ok := conn.(*preAuthConn); ok && err != nil && !pc.spoke.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &AuthError{Role: "listener", Remote: raw.RemoteAddr(), Rank: AnyRank,
			Err: fmt.Errorf("%w: the peer said nothing for %v (PreAuthTimeout)", context.DeadlineExceeded, s.cfg.PreAuthTimeout)}
	}
	if err != nil {
		return nil, fixAuthErr(ctx, err, conn.RemoteAddr())
	}
	if !stop() {
		return nil, &AuthError{Role: "listener", Remote: conn.RemoteAddr(), Rank: peer, Err: context.DeadlineExceeded}
	}
	if pc, ok := conn.(*preAuthConn); ok {
		conn = pc.Conn // the link uses the socket itself (pacing, writev)
	}
	_ = raw.SetReadDeadline(time.Time{})
	if s.newLink != nil {
		_ = conn.Close()
		return s.newLink(conn, peer), nil
	}
	return newStreamLink(s.kind, conn, s.cfg, peer), nil
}

func (s *streamListener) Accept(ctx context.Context) (Link, error) {
	select {
	case l := <-s.links:
		return l, nil
	default:
	}
	select {
	case l := <-s.links:
		return l, nil
	case <-ctx.Done():
		return nil, &OpError{Op: "accept", Transport: s.kind, Peer: AnyRank, Addr: s.addr, Err: ctx.Err()}
	case <-s.c.Quit:
		return nil, &OpError{Op: "accept", Transport: s.kind, Peer: AnyRank, Addr: s.addr, Err: ErrClosed}
	}
}

func (s *streamListener) Close() error {
	var err error
	s.c.Close(func() {
		err = s.lnStop()
		s.mu.Lock()
		for c := range s.pending {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		for {
			select {
			case l := <-s.links:
				_ = l.Close()
				continue
			default:
			}
			break
		}
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// timeoutErr turns an I/O error caused by the handshake's deadline into
// that context's error.
func timeoutErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// fixAuthErr fills in the remote address of an *AuthError and marks
// timeouts.
func fixAuthErr(ctx context.Context, err error, remote net.Addr) error {
	var ae *AuthError
	if errors.As(err, &ae) {
		ae.Remote = remote
		ae.Err = timeoutErr(ctx, ae.Err)
		return ae
	}
	return timeoutErr(ctx, err)
}

func logReject(log *slog.Logger, kind Kind, remote net.Addr, err error) {
	addr := ""
	if remote != nil {
		addr = remote.String()
	}
	log.Warn("transport: rejected connection", "transport", kind.String(), "remote", addr, "err", err)
}

// dialStream runs the dialer side of the membership handshake on conn
// within ctx and the handshake timeout, and returns the link.
func dialStream(ctx context.Context, kind Kind, conn net.Conn, cfg *Config, peer int, binding []byte, verify func(int) error) (Link, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	got, err := dialHandshake(conn, hsParams{job: cfg.JobID, rank: cfg.Rank, secret: cfg.Secret, binding: binding, check: verify}, peer)
	if !stop() && err == nil {
		err = &AuthError{Role: "dialer", Rank: got, Err: ctx.Err()}
	}
	if err != nil {
		_ = conn.Close()
		return nil, &OpError{Op: "dial", Transport: kind, Peer: peer, Addr: conn.RemoteAddr(), Err: fixAuthErr(ctx, err, conn.RemoteAddr())}
	}
	return newStreamLink(kind, conn, cfg, got), nil
}

// preAuthConn is an accepted connection, during its handshake, whose
// first bytes must arrive within a deadline: reading stops at it until
// some data came, and then at the handshake's own deadline.
type preAuthConn struct {
	net.Conn
	end   time.Time // the handshake's deadline
	spoke atomic.Bool
}

func newPreAuthConn(c net.Conn, d time.Duration, end time.Time) *preAuthConn {
	_ = c.SetReadDeadline(time.Now().Add(d))
	return &preAuthConn{Conn: c, end: end}
}

func (c *preAuthConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.spoke.Swap(true) {
		_ = c.Conn.SetReadDeadline(c.end)
	}
	return n, err
}
