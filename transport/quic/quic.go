package quic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/transport"
	quicgo "github.com/quic-go/quic-go"
)

// The QUIC transport. One QUIC connection per peer and rail. Channel 0
// (control) is the bidirectional stream the dialer opens first; the
// membership handshake runs on it, then it carries control-channel frames
// both ways. Every other channel is a unidirectional stream that each side
// opens when it first sends on that channel; its first byte names the
// channel, then frames follow. Each channel is read by its own goroutine,
// so a 64 MiB rendezvous payload on the bulk stream neither blocks nor
// delays a heartbeat on the control stream: ordering holds per channel
// (transport.ChannelOf), not across channels.
//
// MsgClose is the exception, a barrier across channels: the peer must not
// see it before the data written earlier on another stream, nor lose that
// data when the link closes. Send(MsgClose) writes a close marker (a
// MsgClose frame) at the end of every channel stream it opened, then the
// MsgClose itself on the control stream, whose Seq carries how many
// markers precede it. The receiving link passes MsgClose on only once it
// has read every marker (so every earlier message has been handed to
// Recv), then answers with a close acknowledgement (MsgClose with
// flagCloseAck, on its control stream). Close, after a MsgClose, lingers
// until that answer, until the peer ends the connection, or for
// closeLinger, and only then closes the connection: quic-go's
// CloseWithError discards whatever is still unacknowledged.

func init() { transport.RegisterNetwork(transport.KindQUIC, network{}) }

// network is the QUIC transport's Network, registered for KindQUIC.
type network struct{}

var _ transport.Network = network{}

func (network) Kind() transport.Kind { return transport.KindQUIC }

// QUIC application error codes sent on close.
const (
	codeClosed   quicgo.ApplicationErrorCode = 0
	codeAuth     quicgo.ApplicationErrorCode = 1
	codeBadFrame quicgo.ApplicationErrorCode = 2
)

// flagCloseAck marks the MsgClose frame that acknowledges the peer's
// MsgClose; the link consumes it.
const flagCloseAck = 1

// closeLinger bounds how long Close, after a MsgClose, waits for the peer
// to acknowledge that it received everything (like TCP's close and the
// reliable UDP transport's Linger). A variable for the tests, which
// stretch it so that a starved machine does not make them fail.
var closeLinger = 5 * time.Second

// Stream scheduling urgencies (0 is the most urgent).
const (
	urgencyControl = 0
	urgencyBulk    = 4
)

// goConfig is quic-go's configuration for c (a defaulted Config).
func goConfig(c *transport.Config) *quicgo.Config {
	return &quicgo.Config{
		HandshakeIdleTimeout:           c.HandshakeTimeout,
		MaxIdleTimeout:                 c.QUIC.IdleTimeout,
		KeepAlivePeriod:                c.QUIC.KeepAlive,
		InitialStreamReceiveWindow:     c.QUIC.StreamWindow,
		MaxStreamReceiveWindow:         c.QUIC.StreamWindow,
		InitialConnectionReceiveWindow: c.QUIC.ConnWindow,
		MaxConnectionReceiveWindow:     c.QUIC.ConnWindow,
		MaxIncomingStreams:             4,
		MaxIncomingUniStreams:          transport.NumChannels + 2,
	}
}

func (network) Listen(addr string, cfg transport.Config) (transport.Listener, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (transport.Listener, error) {
		return nil, &transport.OpError{Op: "listen", Transport: transport.KindQUIC, Peer: transport.AnyRank, Err: err}
	}
	tc, err := transport.TLSConfig(&c, true)
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
	tr := &quicgo.Transport{Conn: udp}
	// The dialer must finish QUIC's own handshake (TLS included) and open
	// its first stream within PreAuthTimeout, as over TLS on TCP: a
	// connection that stays idle does not hold the listener longer.
	qc := goConfig(&c)
	qc.HandshakeIdleTimeout = c.PreAuthTimeout
	ln, err := tr.Listen(tc, qc)
	if err != nil {
		_ = tr.Close()
		_ = udp.Close()
		return fail(err)
	}
	l := &listener{cfg: &c, tr: tr, udp: udp, ln: ln, links: make(chan transport.Link, 16), c: newCloser(),
		pending: map[*quicgo.Conn]struct{}{}}
	l.refs.Store(1) // the listener's own reference
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

type listener struct {
	cfg    *transport.Config
	tr     *quicgo.Transport
	udp    *net.UDPConn
	ln     *quicgo.Listener
	links  chan transport.Link
	c      closer
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // acceptLoop and handshakes

	mu      sync.Mutex // guards pending
	pending map[*quicgo.Conn]struct{}

	// refs counts the users of the UDP socket: the listener until Close,
	// and every accepted link until its Close. The last one closes it.
	refs atomic.Int64
}

func (l *listener) unref() {
	if l.refs.Add(-1) == 0 {
		_ = l.tr.Close()
		_ = l.udp.Close()
	}
}

var _ transport.Listener = (*listener)(nil)

func (l *listener) Addr() net.Addr { return l.ln.Addr() }

func (l *listener) acceptLoop() {
	defer l.wg.Done()
	sem := make(chan struct{}, maxConcurrentHandshakes)
	for {
		conn, err := l.ln.Accept(l.ctx)
		if err != nil {
			if l.c.IsClosed() {
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
		case <-l.c.Quit:
			_ = conn.CloseWithError(codeClosed, "listener closed")
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
				_ = conn.CloseWithError(codeAuth, "handshake failed")
				if !l.c.IsClosed() {
					logReject(l.cfg, conn.RemoteAddr(), err)
				}
				return
			}
			select {
			case l.links <- link:
			case <-l.c.Quit:
				_ = link.Close()
			}
		}()
	}
}

func (l *listener) handshake(conn *quicgo.Conn) (transport.Link, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	defer cancel()
	remote := conn.RemoteAddr()
	// The dialer opens its stream and speaks at once (quic-go shows a
	// stream when its first bytes arrive): one that says nothing for
	// PreAuthTimeout is dropped.
	first, cancelFirst := context.WithTimeout(ctx, l.cfg.PreAuthTimeout)
	st, err := conn.AcceptStream(first)
	cancelFirst()
	if err != nil {
		if ctx.Err() == nil && errors.Is(first.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w: the peer said nothing for %v (PreAuthTimeout)", context.DeadlineExceeded, l.cfg.PreAuthTimeout)
		} else {
			err = timeoutErr(ctx, err)
		}
		return nil, &transport.AuthError{Role: "listener", Remote: remote, Rank: transport.AnyRank, Err: err}
	}
	cs := conn.ConnectionState().TLS
	peer, err := transport.ListenHandshake(ctx, st, st.SetDeadline, l.cfg, &cs, remote)
	if err != nil {
		return nil, err
	}
	l.refs.Add(1)
	return newLink(conn, st, l.cfg, peer, l.unref), nil
}

func (l *listener) Accept(ctx context.Context) (transport.Link, error) {
	select {
	case link := <-l.links:
		return link, nil
	default:
	}
	select {
	case link := <-l.links:
		return link, nil
	case <-ctx.Done():
		return nil, &transport.OpError{Op: "accept", Transport: transport.KindQUIC, Peer: transport.AnyRank, Addr: l.Addr(), Err: ctx.Err()}
	case <-l.c.Quit:
		return nil, &transport.OpError{Op: "accept", Transport: transport.KindQUIC, Peer: transport.AnyRank, Addr: l.Addr(), Err: transport.ErrClosed}
	}
}

// Close stops accepting. Links already accepted keep the UDP socket open
// until they close too: the socket is shared by all of them.
func (l *listener) Close() error {
	l.c.Close(func() {
		defer l.unref()
		l.cancel()
		_ = l.ln.Close()
		l.mu.Lock()
		for c := range l.pending {
			_ = c.CloseWithError(codeClosed, "listener closed")
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

func (network) Dial(ctx context.Context, addr string, peer int, cfg transport.Config) (transport.Link, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (transport.Link, error) {
		return nil, &transport.OpError{Op: "dial", Transport: transport.KindQUIC, Peer: peer, Err: err}
	}
	if peer < transport.AnyRank {
		return fail(fmt.Errorf("%w: peer rank %d", transport.ErrBadConfig, peer))
	}
	tc, err := transport.TLSConfig(&c, false)
	if err != nil {
		return fail(err)
	}
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fail(err)
	}
	var la *net.UDPAddr
	if c.LocalAddr != "" {
		a, err := resolveLocal(c.LocalAddr)
		if err != nil {
			return fail(err)
		}
		la = a
	}
	udp, err := net.ListenUDP("udp", la)
	if err != nil {
		return fail(err)
	}
	tr := &quicgo.Transport{Conn: udp}
	cleanup := func() { _ = tr.Close(); _ = udp.Close() }
	hctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	conn, err := tr.Dial(hctx, ra, tc, goConfig(&c))
	if err != nil {
		cleanup()
		return fail(&transport.AuthError{Role: "dialer", Remote: ra, Rank: peer, Err: timeoutErr(hctx, err)})
	}
	authFail := func(err error) (transport.Link, error) {
		_ = conn.CloseWithError(codeAuth, "handshake failed")
		cleanup()
		return fail(err)
	}
	st, err := conn.OpenStreamSync(hctx)
	if err != nil {
		return authFail(&transport.AuthError{Role: "dialer", Remote: ra, Rank: peer, Err: timeoutErr(hctx, err)})
	}
	cs := conn.ConnectionState().TLS
	got, err := transport.DialHandshake(hctx, st, st.SetDeadline, &c, &cs, ra, peer)
	if err != nil {
		return authFail(err)
	}
	return newLink(conn, st, &c, got, cleanup), nil
}

// link is a transport.Link over one QUIC connection, one stream per
// channel.
type link struct {
	conn    *quicgo.Conn
	cfg     *transport.Config
	peer    int
	release func() // gives up the link's hold on its UDP socket

	writers [transport.NumChannels]*writer

	inbox  chan transport.Message // from the channel readers
	c      closer
	dead   chan struct{} // closed when the connection failed (err is set)
	dieMu  sync.Once
	err    atomic.Pointer[error]
	wg     sync.WaitGroup // readers and the uni-stream acceptor
	broken atomic.Bool    // closed because framing was lost
	// progress counts the bytes of large payloads read on every stream
	// (transport.ProgressCounter).
	progress atomic.Uint64
	// pace paces both streams together in user space (SetPacing).
	pace transport.UserPacer

	// The MsgClose barrier (see the top of the file).
	closeSent atomic.Bool   // Send(MsgClose) wrote the barrier
	acked     chan struct{} // closed when the peer acknowledged it
	ackOnce   sync.Once
	barMu     sync.Mutex // guards the fields below
	markers   uint64     // close markers read on the peer's channel streams
	held      bool       // the peer's MsgClose waits for its markers
	want      uint64     // how many markers it waits for
	passed    bool       // the peer's MsgClose was passed on
}

// SetPacing implements transport.Pacer in user space: large writes on
// both streams share the rate; control messages pass.
func (l *link) SetPacing(rate float64) error { return l.pace.SetPacing(rate) }

// PacingRate returns the rate SetPacing set (0: unlimited).
func (l *link) PacingRate() float64 { return l.pace.PacingRate() }

// writer is the sending side of one channel.
type writer struct {
	ch transport.Channel
	mu lock
	fw *transport.FrameWriter // nil until the stream is opened
}

var (
	_ transport.Link            = (*link)(nil)
	_ transport.ProgressCounter = (*link)(nil)
)

// Progress implements transport.ProgressCounter.
func (l *link) Progress() uint64 { return l.progress.Load() }

// reader returns a frame reader for one of the link's streams, counting
// into the link's progress.
func (l *link) reader(st interface {
	io.Reader
	SetReadDeadline(time.Time) error
}) *transport.FrameReader {
	fr := transport.NewFrameReader(st, st.SetReadDeadline, l.cfg, l.peer)
	fr.CountInto(&l.progress)
	return fr
}

func newLink(conn *quicgo.Conn, ctrl *quicgo.Stream, cfg *transport.Config, peer int, release func()) *link {
	l := &link{conn: conn, cfg: cfg, peer: peer, release: release,
		inbox: make(chan transport.Message), c: newCloser(), dead: make(chan struct{}),
		acked: make(chan struct{})}
	for ch := range l.writers {
		l.writers[ch] = &writer{ch: transport.Channel(ch), mu: newLock()}
	}
	// Control frames are scheduled before bulk data (RFC 9218 urgency):
	// a heartbeat queued behind a 64 MiB payload leaves first.
	ctrl.SetPriority(urgencyControl, false)
	w, setDeadline := l.pace.Writer(ctrl, ctrl.SetWriteDeadline, l.c.Quit)
	l.writers[transport.ChanControl].fw = transport.NewFrameWriter(w, setDeadline)
	l.wg.Add(2)
	go l.readLoop(l.reader(ctrl), true)
	go l.acceptLoop()
	return l
}

func (l *link) Peer() int            { return l.peer }
func (l *link) Kind() transport.Kind { return transport.KindQUIC }
func (l *link) LocalAddr() net.Addr  { return l.conn.LocalAddr() }
func (l *link) RemoteAddr() net.Addr { return l.conn.RemoteAddr() }

func (l *link) opErr(op string, err error) error {
	return &transport.OpError{Op: op, Transport: transport.KindQUIC, Peer: l.peer, Addr: l.conn.RemoteAddr(), Err: err}
}

// die records the first failure of the connection and closes it if the
// failure was ours to report (a bad frame).
func (l *link) die(err error, code quicgo.ApplicationErrorCode) {
	l.dieMu.Do(func() {
		l.err.Store(&err)
		close(l.dead)
		if code != codeClosed {
			l.broken.Store(true)
			l.cfg.Logger.Warn("transport: closing link", "transport", "quic", "peer", l.peer,
				"remote", l.conn.RemoteAddr().String(), "err", err)
			_ = l.conn.CloseWithError(code, "bad frame")
		}
	})
}

// readLoop reads one stream until it fails. After Close it goes on
// reading (and drops what it reads) so that a close acknowledgement is
// still seen while Close lingers.
func (l *link) readLoop(fr *transport.FrameReader, control bool) {
	defer l.wg.Done()
	ctx := context.Background()
	for {
		m, _, err := fr.ReadFrame(ctx)
		if err != nil {
			var fe *transport.FrameError
			if errors.As(err, &fe) {
				l.die(err, codeBadFrame)
			} else {
				l.die(classify(nil, err, l.c.IsClosed()), codeClosed)
			}
			return
		}
		if m.Header.Type == transport.MsgClose {
			l.onClose(m, control)
			continue
		}
		l.pass(m)
	}
}

// pass hands m to Recv, or drops it once the link is closed.
func (l *link) pass(m transport.Message) bool {
	select {
	case l.inbox <- m:
		return true
	case <-l.c.Quit:
		return false
	}
}

// onClose handles a MsgClose frame read on one of the peer's streams: a
// close marker, the peer's MsgClose, or its acknowledgement of ours.
func (l *link) onClose(m transport.Message, control bool) {
	if control && m.Header.Flags&flagCloseAck != 0 {
		l.ackOnce.Do(func() { close(l.acked) })
		return
	}
	l.barMu.Lock()
	if control {
		if l.held || l.passed {
			l.barMu.Unlock()
			return // a repeated MsgClose: passed on once
		}
		l.held, l.want = true, m.Header.Seq
	} else {
		l.markers++
	}
	ready := l.held && !l.passed && l.markers >= l.want
	var msg transport.Message
	if ready {
		l.passed = true
		msg = m
		if !control {
			msg = transport.Message{Header: transport.Header{Version: m.Header.Version, Type: transport.MsgClose,
				Job: m.Header.Job, Src: m.Header.Src, Seq: l.want}}
		}
	}
	l.barMu.Unlock()
	if !ready {
		return
	}
	msg.Header.Flags &^= flagCloseAck
	if !l.pass(msg) {
		return
	}
	// Everything the peer sent before its MsgClose has been handed to
	// Recv: tell it, so that its Close need not linger. Not from this
	// reader, which must go on reading while the write waits.
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), closeLinger)
		defer cancel()
		_ = l.writeFrame(ctx, l.writers[transport.ChanControl], transport.Header{Type: transport.MsgClose, Flags: flagCloseAck}, nil, true)
	}()
}

// acceptLoop starts a reader for every channel stream the peer opens.
func (l *link) acceptLoop() {
	defer l.wg.Done()
	ctx := l.conn.Context()
	for range transport.NumChannels + 2 {
		st, err := l.conn.AcceptUniStream(ctx)
		if err != nil {
			return // the connection ended; the readers report why
		}
		var pre [1]byte
		_ = st.SetReadDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
		if _, err := st.Read(pre[:]); err != nil || pre[0] == byte(transport.ChanControl) || pre[0] >= transport.NumChannels {
			l.die(&transport.FrameError{Field: "channel", Value: uint64(pre[0]), Err: transport.ErrMalformed}, codeBadFrame)
			return
		}
		_ = st.SetReadDeadline(time.Time{})
		l.wg.Add(1)
		go l.readLoop(l.reader(st), false)
	}
}

func (l *link) deadErr() error {
	if l.c.IsClosed() {
		if l.broken.Load() {
			if p := l.err.Load(); p != nil {
				return fmt.Errorf("%w: link broken: %w", transport.ErrClosed, *p)
			}
		}
		return transport.ErrClosed
	}
	if p := l.err.Load(); p != nil {
		return *p
	}
	return transport.ErrClosed
}

func (l *link) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if h.Type == 0 {
		return l.opErr("send", fmt.Errorf("%w: message type 0", transport.ErrMalformed))
	}
	if int64(len(payload)) > l.cfg.MaxMessage {
		return l.opErr("send", &transport.FrameError{Field: "length", Value: uint64(len(payload)), Limit: uint64(l.cfg.MaxMessage), Err: transport.ErrTooLarge})
	}
	if h.Type == transport.MsgClose {
		return l.sendClose(ctx, h)
	}
	return l.write(ctx, l.writers[transport.ChannelOf(h.Type)], h, payload)
}

// sendClose writes the MsgClose barrier: a close marker at the end of
// every channel stream opened so far, then h on the control stream with
// Seq set to the number of markers.
func (l *link) sendClose(ctx context.Context, h transport.Header) error {
	h.Flags &^= flagCloseAck
	var n uint64
	for ch, w := range l.writers {
		if transport.Channel(ch) == transport.ChanControl {
			continue
		}
		if err := w.mu.Acquire(ctx, l.c.Quit, transport.ErrClosed); err != nil {
			if errors.Is(err, transport.ErrClosed) {
				err = l.deadErr()
			}
			return l.opErr("send", err)
		}
		open := w.fw != nil
		w.mu.Release()
		if !open {
			continue
		}
		if err := l.write(ctx, w, transport.Header{Type: transport.MsgClose}, nil); err != nil {
			return err
		}
		n++
	}
	h.Seq = n
	if err := l.write(ctx, l.writers[transport.ChanControl], h, nil); err != nil {
		return err
	}
	l.closeSent.Store(true)
	return nil
}

// write sends one frame on w's stream, opening it on first use.
func (l *link) write(ctx context.Context, w *writer, h transport.Header, payload []byte) error {
	return l.writeFrame(ctx, w, h, payload, false)
}

// writeFrame is write. With ack (the close acknowledgement, which a
// closing link still owes its peer) it goes on after Close, and a failure
// does not close the link.
func (l *link) writeFrame(ctx context.Context, w *writer, h transport.Header, payload []byte, ack bool) error {
	quit := l.c.Quit
	if ack {
		quit = nil
	}
	if err := w.mu.Acquire(ctx, quit, transport.ErrClosed); err != nil {
		if errors.Is(err, transport.ErrClosed) {
			err = l.deadErr()
		}
		return l.opErr("send", err)
	}
	defer w.mu.Release()
	if l.c.IsClosed() && !ack {
		return l.opErr("send", l.deadErr())
	}
	if w.fw == nil {
		st, err := l.conn.OpenUniStreamSync(ctx)
		if err != nil {
			return l.opErr("send", classify(ctx, err, l.c.IsClosed()))
		}
		if _, err := st.Write([]byte{byte(w.ch)}); err != nil {
			return l.opErr("send", classify(ctx, err, l.c.IsClosed()))
		}
		st.SetPriority(urgencyBulk, true)
		pw, setDeadline := l.pace.Writer(st, st.SetWriteDeadline, l.c.Quit)
		w.fw = transport.NewFrameWriter(pw, setDeadline)
	}
	h.Version, h.Job, h.Src, h.Len = transport.Version, l.cfg.JobID, uint32(l.cfg.Rank), uint64(len(payload))
	n, err := w.fw.WriteFrame(ctx, &h, payload)
	if err == nil {
		return nil
	}
	cerr := classify(ctx, err, l.c.IsClosed())
	if l.c.IsClosed() || ack {
		cerr = l.deadErr()
	} else if n > 0 && !errors.Is(cerr, transport.ErrPeerClosed) {
		l.die(cerr, codeBadFrame)
		l.Close()
	}
	return l.opErr("send", cerr)
}

func (l *link) Recv(ctx context.Context) (transport.Message, error) {
	select {
	case m := <-l.inbox:
		return m, nil
	default:
	}
	select {
	case m := <-l.inbox:
		return m, nil
	case <-ctx.Done():
		return transport.Message{}, l.opErr("recv", ctx.Err())
	case <-l.c.Quit:
		return transport.Message{}, l.opErr("recv", l.deadErr())
	case <-l.dead:
		select {
		case m := <-l.inbox:
			return m, nil
		default:
		}
		return transport.Message{}, l.opErr("recv", l.deadErr())
	}
}

// Close closes the connection. After a MsgClose it first lingers (at
// most closeLinger) until the peer has acknowledged receiving everything,
// or ended the connection itself.
func (l *link) Close() error {
	l.c.Close(func() {
		if l.closeSent.Load() {
			t := time.NewTimer(closeLinger)
			select {
			case <-l.acked:
			case <-l.dead:
			case <-l.conn.Context().Done():
			case <-t.C:
			}
			t.Stop()
		}
		_ = l.conn.CloseWithError(codeClosed, "closed")
		l.wg.Wait()
		if l.release != nil {
			l.release()
		}
	})
	return nil
}
