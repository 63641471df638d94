package quic

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/hetcomm/hetcomm/transport"
	"github.com/hetcomm/hetcomm/transport/internal/linkutil"
	quicgo "github.com/quic-go/quic-go"
)

// Small helpers that mirror unexported ones of package transport, so that
// this link behaves like the built-in ones.

// maxConcurrentHandshakes bounds the connections a listener
// authenticates at once, as transport's stream listeners do (a goroutine
// each). A connection that says nothing is dropped after
// Config.PreAuthTimeout, so idle ones delay a rank by that at most.
const maxConcurrentHandshakes = 4096

// classify maps an error of quic-go or of a stream to transport's error
// vocabulary (transport.ClassifyError).
func classify(ctx context.Context, err error, closed bool) error {
	return transport.ClassifyError(ctx, err, closed, peerGone)
}

// peerGone recognises the quic-go errors that mean the peer ended the
// connection or a stream: its CONNECTION_CLOSE (a remote application
// error) and a stream reset. quic-go's connection errors all match
// net.ErrClosed, so any other one (a local close, an idle timeout, a
// transport error) classifies as transport.ErrClosed.
func peerGone(err error) bool {
	var appErr *quicgo.ApplicationError
	if errors.As(err, &appErr) && appErr.Remote {
		return true
	}
	var sErr *quicgo.StreamError
	return errors.As(err, &sErr)
}

// timeoutErr turns an I/O error caused by the handshake's deadline into
// that context's error.
func timeoutErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

func logReject(cfg *transport.Config, remote net.Addr, err error) {
	addr := ""
	if remote != nil {
		addr = remote.String()
	}
	cfg.Logger.Warn("transport: rejected connection", "transport", "quic", "remote", addr, "err", err)
}

// resolveLocal turns "ip" or "ip:port" into a local UDP address
// (transport.Config.LocalAddr).
func resolveLocal(s string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, "0"
	}
	return net.ResolveUDPAddr("udp", net.JoinHostPort(host, port))
}

// lock and closer are the helpers transport's own links use.
type (
	lock   = linkutil.Lock
	closer = linkutil.Closer
)

func newLock() lock     { return linkutil.NewLock() }
func newCloser() closer { return linkutil.NewCloser() }
