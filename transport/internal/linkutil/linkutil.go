// Package linkutil holds the small concurrency helpers that every link
// implementation of package transport and its subpackages shares: a lock
// whose wait can be abandoned, and an idempotent close with a quit
// channel.
package linkutil

import (
	"context"
	"sync"
)

// Lock is a mutex whose acquisition can be abandoned when a context ends
// or the link closes.
type Lock chan struct{}

// NewLock returns an unlocked Lock.
func NewLock() Lock { return make(Lock, 1) }

// Acquire takes the lock, or fails with ctx's error, or with errClosed
// once closed is closed.
func (l Lock) Acquire(ctx context.Context, closed <-chan struct{}, errClosed error) error {
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return errClosed
	}
}

// Release releases the lock.
func (l Lock) Release() { <-l }

// Closer implements an idempotent close with a quit channel.
type Closer struct {
	once sync.Once
	// Quit is closed by the first Close.
	Quit chan struct{}
}

// NewCloser returns an open Closer.
func NewCloser() Closer { return Closer{Quit: make(chan struct{})} }

// IsClosed reports whether Close has been called.
func (c *Closer) IsClosed() bool {
	select {
	case <-c.Quit:
		return true
	default:
		return false
	}
}

// Close closes Quit and runs f, once, and reports whether this call did.
func (c *Closer) Close(f func()) bool {
	did := false
	c.once.Do(func() {
		close(c.Quit)
		f()
		did = true
	})
	return did
}
