package comm

// MPI matching: every context's posted receives and unexpected messages,
// the rendezvous slots where a grant or a payload meets its waiter, the
// alloc hook that lands payloads in place, and waiting on all of them.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hetcomm/hetcomm/transport"
)

// slotKind separates the two kinds of rendezvous slots.
type slotKind uint8

const (
	slotCTS  slotKind = 1 // at a sender: the receiver's grant
	slotData slotKind = 2 // at a receiver: the granted payload
)

// slotKey names one rendezvous: the peer, the context (communicator and
// p2p/collective), the tag and a sequence number.
type slotKey struct {
	kind slotKind
	peer int
	ctx  uint32
	tag  int32
	seq  uint64
}

// preGrantSeq is the sequence number of a payload sent to a buffer its
// receiver granted in advance (Alltoallv's naive exchange): the payload
// may be shorter than the buffer, which the receiver checks.
const preGrantSeq = ^uint64(0)

// slot is where one side of a rendezvous waits for the other.
type slot struct {
	ch    chan struct{} // closed when done or failed
	buf   []byte        // data slots: where the payload lands
	n     int           // bytes that arrived
	err   error
	done  bool
	begin time.Time // data slots: when the payload started to arrive
	at    time.Time // when it completed
}

// inMsg is a message (or a rendezvous request) waiting to be matched.
type inMsg struct {
	src   int // world rank
	tag   int32
	flags uint16
	data  []byte // eager payload
	rndv  bool
	id    uint64 // rendezvous id
	size  int64  // rendezvous size
	useq  uint64 // the sender's per-message sequence number (collectives)
}

// recvReq is a posted receive or probe.
type recvReq struct {
	src   int // world rank or anySource
	tag   int32
	useq  int64 // the message's sequence number, or -1 for any
	probe bool
	// land, when set, is where an eager payload matching exactly (source,
	// tag and sequence number) is written as it arrives (world.alloc),
	// instead of a pooled buffer it would be copied out of.
	land []byte
	done chan struct{}
	msg  *inMsg
	err  error
}

// mqueue holds one context's unmatched messages and receives.
type mqueue struct {
	unexpected []*inMsg
	posted     []*recvReq
	probes     []*recvReq
}

const (
	anySource = -1
	anyTag    = int32(-1 << 31)
)

// alloc is the transport's Alloc hook: granted rendezvous payloads land
// straight in their destination buffer, eager ones in a pooled buffer
// (bufpool.go).
func (w *world) alloc(h transport.Header) []byte {
	peer := int(h.Src)
	if peer < 0 || peer >= w.size {
		return nil
	}
	now := time.Now()
	w.busySince[peer].Store(now.UnixNano())
	if h.Type == transport.MsgEager {
		if w.landers.Load() > 0 {
			if b := w.landFor(peer, h); b != nil {
				return b
			}
		}
		if poolClass(int(h.Len)) >= 0 {
			return getPayload(int(h.Len))
		}
	}
	if h.Type != transport.MsgRndvData {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[slotKey{slotData, peer, h.Comm, h.Tag, h.Seq}]
	if s == nil || uint64(cap(s.buf)) < h.Len {
		return nil
	}
	s.begin = now
	return s.buf[:h.Len]
}

// landFor returns the buffer of the posted receive that waits for
// exactly this eager message (recvReq.land), and notes which receive it
// is for, so that deliver gives the message to that one.
func (w *world) landFor(peer int, h transport.Header) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[h.Comm]
	if q == nil {
		return nil
	}
	for _, r := range q.posted {
		if r.land != nil && r.src == peer && r.tag == h.Tag && r.useq >= 0 && uint64(r.useq) == h.Seq && uint64(cap(r.land)) >= h.Len {
			b := r.land[:h.Len]
			r.land = nil // one message
			w.landers.Add(-1)
			if len(b) > 0 {
				w.landing[unsafe.SliceData(b)] = r
			}
			return b
		}
	}
	return nil
}

// queue returns a context's queue (w.mu held).
func (w *world) queue(ctxID uint32) *mqueue {
	q := w.queues[ctxID]
	if q == nil {
		q = &mqueue{}
		w.queues[ctxID] = q
	}
	return q
}

func matches(r *recvReq, m *inMsg) bool {
	return (r.src == anySource || r.src == m.src) && (r.tag == anyTag || r.tag == m.tag) && (r.useq < 0 || uint64(r.useq) == m.useq)
}

// deliver matches an arriving message with the oldest matching posted
// receive, or queues it.
func (w *world) deliver(ctxID uint32, m *inMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	if len(w.landing) > 0 && !m.rndv && len(m.data) > 0 {
		if r, ok := w.landing[unsafe.SliceData(m.data)]; ok {
			delete(w.landing, unsafe.SliceData(m.data))
			if i := slices.Index(q.posted, r); i >= 0 {
				q.posted = append(q.posted[:i], q.posted[i+1:]...)
				r.msg = m
				close(r.done)
				return
			}
			// The receive was withdrawn meanwhile: the payload must not
			// stay in its buffer, which is the caller's again.
			m.data = append([]byte(nil), m.data...)
		}
	}
	for i, r := range q.posted {
		if matches(r, m) {
			q.posted = append(q.posted[:i], q.posted[i+1:]...)
			if r.land != nil {
				r.land = nil
				w.landers.Add(-1)
			}
			r.msg = m
			close(r.done)
			return
		}
	}
	q.unexpected = append(q.unexpected, m)
	if ctxID&1 == 1 {
		w.checkStray(ctxID, m) // coll.go
	}
	keep := q.probes[:0]
	for _, r := range q.probes {
		if matches(r, m) {
			r.msg = m
			close(r.done)
			continue
		}
		keep = append(keep, r)
	}
	q.probes = keep
}

// post posts a receive (or a probe, which does not consume): it matches
// the oldest matching queued message, or waits.
func (w *world) post(ctxID uint32, src int, tag int32, useq int64, probe bool) *recvReq {
	return w.postInto(ctxID, src, tag, useq, probe, nil)
}

// postInto is post with a buffer an eager payload that matches exactly
// lands in (recvReq.land): src and useq must be given, not wildcards.
func (w *world) postInto(ctxID uint32, src int, tag int32, useq int64, probe bool, land []byte) *recvReq {
	r := &recvReq{src: src, tag: tag, useq: useq, probe: probe, done: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	for i, m := range q.unexpected {
		if matches(r, m) {
			if !probe {
				q.unexpected = append(q.unexpected[:i], q.unexpected[i+1:]...)
			}
			r.msg = m
			close(r.done)
			return r
		}
	}
	switch {
	case w.closing:
		r.err = ErrClosed
		close(r.done)
	case src != anySource && src != w.rank && w.failed[src] != nil:
		r.err = w.failedErrLocked(ctxID, src)
		close(r.done)
	case probe:
		q.probes = append(q.probes, r)
	default:
		if land != nil && src != anySource && useq >= 0 && cap(land) > 0 {
			r.land = land
			w.landers.Add(1)
		}
		q.posted = append(q.posted, r)
	}
	return r
}

// unpost withdraws a receive whose wait was abandoned. If it was matched in
// the meantime, the message goes back to the front of the queue.
func (w *world) unpost(ctxID uint32, r *recvReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	list := &q.posted
	if r.probe {
		list = &q.probes
	}
	for i, x := range *list {
		if x == r {
			*list = append((*list)[:i], (*list)[i+1:]...)
			if r.land != nil {
				r.land = nil
				w.landers.Add(-1)
			}
			return
		}
	}
	if r.msg != nil && !r.probe {
		q.unexpected = append([]*inMsg{r.msg}, q.unexpected...)
		r.msg = nil
	}
}

// slotLocked returns slot k, creating it if needed (w.mu held); a new
// slot of a failed peer is complete at once, with the peer's failure.
func (w *world) slotLocked(k slotKey) *slot {
	s := w.slots[k]
	if s == nil {
		s = &slot{ch: make(chan struct{})}
		w.slots[k] = s
		if w.failed[k.peer] != nil && k.peer != w.rank {
			s.err, s.done = w.failedErrLocked(k.ctx, k.peer), true
			close(s.ch)
		}
	}
	return s
}

// getSlot returns (creating it if needed) a rendezvous slot, giving it
// buf when buf is not nil.
func (w *world) getSlot(k slotKey, buf []byte) *slot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slotLocked(k)
	if buf != nil {
		s.buf = buf
	}
	return s
}

// awaitSlot waits for slot k (peer's grant or payload) as await does,
// forgets it, and returns it (complete when the error is nil).
func (w *world) awaitSlot(ctx context.Context, k slotKey, c *Comm) (*slot, error) {
	s := w.getSlot(k, nil)
	defer w.dropSlot(k)
	if err := w.await(ctx, s.ch, k.peer, c); err != nil {
		return nil, err
	}
	return s, s.err
}

// dropSlot forgets a slot once its waiter is done with it.
func (w *world) dropSlot(k slotKey) {
	w.mu.Lock()
	delete(w.slots, k)
	w.mu.Unlock()
}

// fire completes a slot (creating it if the waiter has not come yet).
func (w *world) fire(k slotKey, err error, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slotLocked(k)
	if s.done {
		return
	}
	s.err, s.n, s.done, s.at = err, n, true, time.Now()
	close(s.ch)
}

// fireData completes a data slot with a payload that (normally) already
// landed in the slot's buffer through alloc.
func (w *world) fireData(peer int, h transport.Header, payload []byte) {
	k := slotKey{slotData, peer, h.Comm, h.Tag, h.Seq}
	w.mu.Lock()
	s := w.slots[k]
	w.mu.Unlock()
	if s == nil && (h.Seq == preGrantSeq || w.brokenCtx(h.Comm)) {
		// The receiver granted the buffer (in advance, for Alltoallv),
		// then left the call (its context ended, or the call failed, or
		// the communicator broke on a mismatch) before this payload
		// came: the sender did nothing wrong.
		w.log.Debug("comm: dropping a payload for an abandoned receive", "peer", peer, "ctx", h.Comm, "tag", h.Tag, "bytes", len(payload))
		return
	}
	if s == nil {
		w.protocolError(peer, fmt.Sprintf("payload for an unknown rendezvous (ctx %d tag %d seq %d)", h.Comm, h.Tag, h.Seq))
		return
	}
	if len(payload) != len(s.buf) && (h.Seq != preGrantSeq || len(payload) > len(s.buf)) {
		w.fire(k, fmt.Errorf("%w: rank %d sent %d bytes, %d were expected", ErrMismatch, peer, len(payload), len(s.buf)), 0)
		return
	}
	if len(payload) > 0 && &payload[0] != &s.buf[0] {
		copy(s.buf, payload)
	}
	w.fire(k, nil, len(payload))
}

// await waits for ch, failing early if peer (>= 0) fails, if c (non-nil)
// breaks, if ctx ends or if the world closes. While a collective runs on
// c, a communicator broken by concurrent collectives fails it even when
// ch is ready (see concurrentErr).
func (w *world) await(ctx context.Context, ch <-chan struct{}, peer int, c *Comm) error {
	if h := awaitHook.Load(); h != nil && c != nil {
		(*h)(c) // tests only
	}
	err := w.awaitCh(ctx, ch, peer, c)
	if err == nil && c != nil {
		err = c.concurrentErr()
	}
	return err
}

// awaitHook, set by tests only, is called as await begins a wait that
// watches a communicator.
var awaitHook atomic.Pointer[func(*Comm)]

// concurrentErr returns the error of a communicator that broke because
// two collectives ran on it at once (ErrConcurrent), if a collective
// runs on it now, or nil. The ranks may have paired the two goroutines'
// calls differently: what the running call has not yet taken may be
// another call's, and is refused. Point-to-point calls that wait while
// no collective runs are not concerned.
func (c *Comm) concurrentErr() error {
	if c.running.Load() == 0 {
		return nil
	}
	if err := c.brokenErr(); err != nil && errors.Is(err, ErrConcurrent) {
		return err
	}
	return nil
}

// awaitCh is await without the hook and the check for concurrent
// collectives.
func (w *world) awaitCh(ctx context.Context, ch <-chan struct{}, peer int, c *Comm) error {
	select {
	case <-ch:
		return nil
	default:
	}
	var peerCh, brokenCh <-chan struct{}
	if peer >= 0 && peer != w.rank {
		peerCh = w.failCh[peer]
	}
	if c != nil {
		brokenCh = c.broken
	}
	select {
	case <-ch:
		return nil
	case <-peerCh:
		select {
		case <-ch:
			return nil
		case <-brokenCh:
			// An earlier failure broke the communicator: it is the
			// cause (the peer may have left because of it).
			return c.brokenErr()
		default:
		}
		w.mu.Lock()
		why := w.failed[peer]
		w.mu.Unlock()
		return &RankError{Rank: peer, Err: why}
	case <-brokenCh:
		select {
		case <-ch:
			return nil
		default:
		}
		return c.brokenErr()
	case <-ctx.Done():
		if peer >= 0 {
			return fmt.Errorf("waiting for rank %d: %w", peer, ctx.Err())
		}
		return ctx.Err()
	case <-w.quit:
		return ErrClosed
	}
}
