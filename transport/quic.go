package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// The QUIC transport. One QUIC connection per peer and rail. Channel 0
// (control) is the bidirectional stream the dialer opens first; the
// membership handshake runs on it, then it carries control-channel frames
// both ways. Every other channel is a unidirectional stream that each side
// opens when it first sends on that channel; its first byte names the
// channel, then frames follow. Each channel is read by its own goroutine,
// so a 64 MiB rendezvous payload on the bulk stream neither blocks nor
// delays a heartbeat on the control stream: ordering holds per channel
// (ChannelOf), not across channels.

type quicNetwork struct{}

var _ Network = quicNetwork{}

func (quicNetwork) Kind() Kind { return KindQUIC }

// QUIC application error codes sent on close.
const (
	quicCodeClosed   quic.ApplicationErrorCode = 0
	quicCodeAuth     quic.ApplicationErrorCode = 1
	quicCodeBadFrame quic.ApplicationErrorCode = 2
)

// Stream scheduling urgencies (0 is the most urgent).
const (
	quicUrgencyControl = 0
	quicUrgencyBulk    = 4
)

func quicConfig(c *Config) *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           c.HandshakeTimeout,
		MaxIdleTimeout:                 c.QUIC.IdleTimeout,
		KeepAlivePeriod:                c.QUIC.KeepAlive,
		InitialStreamReceiveWindow:     c.QUIC.StreamWindow,
		MaxStreamReceiveWindow:         c.QUIC.StreamWindow,
		InitialConnectionReceiveWindow: c.QUIC.ConnWindow,
		MaxConnectionReceiveWindow:     c.QUIC.ConnWindow,
		MaxIncomingStreams:             4,
		MaxIncomingUniStreams:          numChannels + 2,
	}
}

func (n quicNetwork) Listen(addr string, cfg Config) (Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (Listener, error) {
		return nil, &OpError{Op: "listen", Transport: KindQUIC, Peer: AnyRank, Err: err}
	}
	id, err := identity(&c)
	if err != nil {
		return fail(err)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fail(err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return fail(err)
	}
	tr := &quic.Transport{Conn: udp}
	ln, err := tr.Listen(tlsConfig(&c, id, true), quicConfig(&c))
	if err != nil {
		_ = tr.Close()
		_ = udp.Close()
		return fail(err)
	}
	l := &quicListener{cfg: &c, tr: tr, udp: udp, ln: ln, links: make(chan Link, 16), c: newCloser(),
		pending: map[*quic.Conn]struct{}{}}
	l.refs.Store(1) // the listener's own reference
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

type quicListener struct {
	cfg    *Config
	tr     *quic.Transport
	udp    *net.UDPConn
	ln     *quic.Listener
	links  chan Link
	c      closer
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // acceptLoop and handshakes

	mu      sync.Mutex // guards pending
	pending map[*quic.Conn]struct{}

	// refs counts the users of the UDP socket: the listener until Close,
	// and every accepted link until its Close. The last one closes it.
	refs atomic.Int64
}

func (l *quicListener) unref() {
	if l.refs.Add(-1) == 0 {
		_ = l.tr.Close()
		_ = l.udp.Close()
	}
}

var _ Listener = (*quicListener)(nil)

func (l *quicListener) Addr() net.Addr { return l.ln.Addr() }

func (l *quicListener) acceptLoop() {
	defer l.wg.Done()
	sem := make(chan struct{}, maxConcurrentHandshakes)
	for {
		conn, err := l.ln.Accept(l.ctx)
		if err != nil {
			if l.c.isClosed() {
				return
			}
			l.cfg.Logger.Warn("transport: accept failed", "transport", "quic", "err", err)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-l.c.quit:
			_ = conn.CloseWithError(quicCodeClosed, "listener closed")
			return
		}
		l.mu.Lock()
		l.pending[conn] = struct{}{}
		l.mu.Unlock()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { <-sem }()
			link, err := l.handshake(conn)
			l.mu.Lock()
			delete(l.pending, conn)
			l.mu.Unlock()
			if err != nil {
				_ = conn.CloseWithError(quicCodeAuth, "handshake failed")
				if !l.c.isClosed() {
					logReject(l.cfg.Logger, KindQUIC, conn.RemoteAddr(), err)
				}
				return
			}
			select {
			case l.links <- link:
			case <-l.c.quit:
				_ = link.Close()
			}
		}()
	}
}

func (l *quicListener) handshake(conn *quic.Conn) (Link, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	defer cancel()
	remote := conn.RemoteAddr()
	authErr := func(rank int, err error) error {
		return &AuthError{Role: "listener", Remote: remote, Rank: rank, Err: timeoutErr(ctx, err)}
	}
	st, err := conn.AcceptStream(ctx)
	if err != nil {
		return nil, authErr(AnyRank, err)
	}
	cs := conn.ConnectionState().TLS
	binding, err := tlsBinding(&cs)
	if err != nil {
		return nil, authErr(AnyRank, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(aLongTimeAgo) })
	peer, err := listenHandshake(st, hsParams{job: l.cfg.JobID, rank: l.cfg.Rank, secret: l.cfg.Secret, binding: binding,
		check: func(peer int) error { return checkFingerprint(l.cfg, peer, &cs) }})
	if !stop() && err == nil {
		err = authErr(peer, context.DeadlineExceeded)
	}
	if err != nil {
		return nil, fixAuthErr(ctx, err, remote)
	}
	l.refs.Add(1)
	return newQUICLink(conn, st, l.cfg, peer, l.unref), nil
}

func (l *quicListener) Accept(ctx context.Context) (Link, error) {
	select {
	case link := <-l.links:
		return link, nil
	default:
	}
	select {
	case link := <-l.links:
		return link, nil
	case <-ctx.Done():
		return nil, &OpError{Op: "accept", Transport: KindQUIC, Peer: AnyRank, Addr: l.Addr(), Err: ctx.Err()}
	case <-l.c.quit:
		return nil, &OpError{Op: "accept", Transport: KindQUIC, Peer: AnyRank, Addr: l.Addr(), Err: ErrClosed}
	}
}

// Close stops accepting. Links already accepted keep the UDP socket open
// until they close too: the socket is shared by all of them.
func (l *quicListener) Close() error {
	l.c.close(func() {
		defer l.unref()
		l.cancel()
		_ = l.ln.Close()
		l.mu.Lock()
		for c := range l.pending {
			_ = c.CloseWithError(quicCodeClosed, "listener closed")
		}
		l.mu.Unlock()
		l.wg.Wait()
		for {
			select {
			case link := <-l.links:
				_ = link.Close()
				continue
			default:
			}
			break
		}
	})
	return nil
}

func (n quicNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (Link, error) {
		return nil, &OpError{Op: "dial", Transport: KindQUIC, Peer: peer, Err: err}
	}
	if peer < AnyRank {
		return fail(fmt.Errorf("%w: peer rank %d", ErrBadConfig, peer))
	}
	id, err := identity(&c)
	if err != nil {
		return fail(err)
	}
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fail(err)
	}
	var la *net.UDPAddr
	if c.LocalAddr != "" {
		a, err := resolveLocal("udp", c.LocalAddr)
		if err != nil {
			return fail(err)
		}
		la = a.(*net.UDPAddr)
	}
	udp, err := net.ListenUDP("udp", la)
	if err != nil {
		return fail(err)
	}
	tr := &quic.Transport{Conn: udp}
	cleanup := func() { _ = tr.Close(); _ = udp.Close() }
	hctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	conn, err := tr.Dial(hctx, ra, tlsConfig(&c, id, false), quicConfig(&c))
	if err != nil {
		cleanup()
		return fail(&AuthError{Role: "dialer", Remote: ra, Rank: peer, Err: timeoutErr(hctx, err)})
	}
	authFail := func(rank int, err error) (Link, error) {
		_ = conn.CloseWithError(quicCodeAuth, "handshake failed")
		cleanup()
		return fail(fixAuthErr(hctx, err, ra))
	}
	st, err := conn.OpenStreamSync(hctx)
	if err != nil {
		return authFail(peer, &AuthError{Role: "dialer", Rank: peer, Err: err})
	}
	cs := conn.ConnectionState().TLS
	binding, err := tlsBinding(&cs)
	if err != nil {
		return authFail(peer, &AuthError{Role: "dialer", Rank: peer, Err: err})
	}
	stop := context.AfterFunc(hctx, func() { _ = st.SetDeadline(aLongTimeAgo) })
	got, err := dialHandshake(st, hsParams{job: c.JobID, rank: c.Rank, secret: c.Secret, binding: binding,
		check: func(peer int) error { return checkFingerprint(&c, peer, &cs) }}, peer)
	if !stop() && err == nil {
		err = &AuthError{Role: "dialer", Rank: got, Err: context.DeadlineExceeded}
	}
	if err != nil {
		return authFail(peer, err)
	}
	return newQUICLink(conn, st, &c, got, cleanup), nil
}

// quicLink is a Link over one QUIC connection, one stream per channel.
type quicLink struct {
	conn    *quic.Conn
	cfg     *Config
	peer    int
	release func() // gives up the link's hold on its UDP socket

	writers [numChannels]*quicWriter

	inbox  chan Message // from the channel readers
	c      closer
	dead   chan struct{} // closed when the connection failed (err is set)
	dieMu  sync.Once
	err    atomic.Pointer[error]
	wg     sync.WaitGroup // readers and the uni-stream acceptor
	broken atomic.Bool    // closed because framing was lost
}

// quicWriter is the sending side of one channel.
type quicWriter struct {
	ch Channel
	mu lock
	fw *frameWriter // nil until the stream is opened
}

var _ Link = (*quicLink)(nil)

func newQUICLink(conn *quic.Conn, ctrl *quic.Stream, cfg *Config, peer int, release func()) *quicLink {
	l := &quicLink{conn: conn, cfg: cfg, peer: peer, release: release,
		inbox: make(chan Message), c: newCloser(), dead: make(chan struct{})}
	for ch := range l.writers {
		l.writers[ch] = &quicWriter{ch: Channel(ch), mu: newLock()}
	}
	// Control frames are scheduled before bulk data (RFC 9218 urgency):
	// a heartbeat queued behind a 64 MiB payload leaves first.
	ctrl.SetPriority(quicUrgencyControl, false)
	l.writers[ChanControl].fw = newFrameWriter(ctrl, ctrl.SetWriteDeadline, false)
	l.wg.Add(2)
	go l.readLoop(newFrameReader(ctrl, ctrl.SetReadDeadline, cfg, peer))
	go l.acceptLoop()
	return l
}

func (l *quicLink) Peer() int            { return l.peer }
func (l *quicLink) Kind() Kind           { return KindQUIC }
func (l *quicLink) LocalAddr() net.Addr  { return l.conn.LocalAddr() }
func (l *quicLink) RemoteAddr() net.Addr { return l.conn.RemoteAddr() }

func (l *quicLink) opErr(op string, err error) error {
	return &OpError{Op: op, Transport: KindQUIC, Peer: l.peer, Addr: l.conn.RemoteAddr(), Err: err}
}

// die records the first failure of the connection and closes it if the
// failure was ours to report (a bad frame).
func (l *quicLink) die(err error, code quic.ApplicationErrorCode) {
	l.dieMu.Do(func() {
		l.err.Store(&err)
		close(l.dead)
		if code != quicCodeClosed {
			l.broken.Store(true)
			l.cfg.Logger.Warn("transport: closing link", "transport", "quic", "peer", l.peer,
				"remote", l.conn.RemoteAddr().String(), "err", err)
			_ = l.conn.CloseWithError(code, "bad frame")
		}
	})
}

func (l *quicLink) readLoop(fr *frameReader) {
	defer l.wg.Done()
	ctx := context.Background()
	for {
		m, _, err := fr.read(ctx)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				l.die(err, quicCodeBadFrame)
			} else {
				l.die(classifyWith(nil, err, l.c.isClosed(), quicPeerGone), quicCodeClosed)
			}
			return
		}
		select {
		case l.inbox <- m:
		case <-l.c.quit:
			return
		}
	}
}

// acceptLoop starts a reader for every channel stream the peer opens.
func (l *quicLink) acceptLoop() {
	defer l.wg.Done()
	ctx := l.conn.Context()
	for range numChannels + 2 {
		st, err := l.conn.AcceptUniStream(ctx)
		if err != nil {
			return // the connection ended; the readers report why
		}
		var pre [1]byte
		_ = st.SetReadDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
		if _, err := st.Read(pre[:]); err != nil || pre[0] == byte(ChanControl) || pre[0] >= numChannels {
			l.die(&FrameError{Field: "channel", Value: uint64(pre[0]), Err: ErrMalformed}, quicCodeBadFrame)
			return
		}
		_ = st.SetReadDeadline(time.Time{})
		l.wg.Add(1)
		go l.readLoop(newFrameReader(st, st.SetReadDeadline, l.cfg, l.peer))
	}
}

// quicPeerGone recognises the quic-go errors that mean the peer ended the
// connection or a stream: its CONNECTION_CLOSE (a remote application
// error) and a stream reset. quic-go's connection errors all match
// net.ErrClosed, so any other (a local close, an idle timeout) classifies
// as ErrClosed.
func quicPeerGone(err error) bool {
	var appErr *quic.ApplicationError
	if errors.As(err, &appErr) && appErr.Remote {
		return true
	}
	var sErr *quic.StreamError
	return errors.As(err, &sErr)
}

func (l *quicLink) deadErr() error {
	if l.c.isClosed() {
		if l.broken.Load() {
			if p := l.err.Load(); p != nil {
				return fmt.Errorf("%w: link broken: %w", ErrClosed, *p)
			}
		}
		return ErrClosed
	}
	if p := l.err.Load(); p != nil {
		return *p
	}
	return ErrClosed
}

func (l *quicLink) Send(ctx context.Context, h Header, payload []byte) error {
	if h.Type == 0 {
		return l.opErr("send", fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	if int64(len(payload)) > l.cfg.MaxMessage {
		return l.opErr("send", &FrameError{Field: "length", Value: uint64(len(payload)), Limit: uint64(l.cfg.MaxMessage), Err: ErrTooLarge})
	}
	w := l.writers[ChannelOf(h.Type)]
	if err := w.mu.acquire(ctx, l.c.quit); err != nil {
		if errors.Is(err, ErrClosed) {
			err = l.deadErr()
		}
		return l.opErr("send", err)
	}
	defer w.mu.release()
	if l.c.isClosed() {
		return l.opErr("send", l.deadErr())
	}
	if w.fw == nil {
		st, err := l.conn.OpenUniStreamSync(ctx)
		if err != nil {
			return l.opErr("send", classifyWith(ctx, err, l.c.isClosed(), quicPeerGone))
		}
		if _, err := st.Write([]byte{byte(w.ch)}); err != nil {
			return l.opErr("send", classifyWith(ctx, err, l.c.isClosed(), quicPeerGone))
		}
		st.SetPriority(quicUrgencyBulk, true)
		w.fw = newFrameWriter(st, st.SetWriteDeadline, false)
	}
	h.Version, h.Job, h.Src, h.Len = Version, l.cfg.JobID, uint32(l.cfg.Rank), uint64(len(payload))
	n, err := w.fw.write(ctx, &h, payload)
	if err == nil {
		return nil
	}
	cerr := classifyWith(ctx, err, l.c.isClosed(), quicPeerGone)
	if l.c.isClosed() {
		cerr = l.deadErr()
	} else if n > 0 && !errors.Is(cerr, ErrPeerClosed) {
		l.die(cerr, quicCodeBadFrame)
		l.Close()
	}
	return l.opErr("send", cerr)
}

func (l *quicLink) Recv(ctx context.Context) (Message, error) {
	select {
	case m := <-l.inbox:
		return m, nil
	default:
	}
	select {
	case m := <-l.inbox:
		return m, nil
	case <-ctx.Done():
		return Message{}, l.opErr("recv", ctx.Err())
	case <-l.c.quit:
		return Message{}, l.opErr("recv", l.deadErr())
	case <-l.dead:
		select {
		case m := <-l.inbox:
			return m, nil
		default:
		}
		return Message{}, l.opErr("recv", l.deadErr())
	}
}

func (l *quicLink) Close() error {
	l.c.close(func() {
		_ = l.conn.CloseWithError(quicCodeClosed, "closed")
		l.wg.Wait()
		if l.release != nil {
			l.release()
		}
	})
	return nil
}
