package comm

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The background refresher (Config.Refresh) keeps the cost model fresh
// between probes while the application leaves the network idle. Every
// Refresh, one rank measures the rate of one of its outgoing links again
// (its peers in turn) with one bulk message answered by a tiny
// acknowledgement, the way the probe does, and tells the receiver what it
// measured; the receiver feeds it to the drift detector as if a collective
// had observed it. So a link whose rate has moved away from the model for
// several refreshes in a row is proposed and, at the next world Alltoallv,
// updated on every rank at once, exactly as drift seen by collectives is
// (Config.Drift).
//
// The refresher stays out of the way:
//   - a tick is skipped when this rank sent or received anything other
//     than the refresher's own messages since the previous tick (the
//     application is communicating; its collectives observe the rates
//     themselves);
//   - a rank takes part in one measurement at a time, as the measuring or
//     the measured end (a rank that is busy with one refuses another's);
//   - a measurement is thrown away when, on either end, other traffic
//     happened while it ran (it did not see an idle link);
//   - the time this rank spends sending bulk refresh messages is at most
//     Config.RefreshShare of the elapsed time: after a measurement that
//     took d, the next waits at least d/RefreshShare.
//
// The bulk is sized to take about 20 ms at the model's rate (at least the
// drift detector's smallest observation, at most 64 MiB, sent as messages
// of up to 4 MiB).
//
// The refresher's messages travel on a private communicator and are never
// seen by the application.

// The refresher's private communicators, one for the measuring side's
// messages (which the responder receives from any source with any tag)
// and one for the acknowledgements: above every id splitID makes, below
// 1<<31 so that their context ids fit in 32 bits.
const (
	refreshCommID    = 1 << 30
	refreshAckCommID = refreshCommID + 1
)

// isRefreshCtx tells whether a message's context id is the refresher's.
func isRefreshCtx(ctx uint32) bool {
	id := ctx >> 1
	return id == refreshCommID || id == refreshAckCommID
}

// Tags of the refresher's protocol.
const (
	refreshHello = iota + 1 // sender -> receiver: a measurement starts
	refreshBulk             // sender -> receiver: the bulk message
	refreshAck              // receiver -> sender (acks communicator): hello or bulk arrived
	refreshRate             // sender -> receiver: bytes (int64) and seconds (float64)
)

// Defaults of the refresher.
const (
	DefaultRefreshShare = 0.01
	// refreshTarget is how long a bulk refresh message should take at
	// the model's rate; it is never smaller than the drift detector's
	// smallest observation.
	refreshTarget = 20 * time.Millisecond
	refreshMax    = 64 << 20
	refreshChunk  = 1 << poolMaxShift // the largest pooled payload (bufpool.go)
	// refreshStale is when a session whose measuring rank went silent
	// is given up.
	refreshStale = 30 * time.Second
	noSession    = -2
)

// refresher is one rank's background refresher.
type refresher struct {
	w      *world
	c      *Comm // requests: hello, bulk, rate
	acks   *Comm // acknowledgements
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	session int       // the session this rank takes part in: noSession, -1 (its own) or the measuring rank
	since   time.Time // when it began

	// Counters, for tests and logs.
	measured  atomic.Int64 // measurements this rank made and reported
	discarded atomic.Int64 // measurements thrown away (traffic, overlap, errors)
	observed  atomic.Int64 // reports fed to this rank's drift detector
	busy      atomic.Int64 // nanoseconds spent sending bulk messages
	last      atomic.Int64 // nanoseconds the latest measurement took
}

// startRefresh starts the refresher if Config.Refresh asks for it.
func (w *world) startRefresh() {
	if w.cfg.Refresh <= 0 || w.size < 2 {
		return
	}
	if w.drift == nil {
		w.log.Warn("comm: Config.Refresh is set but drift detection is off (Config.Drift < 0): the refresher does not run")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &refresher{w: w, c: w.newComm(refreshCommID, identity(w.size), w.rank),
		acks: w.newComm(refreshAckCommID, identity(w.size), w.rank), cancel: cancel, session: noSession}
	w.refresh = r
	r.wg.Add(2)
	go r.respond(ctx)
	go r.measureLoop(ctx)
}

// stopRefresh stops the refresher and waits for it (idempotent).
func (w *world) stopRefresh() {
	if r := w.refresh; r != nil {
		r.cancel()
		r.wg.Wait()
	}
}

// measureLoop measures one outgoing link per tick, in turn.
func (r *refresher) measureLoop(ctx context.Context) {
	defer r.wg.Done()
	w := r.w
	// Ranks start their ticks at different phases so that their
	// measurements rarely meet.
	rng := rand.New(rand.NewPCG(uint64(w.rank), w.job))
	period := w.cfg.Refresh
	next := time.Now().Add(time.Duration(rng.Int64N(int64(period))) + period)
	lastSeen := w.activity.Load()
	peer := w.rank
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = time.Now().Add(period)
		select {
		case <-r.c.broken:
			return // a rank failed: the world is broken
		default:
		}
		if a := w.activity.Load(); a != lastSeen {
			lastSeen = a // the application is busy: not now
			continue
		}
		peer = r.nextPeer(peer)
		if peer < 0 {
			return
		}
		d, ok := r.measure(ctx, peer)
		if ctx.Err() != nil {
			return
		}
		if ok {
			r.measured.Add(1)
		} else {
			r.discarded.Add(1)
		}
		r.busy.Add(int64(d))
		r.last.Store(int64(d))
		if wait := time.Duration(float64(d) / w.cfg.RefreshShare); time.Now().Add(wait).After(next) {
			next = time.Now().Add(wait)
		}
		lastSeen = w.activity.Load()
	}
}

// nextPeer returns the next live peer after p (-1 if none is left).
func (r *refresher) nextPeer(p int) int {
	for i := 1; i < r.w.size; i++ {
		q := (p + i) % r.w.size
		if q != r.w.rank && !r.w.isFailed(q) {
			return q
		}
	}
	return -1
}

// measure measures the link to peer: a tiny round trip (hello), then the
// bulk message and its acknowledgement; the rate is the bulk's size over
// the time beyond the tiny round trip. It reports the rate to peer if
// both ends saw no other traffic meanwhile, and returns the time spent
// and whether it reported.
func (r *refresher) measure(ctx context.Context, peer int) (time.Duration, bool) {
	w := r.w
	m := w.model.Load()
	if m == nil || !r.claim(-1) {
		return 0, false
	}
	defer r.release(-1)
	rate := m.Rate(w.rank, peer)
	size := int64(w.drift.MinBytes)
	if !math.IsInf(rate, 0) && rate > 0 {
		size = max(size, int64(rate*max(refreshTarget.Seconds(), 2*w.drift.MinSeconds)))
	}
	size = min(size, refreshMax, r.c.maxMessage())
	act := w.activity.Load()
	port := probePort{r.c}
	// Sends are not cancelled when the world closes (a cancelled bulk
	// write would break the link's framing); they end within a bound
	// instead. Waits for acknowledgements end at once.
	bound := 2 * time.Second
	if rate > 0 && !math.IsInf(rate, 0) {
		bound += time.Duration(10 * float64(size) / rate * float64(time.Second))
	}
	sctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	t0 := time.Now()
	if err := port.Send(sctx, peer, refreshHello, nil); err != nil {
		return 0, false
	}
	if !r.ack(ctx, peer, bound) {
		return time.Since(t0), false // busy, or gone
	}
	rtt := time.Since(t0)
	// The bulk goes as messages of at most refreshChunk (a pooled
	// buffer at both ends: fresh large buffers would measure page faults),
	// back to back; each is acknowledged, and the clock stops at the last
	// acknowledgement.
	chunk := min(size, refreshChunk)
	buf := getPayload(int(chunk))
	t1 := time.Now()
	var err error
	sent := 0
	for left := size; left > 0 && err == nil; left -= chunk {
		err = port.Send(sctx, peer, refreshBulk, buf[:min(chunk, left)])
		sent++
	}
	putPayload(buf)
	ok := err == nil
	for i := 0; i < sent && ok; i++ {
		ok = r.ack(ctx, peer, bound)
	}
	spent := time.Since(t1)
	secs := (spent - rtt).Seconds()
	// The report ends the peer's side of the session; an empty one
	// says that the measurement failed.
	var rep []byte
	if ok && secs > 0 && w.activity.Load() == act {
		rep = make([]byte, 16)
		binary.LittleEndian.PutUint64(rep, uint64(size))
		binary.LittleEndian.PutUint64(rep[8:], math.Float64bits(secs))
	}
	if err != nil || port.Send(sctx, peer, refreshRate, rep) != nil {
		return spent, false
	}
	return spent, rep != nil
}

// claim makes this rank take part in one refresh session: its own
// measurement (src < 0) or src's. A rank takes part in one session at a
// time, so a measurement sees no other refresher's traffic at either end,
// and in none while it probes (start-up or Reprobe).
// A session whose measuring rank vanished is given up after a while.
func (r *refresher) claim(src int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w.probing.Load() || (r.session != noSession && time.Since(r.since) < refreshStale) {
		return false
	}
	r.session, r.since = src, time.Now()
	return true
}

// release ends the session claim started.
func (r *refresher) release(src int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.session == src {
		r.session = noSession
	}
}

// ack waits for peer's acknowledgement; false if peer is busy with
// another session, gone, or silent for longer than wait (its refresher
// stopped).
func (r *refresher) ack(ctx context.Context, peer int, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b, err := probePort{r.acks}.Recv(ctx, peer, refreshAck)
	defer putPayload(b)
	return err == nil && len(b) == 0
}

// respond answers the other ranks' measurements and feeds their reports
// to the drift detector.
func (r *refresher) respond(ctx context.Context) {
	defer r.wg.Done()
	w := r.w
	var act int64 // activity when the current session began
	for {
		b, st, err := r.c.Recv(ctx, AnySource, AnyTag)
		if err != nil {
			// Closed, or a rank failed: the world is broken, and a
			// receive from any source would fail again at once.
			return
		}
		src := st.Source
		switch st.Tag {
		case refreshHello, refreshBulk:
			var busy []byte
			if st.Tag == refreshHello {
				if r.claim(src) {
					act = w.activity.Load()
				} else {
					busy = []byte{1}
				}
			}
			// An acknowledgement is one header: not worth breaking a
			// link's framing for by cancelling it.
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			probePort{r.acks}.Send(actx, src, refreshAck, busy)
			cancel()
		case refreshRate:
			r.mu.Lock()
			mine := r.session == src
			r.mu.Unlock()
			if !mine {
				break // a session this rank refused, or gave up
			}
			r.release(src)
			if len(b) != 16 || w.activity.Load() != act {
				r.discarded.Add(1)
				break
			}
			bytes := int64(binary.LittleEndian.Uint64(b))
			secs := math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
			if bytes > 0 && secs > 0 && !math.IsInf(secs, 0) {
				w.observe(src, bytes, secs)
				r.observed.Add(1)
			}
		}
		putPayload(b)
	}
}
