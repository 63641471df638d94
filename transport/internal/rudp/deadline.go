package rudp

import (
	"sync"
	"time"
)

// deadline is a settable read or write deadline: wait returns a channel
// that is closed once the deadline has passed. Setting a new deadline
// replaces the channel so that blocked calls re-evaluate it.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{}
	fired bool
}

func newDeadline() *deadline { return &deadline{ch: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.fired {
		d.ch = make(chan struct{})
		d.fired = false
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.ch)
		d.fired = true
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.ch == ch && !d.fired {
			close(ch)
			d.fired = true
		}
	})
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

func (d *deadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
