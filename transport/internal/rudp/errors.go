package rudp

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Sentinel errors. Every error returned by this package starts with "rudp:"
// or is a *net.OpError whose Net field is "rudp".
var (
	// ErrClosed is returned by operations on a Conn or Listener after Close,
	// and by Write after CloseWrite. It matches net.ErrClosed.
	ErrClosed = fmt.Errorf("rudp: %w", net.ErrClosed)

	// ErrReset is returned when the peer aborted the connection (an RST
	// packet). It matches syscall.ECONNRESET.
	ErrReset = fmt.Errorf("rudp: connection reset by peer: %w", syscall.ECONNRESET)

	// ErrPeerTimeout is returned when nothing was heard from the peer for
	// Config.IdleTimeout although keepalives were sent: the peer is gone.
	// It matches syscall.ETIMEDOUT but deliberately not
	// os.ErrDeadlineExceeded, which is reserved for deadlines set by the
	// caller.
	ErrPeerTimeout = fmt.Errorf("rudp: peer unreachable (idle timeout): %w", syscall.ETIMEDOUT)

	// ErrKeyMismatch is returned by Dial when the peer answered the SYN with
	// a control packet that does not verify under Config.Key but names the
	// SYN's fresh connection id: the peer holds another key, or none.
	ErrKeyMismatch = errors.New("rudp: handshake not authenticated: the peer holds another key")
)

// opError wraps err in a *net.OpError so that callers get the usual
// "read rudp 127.0.0.1:1->127.0.0.1:2: ..." messages while errors.Is still
// sees the cause (os.ErrDeadlineExceeded, net.ErrClosed, ...).
func opError(op string, c *Conn, err error) error {
	return &net.OpError{Op: op, Net: "rudp", Source: c.laddr, Addr: c.raddr, Err: err}
}
