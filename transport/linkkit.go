package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// The link kit: what a Link implementation in another package needs from
// this one, so that a transport with heavy dependencies (QUIC, in
// transport/quic) can live in its own package and register itself with
// RegisterNetwork, and programs that never use it do not link it.
//
// It is for transport implementers, not for users of links. With it a link
// speaks exactly what the built-in links speak: the same Config defaults,
// the same TLS identities and certificate pinning, the same membership
// handshake, the same frames (docs/wire.md) and the same errors.

// WithDefaults returns a validated copy of c in which every zero field
// holds its default (see DefaultConfig), a nil Logger is replaced by one
// that discards, and Secret is copied. Errors match ErrBadConfig. A
// Network calls it once in Listen and in Dial and passes the result to
// the kit below.
func (c Config) WithDefaults() (Config, error) { return c.withDefaults() }

// TLSConfig returns the TLS 1.3 configuration of this rank, as the TLS
// transport uses it: cfg.Identity's certificate (or a fresh ephemeral one
// when cfg.Identity is nil), ALPN "hetcomm/1", and, when cfg.Fingerprints
// is set, only peer certificates listed there accepted. server selects
// the listener's side, which requires a client certificate. Which rank
// owns the certificate is checked later, by the handshake (DialHandshake,
// ListenHandshake).
func TLSConfig(cfg *Config, server bool) (*tls.Config, error) {
	id, err := identity(cfg)
	if err != nil {
		return nil, err
	}
	return tlsConfig(cfg, id, server), nil
}

// DialHandshake runs the dialer's side of the membership handshake
// (docs/wire.md) on rw, a fresh ordered stream to remote; want is the rank
// expected there, or AnyRank. It returns the peer's proven rank.
//
// cs, if not nil, is the TLS session the stream runs in: the handshake is
// bound to it (keying material exported from cs enters both MACs), and
// when cfg.Fingerprints is set the certificate the peer presented in cs
// must be the one published for the rank it proves. cfg is a Config
// returned by WithDefaults.
//
// ctx bounds the handshake: when it ends, setDeadline is called with a
// time in the past to interrupt rw's blocked reads and writes. Errors are
// *AuthError with Remote set to remote; when ctx ended the handshake, the
// error also matches ctx's error.
func DialHandshake(ctx context.Context, rw io.ReadWriter, setDeadline func(time.Time) error,
	cfg *Config, cs *tls.ConnectionState, remote net.Addr, want int) (int, error) {
	return runHandshake(ctx, rw, setDeadline, cfg, cs, remote, true, want)
}

// ListenHandshake runs the listener's side of the membership handshake on
// rw and returns the dialer's proven rank. Everything else is as for
// DialHandshake.
func ListenHandshake(ctx context.Context, rw io.ReadWriter, setDeadline func(time.Time) error,
	cfg *Config, cs *tls.ConnectionState, remote net.Addr) (int, error) {
	return runHandshake(ctx, rw, setDeadline, cfg, cs, remote, false, AnyRank)
}

func runHandshake(ctx context.Context, rw io.ReadWriter, setDeadline func(time.Time) error,
	cfg *Config, cs *tls.ConnectionState, remote net.Addr, dial bool, want int) (int, error) {
	role := "listener"
	if dial {
		role = "dialer"
	}
	p := hsParams{job: cfg.JobID, rank: cfg.Rank, secret: cfg.Secret}
	if cs != nil {
		binding, err := tlsBinding(cs)
		if err != nil {
			return AnyRank, fixAuthErr(ctx, &AuthError{Role: role, Rank: want, Err: err}, remote)
		}
		p.binding = binding
		p.check = func(peer int) error { return checkFingerprint(cfg, peer, cs) }
	}
	stop := context.AfterFunc(ctx, func() { _ = setDeadline(aLongTimeAgo) })
	var got int
	var err error
	if dial {
		got, err = dialHandshake(rw, p, want)
	} else {
		got, err = listenHandshake(rw, p)
	}
	if !stop() && err == nil {
		err = &AuthError{Role: role, Rank: got, Err: context.DeadlineExceeded}
	}
	if err != nil {
		return AnyRank, fixAuthErr(ctx, err, remote)
	}
	return got, nil
}

// FrameWriter writes frames (a Header and its payload, docs/wire.md) to an
// ordered byte stream. It is not safe for concurrent use: the caller
// serialises its writes.
type FrameWriter struct{ fw *frameWriter }

// NewFrameWriter returns a FrameWriter on w. setWriteDeadline sets w's
// write deadline; WriteFrame uses it to interrupt a write when its ctx
// ends.
func NewFrameWriter(w io.Writer, setWriteDeadline func(time.Time) error) *FrameWriter {
	return &FrameWriter{fw: newFrameWriter(w, setWriteDeadline, false)}
}

// WriteFrame writes h, which must be complete (Version, Job, Src and Len
// set, Len the parts' total), and the payload parts after it as one
// frame. It returns how many bytes reached the stream: after a failure, 0
// means the stream still holds whole frames; anything else means framing
// is lost and the stream must not be used again. Errors are the stream's,
// unclassified (see ClassifyError).
func (w *FrameWriter) WriteFrame(ctx context.Context, h *Header, parts ...[]byte) (int64, error) {
	return w.fw.write(ctx, h, parts...)
}

// FrameReader reads frames from an ordered byte stream, checking every
// header against the link's Config (protocol version, job, maximum length)
// and its authenticated peer before reading the payload. It is not safe
// for concurrent use.
type FrameReader struct{ fr *frameReader }

// NewFrameReader returns a FrameReader on r for frames from peer.
// setReadDeadline sets r's read deadline; ReadFrame uses it to interrupt
// a read when its ctx ends. cfg is a Config returned by WithDefaults;
// payloads land in buffers chosen by cfg.Alloc.
func NewFrameReader(r io.Reader, setReadDeadline func(time.Time) error, cfg *Config, peer int) *FrameReader {
	return &FrameReader{fr: newFrameReader(r, setReadDeadline, cfg, peer)}
}

// CountInto makes the reader add the bytes of large payloads to *n as
// they arrive (a link's ProgressCounter); several readers of one link may
// share n.
func (r *FrameReader) CountInto(n *atomic.Uint64) { r.fr.countInto(n) }

// ReadFrame reads the next frame. started reports whether any byte of it
// was consumed: a failure with started false (ctx ended while waiting for
// the first byte) leaves the stream intact; with started true framing is
// lost. An invalid header fails with a *FrameError. Other errors are the
// stream's, unclassified (see ClassifyError).
func (r *FrameReader) ReadFrame(ctx context.Context) (m Message, started bool, err error) {
	return r.fr.read(ctx)
}

// ClassifyError maps an error met by a link's I/O to the package's error
// vocabulary, as the built-in links do (see Link). In order:
//   - nil stays nil; a *FrameError or *AuthError is returned as is;
//   - closed (the link was closed locally) gives ErrClosed;
//   - an error caused by ctx ending (a deadline set by ctx, or ctx's own
//     error) gives ctx's error;
//   - an error that peerGone (may be nil) recognises gives ErrPeerClosed
//     wrapping it;
//   - net.ErrClosed gives ErrClosed;
//   - io.EOF, io.ErrUnexpectedEOF, ECONNRESET, EPIPE and ECONNABORTED
//     give ErrPeerClosed wrapping the cause;
//   - anything else is returned unchanged.
//
// peerGone lets a transport say which of its own errors mean that the
// peer ended the connection; it is asked before net.ErrClosed because a
// library may make every connection error match net.ErrClosed (quic-go
// does), the peer's close included.
func ClassifyError(ctx context.Context, err error, closed bool, peerGone func(error) bool) error {
	return classifyWith(ctx, err, closed, peerGone)
}
