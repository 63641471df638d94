package transport

import (
	"context"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// userPacer paces in user space, for links the kernel cannot pace
// (reliable UDP, QUIC, mem, TCP off Linux): what passes through it is let
// go at its rate, a piece at a time.
type userPacer struct {
	rate atomic.Uint64 // math.Float64bits of bytes per second; 0: unlimited
	mu   sync.Mutex
	next time.Time // when the next piece may leave
}

// pacedChunk is the piece a paced writer writes at once: 16 KiB is 1.3 ms
// at 100 Mbit/s, fine enough that a receiver sees a steady rate.
const pacedChunk = 16 << 10

// pacedBurst is how far a pacer may fall behind its schedule (a late
// timer, a slow write) and catch up at full speed.
const pacedBurst = 2 * time.Millisecond

func (p *userPacer) setRate(rate float64) {
	p.rate.Store(math.Float64bits(rate))
}

func (p *userPacer) limit() float64 { return math.Float64frombits(p.rate.Load()) }

// wait blocks until n more bytes may leave, then books them. It returns
// os.ErrDeadlineExceeded once the deadline passes, ErrClosed when quit is
// closed and context.Canceled when done (may be nil) is. deadline (may
// be nil) holds a write deadline in UnixNano, 0 for none.
func (p *userPacer) wait(n int, quit, done <-chan struct{}, deadline *atomic.Int64) error {
	rate := p.limit()
	if rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now.Add(-pacedBurst)) {
		p.next = now.Add(-pacedBurst)
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / rate * float64(time.Second)))
	p.mu.Unlock()
	for {
		d := time.Until(at)
		if d <= 0 {
			return nil
		}
		if dl := loadDeadline(deadline); dl != 0 && time.Now().UnixNano() >= dl {
			return os.ErrDeadlineExceeded
		}
		select {
		case <-quit:
			return ErrClosed
		case <-done:
			return context.Canceled
		case <-time.After(min(d, 5*time.Millisecond)):
		}
	}
}

func loadDeadline(d *atomic.Int64) int64 {
	if d == nil {
		return 0
	}
	return d.Load()
}

// pacedSmall: writes shorter than this (a control message with its
// header) are not paced, so that they never wait behind a paced payload
// on another stream of the link.
const pacedSmall = 1024

// pacedWriter writes through a userPacer, a chunk at a time.
type pacedWriter struct {
	w    io.Writer
	p    *userPacer
	quit <-chan struct{}
	// deadline (UnixNano, 0: none) cuts a wait short, as a write
	// deadline cuts a socket write short.
	deadline atomic.Int64
}

func (pw *pacedWriter) Write(b []byte) (int, error) {
	if len(b) < pacedSmall || pw.p.limit() <= 0 {
		return pw.w.Write(b)
	}
	done := 0
	for done < len(b) {
		k := min(len(b)-done, pacedChunk)
		if err := pw.p.wait(k, pw.quit, nil, &pw.deadline); err != nil {
			return done, err
		}
		n, err := pw.w.Write(b[done : done+k])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// setDeadline wraps a write-deadline setter so that a deadline also ends
// a pacing wait.
func (pw *pacedWriter) setDeadline(inner func(time.Time) error) func(time.Time) error {
	return func(t time.Time) error {
		if t.IsZero() {
			pw.deadline.Store(0)
		} else {
			pw.deadline.Store(t.UnixNano())
		}
		return inner(t)
	}
}

// PacingRate returns the rate set (bytes per second, 0: unlimited).
func (u *UserPacer) PacingRate() float64 { return u.p.limit() }

// UserPacer paces in user space what its writers write, together, at
// the rate set with SetPacing (0: unlimited), for links that write
// streams of their own (QUIC): each writer's writes of 1 KiB or more go a
// 16 KiB chunk at a time, smaller ones (control messages) pass at once.
type UserPacer struct{ p userPacer }

// SetPacing sets the rate in bytes per second; 0 removes the limit.
func (u *UserPacer) SetPacing(rate float64) error {
	u.p.setRate(rate)
	return nil
}

// Writer returns a writer to w paced by u, and w's write-deadline setter
// wrapped so that a deadline also ends a wait for the rate. quit ends a
// wait with ErrClosed.
func (u *UserPacer) Writer(w io.Writer, setDeadline func(time.Time) error, quit <-chan struct{}) (io.Writer, func(time.Time) error) {
	pw := &pacedWriter{w: w, p: &u.p, quit: quit}
	return pw, pw.setDeadline(setDeadline)
}
