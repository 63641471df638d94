package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// sentinel is a package-prefixed sentinel error that may also match a
// standard error (net.ErrClosed, io.EOF) through Unwrap.
type sentinel struct {
	msg  string
	base []error
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Unwrap() []error { return e.base }

// Sentinel errors. Match them with errors.Is; the typed errors below wrap
// them.
var (
	// ErrClosed reports an operation on a link or listener that was closed
	// locally. It matches net.ErrClosed.
	ErrClosed error = &sentinel{"transport: closed", []error{net.ErrClosed}}
	// ErrPeerClosed reports that the peer closed the link or went away. It
	// matches net.ErrClosed and io.EOF.
	ErrPeerClosed error = &sentinel{"transport: peer closed the link", []error{net.ErrClosed, io.EOF}}

	// ErrBadSecret reports a handshake whose HMAC did not verify: the peer
	// holds another secret, or replayed a recorded handshake.
	ErrBadSecret = errors.New("transport: handshake authentication failed")
	// ErrJobMismatch reports a peer that belongs to another job.
	ErrJobMismatch = errors.New("transport: peer belongs to another job")
	// ErrRankMismatch reports a peer that is not the rank that was expected.
	ErrRankMismatch = errors.New("transport: unexpected peer rank")
	// ErrVersion reports an unknown protocol version.
	ErrVersion = errors.New("transport: unknown protocol version")
	// ErrFingerprint reports a TLS certificate whose fingerprint is not
	// trusted for that peer.
	ErrFingerprint = errors.New("transport: untrusted certificate fingerprint")
	// ErrMalformed reports bytes that are not a valid header or handshake
	// message (bad magic, non-zero reserved bits, invalid type, ...).
	ErrMalformed = errors.New("transport: malformed frame")
	// ErrTooLarge reports a message longer than Config.MaxMessage.
	ErrTooLarge = errors.New("transport: message too large")
	// ErrBadConfig reports an invalid Config.
	ErrBadConfig = errors.New("transport: invalid config")
)

// OpError is the error returned by Link and Listener methods. Like
// net.OpError it records the operation, where it happened and the cause.
type OpError struct {
	Op        string // "dial", "accept", "send", "recv", "listen", "handshake"
	Transport Kind   // the link's transport
	Peer      int    // the peer's rank, or AnyRank when unknown
	Addr      net.Addr
	Err       error // the cause
}

func (e *OpError) Error() string {
	s := "transport: " + e.Op + " " + e.Transport.String()
	if e.Peer != AnyRank {
		s += fmt.Sprintf(" peer %d", e.Peer)
	}
	if e.Addr != nil {
		s += " " + e.Addr.String()
	}
	return s + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// AuthError reports a failed membership handshake. Err is one of
// ErrBadSecret, ErrJobMismatch, ErrRankMismatch, ErrVersion, ErrFingerprint,
// ErrMalformed or an I/O error.
type AuthError struct {
	Role   string // "dialer" or "listener": the side that detected the failure
	Remote net.Addr
	Job    uint64 // the job id the peer claimed (0 if not received)
	Rank   int    // the rank the peer claimed, or AnyRank
	Err    error
}

func (e *AuthError) Error() string {
	s := "transport: handshake (" + e.Role + ")"
	if e.Remote != nil {
		s += " with " + e.Remote.String()
	}
	if e.Rank != AnyRank {
		s += fmt.Sprintf(" rank %d", e.Rank)
	}
	return s + ": " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// FrameError reports an invalid message header received on a link. The link
// is closed when it occurs and nothing of the message is delivered.
type FrameError struct {
	Field string // the offending header field, e.g. "length", "magic"
	Value uint64 // the value received
	Limit uint64 // the bound it broke, when there is one
	Err   error  // ErrMalformed, ErrVersion, ErrTooLarge, ErrJobMismatch, ErrRankMismatch
}

func (e *FrameError) Error() string {
	s := fmt.Sprintf("transport: bad frame: %s = %d", e.Field, e.Value)
	if e.Limit != 0 {
		s += fmt.Sprintf(" (limit %d)", e.Limit)
	}
	return s + ": " + e.Err.Error()
}

func (e *FrameError) Unwrap() error { return e.Err }

// isPeerGone reports whether err means the peer closed or reset the
// connection.
func isPeerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED)
}

// classify maps an I/O error to the package's error vocabulary: a deadline
// caused by ctx becomes ctx's error, a peer that went away becomes
// ErrPeerClosed (keeping the cause), a local close becomes ErrClosed.
func classify(ctx context.Context, err error, closed bool) error {
	return classifyWith(ctx, err, closed, nil)
}

// classifyWith is classify for a transport whose own errors can say that
// the peer went away: peerGone, if not nil, recognises them. It is asked
// before net.ErrClosed, which such errors may also match (see
// ClassifyError).
func classifyWith(ctx context.Context, err error, closed bool, peerGone func(error) bool) error {
	if err == nil {
		return nil
	}
	var fe *FrameError
	var ae *AuthError
	if errors.As(err, &fe) || errors.As(err, &ae) {
		return err
	}
	if closed {
		return ErrClosed
	}
	if ctx != nil && ctx.Err() != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ctx.Err())) {
		return ctx.Err()
	}
	if peerGone != nil && peerGone(err) {
		return fmt.Errorf("%w: %w", ErrPeerClosed, err)
	}
	if errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	if isPeerGone(err) {
		return fmt.Errorf("%w: %w", ErrPeerClosed, err)
	}
	return err
}
