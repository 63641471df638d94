package bootstrap

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// WatchLauncher connects to the launcher at addr (Bootstrap.Watch) and
// calls gone, once, from a goroutine of its own, when that connection
// ends: the launcher exited or was killed, SIGKILL included, on this host
// or another. The launcher never sends anything; a byte from it ends the
// watch too. It fails if it cannot connect within timeout.
func WatchLauncher(ctx context.Context, addr string, timeout time.Duration, gone func(error)) error {
	d := net.Dialer{Timeout: timeout, KeepAlive: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("bootstrap: cannot reach the launcher at %s (%s): %w", addr, EnvWatch, err)
	}
	go func() {
		defer conn.Close()
		var b [1]byte
		_, err := conn.Read(b[:])
		if err == nil {
			err = fmt.Errorf("the launcher sent data on the watch connection")
		} else if err == io.EOF {
			err = fmt.Errorf("the launcher closed the watch connection")
		}
		gone(err)
	}()
	return nil
}

// Watcher is the launcher's side of the watch: it holds one connection
// from every rank, and closing it (or the launcher's death) ends them.
type Watcher struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
}

// NewWatcher listens on bind (host:port; port 0 picks one).
func NewWatcher(bind string) (*Watcher, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: watch: %w", err)
	}
	w := &Watcher{ln: ln, conns: make(chan net.Conn, 1024), done: make(chan struct{})}
	go w.accept()
	return w, nil
}

// Port returns the port the watcher listens on.
func (w *Watcher) Port() int { return w.ln.Addr().(*net.TCPAddr).Port }

func (w *Watcher) accept() {
	defer close(w.done)
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		select {
		case w.conns <- c:
		default:
			c.Close() // more connections than ranks: not ours
		}
	}
}

// Close ends every rank's watch connection and stops listening.
func (w *Watcher) Close() {
	w.ln.Close()
	<-w.done
	for {
		select {
		case c := <-w.conns:
			c.Close()
		default:
			return
		}
	}
}
