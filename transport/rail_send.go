// The RailSet's send path: outgoing messages and their parts, Send (with
// its fast path), assigning parts to rails, the rails' writers (sendLoop),
// waiting for the acknowledgement of a large message and cancelling it.

package transport

import (
	"context"
	"fmt"
	"time"
)

type partState uint8

const (
	partQueued partState = iota
	partSending
	partSent
)

// outMsg is a message sent and not yet acknowledged.
type outMsg struct {
	seq      uint64
	h        Header // the upper layer's header
	data     []byte // the payload: the RailSet's copy if owned, else the caller's
	owned    bool
	counted  int64 // bytes counted in RailSet.copied
	parts    []*outPart
	unsent   int // parts not in partSent
	inflight int // transmissions reading data right now
	reqAck   bool
	skip     bool
	acked    bool
}

type outPart struct {
	msg   *outMsg
	off   int64
	n     int64
	crc   uint32
	crcOK bool
	rail  int
	gen   uint32 // incremented when the part moves to another rail
	state partState
}

// Send sends one message (see Link and RailSet for the contract).
func (rs *RailSet) Send(ctx context.Context, h Header, payload []byte) error {
	if h.Type == 0 {
		return rs.opErr("send", fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	if err := ctx.Err(); err != nil {
		return rs.opErr("send", err)
	}
	n := len(payload)
	if int64(n) > rs.maxMsg {
		return rs.opErr("send", &FrameError{Field: "length", Value: uint64(n), Limit: uint64(rs.maxMsg), Err: ErrTooLarge})
	}
	owned := n <= rs.cfg.CopyLimit
	data := payload
	if owned {
		data = append(make([]byte, 0, n), payload...)
	}
	h.Len = uint64(n)

	rs.mu.Lock()
	for {
		if rs.c.IsClosed() {
			rs.mu.Unlock()
			return rs.opErr("send", ErrClosed)
		}
		if rs.err != nil {
			err := rs.err
			rs.mu.Unlock()
			return rs.opErr("send", err)
		}
		if len(rs.unacked) < railMaxUnacked && (!owned || rs.copied == 0 || rs.copied+int64(n) <= int64(rs.cfg.Window)) {
			break
		}
		ch := rs.sendCh
		rs.sendWait++
		rs.unlendLocked() // the acknowledgements must be read
		rs.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-rs.c.Quit:
		}
		rs.mu.Lock()
		rs.sendWait--
		if err != nil {
			rs.mu.Unlock()
			return rs.opErr("send", err)
		}
	}
	m := &outMsg{seq: rs.nextSeq, h: h, data: data, owned: owned}
	rs.nextSeq++
	if owned {
		m.counted = int64(n)
		rs.copied += m.counted
	}
	m.reqAck = !owned || rs.copied > int64(rs.cfg.Window)/2 || len(rs.unacked) >= railMaxUnacked/2
	rs.unacked = append(rs.unacked, m)
	rs.assignLocked(m, time.Now())

	// Fast path: a copied message that goes whole on a rail with nothing
	// queued and nothing being written is written by the caller, as
	// sendLoop would write it (see sendDirectLocked).
	direct, job := rs.sendDirectLocked(m)
	if direct == nil {
		for _, p := range m.parts {
			r := rs.rails[p.rail]
			r.q = append(r.q, p)
			r.signal()
		}
	}
	rs.mu.Unlock()
	if direct != nil {
		rs.writePart(direct, &job)
		rs.wg.Done()
	}
	if owned {
		// Handed over: the copy is kept until acknowledged. Only if no
		// rail is left is the message known to be lost.
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.err != nil && !m.acked {
			return rs.opErr("send", rs.err)
		}
		return nil
	}
	return rs.waitAck(ctx, m)
}

// sendDirectLocked prepares the transmission of m by the Send caller
// itself, if m can take the fast path: it is a copy (owned: Send returns
// once it is handed to the link, as for a queued part), it goes whole on
// one rail, and that rail has nothing queued and nobody writing (so the
// rail's frames stay in the order their parts were assigned). It returns
// nil otherwise. On success the rail is busy (its queue waits, and
// sendLoop with it, until writePart is done) and rs.wg counts the caller,
// so that Close waits for the write as it waits for sendLoop's: the
// caller must call writePart, then rs.wg.Done.
//
// The write is sendLoop's (prepareLocked, run, finishLocked, failRail):
// the same bookkeeping (the part is sent, the acknowledgement it carries,
// the queue signalled if a part was queued meanwhile) and the same
// context, ioCtx: the caller's ctx does not interrupt it, so that a ctx
// ending mid-frame cannot break the rail's framing. A failed write takes
// the rail down and moves the part, like every part the rail carried, to
// the rails still up.
func (rs *RailSet) sendDirectLocked(m *outMsg) (*rail, txJob) {
	if !m.owned || len(m.parts) != 1 {
		return nil, txJob{}
	}
	r := rs.rails[m.parts[0].rail]
	if !r.alive || r.busy || len(r.q) > 0 {
		return nil, txJob{}
	}
	// r is alive, so its sendLoop and readLoop are still counted: rs.wg
	// is not zero and Close has not begun waiting.
	rs.wg.Add(1)
	r.direct++
	return r, rs.prepareLocked(r, m.parts[0])
}

// assignLocked splits m over the rails with the policy, given when each
// rail is predicted to be free, and charges the rails' clocks.
func (rs *RailSet) assignLocked(m *outMsg, now time.Time) {
	start := rs.startBuf[:len(rs.rails)]
	for i, r := range rs.rails {
		start[i] = 0
		if d := r.freeAt.Sub(now); d > 0 {
			start[i] = d.Seconds()
		}
	}
	shares, _ := rs.planner.plan(int64(len(m.data)), start)
	var off int64
	for _, s := range shares {
		m.parts = append(m.parts, &outPart{msg: m, off: off, n: s.Bytes, rail: s.Rail})
		off += s.Bytes
		rs.chargeLocked(rs.rails[s.Rail], s.Bytes, now)
	}
	m.unsent = len(m.parts)
}

// chargeLocked advances rail r's predicted free time by n bytes.
func (rs *RailSet) chargeLocked(r *rail, n int64, now time.Time) {
	t := r.freeAt
	if t.Before(now) {
		t = now
	}
	sec := float64(n+railOverhead) / rs.costs[r.idx].Bandwidth
	r.freeAt = t.Add(time.Duration(sec * float64(time.Second)))
	r.stats.Parts++
	r.stats.Bytes += uint64(n)
}

// txJob is one transmission of a part, prepared under mu.
type txJob struct {
	p       *outPart
	gen     uint32
	head    railHead
	data    []byte
	needCRC bool
}

// prepareLocked marks p as being sent on r (which the caller now writes
// on) and builds its rail header.
func (rs *RailSet) prepareLocked(r *rail, p *outPart) txJob {
	m := p.msg
	p.state = partSending
	m.inflight++
	r.busy = true
	head := railHead{Rail: uint16(r.idx), Seq: m.seq, Ack: rs.complete, Gen: p.gen}
	job := txJob{p: p, gen: p.gen}
	if m.skip {
		head.Kind = railKindSkip
	} else {
		head.Kind = railKindPart
		head.CRC = p.crc
		head.Off, head.Len, head.Total = uint64(p.off), uint64(p.n), uint64(len(m.data))
		head.Type, head.UFlags, head.Comm, head.Tag, head.USeq = m.h.Type, m.h.Flags, m.h.Comm, m.h.Tag, m.h.Seq
		head.Parts = uint32(len(m.parts))
		if p.n <= railInlineMax {
			head.Flags |= railFlagInline
		}
		if m.reqAck {
			head.Flags |= railFlagAckReq
		}
		job.data = m.data[p.off : p.off+p.n]
		job.needCRC = !p.crcOK
	}
	job.head = head
	return job
}

// writePart transmits a prepared part on r (whose writer the caller is:
// r.busy), records the outcome and, if the write failed, takes r down. It
// reports whether the write succeeded. sendLoop and the Send callers
// taking the fast path both write through it.
func (rs *RailSet) writePart(r *rail, job *txJob) bool {
	if err := rs.run(r, job); err != nil {
		rs.failRail(r, err)
		return false
	}
	return true
}

// run transmits a prepared part on r and records the outcome.
func (rs *RailSet) run(r *rail, job *txJob) error {
	if job.needCRC {
		job.head.CRC = crc32c(job.data)
	}
	err := rs.transmit(r, job)
	rs.mu.Lock()
	rs.finishLocked(r, job, err)
	rs.mu.Unlock()
	return err
}

// transmit writes a part's frames: the rail header (with the bytes if
// inline), then a MsgRailData frame. The caller owns r.frame (r.busy).
func (rs *RailSet) transmit(r *rail, job *txJob) error {
	h := &job.head
	size := railHeadSize
	inline := h.Flags&railFlagInline != 0
	if inline {
		size += len(job.data)
	}
	if cap(r.frame) < size {
		r.frame = make([]byte, size, max(size, 1024))
	}
	f := r.frame[:size]
	putRailHead(f, h)
	if inline {
		copy(f[railHeadSize:], job.data)
	}
	if err := r.link.Send(ioCtx, Header{Type: MsgRail, Flags: uint16(r.idx), Seq: h.Seq}, f); err != nil {
		return err
	}
	if inline || h.Kind != railKindPart {
		return nil
	}
	return r.link.Send(ioCtx, railDataHeader(r.idx, h.Seq, h.Off), job.data)
}

func (rs *RailSet) finishLocked(r *rail, job *txJob, err error) {
	r.busy = false
	p, m := job.p, job.p.msg
	m.inflight--
	if job.needCRC && !p.crcOK {
		p.crc, p.crcOK = job.head.CRC, true
	}
	if err == nil {
		if p.gen == job.gen && p.state == partSending {
			p.state = partSent
			m.unsent--
		}
		if job.head.Ack > rs.ackSent {
			rs.ackSent = job.head.Ack // the part carried them
		}
	}
	if len(r.q) > 0 {
		r.signal()
	}
	rs.sendChangedLocked()
}

// sendLoop writes the parts queued on r, one at a time.
func (rs *RailSet) sendLoop(r *rail) {
	defer rs.wg.Done()
	for {
		select {
		case <-r.wake:
		case <-r.quit:
			return
		}
		for {
			rs.mu.Lock()
			if !r.alive {
				rs.mu.Unlock()
				return
			}
			if r.busy || len(r.q) == 0 {
				rs.mu.Unlock()
				break
			}
			p := r.q[0]
			r.q[0] = nil
			r.q = r.q[1:]
			if p.msg.acked {
				rs.mu.Unlock()
				continue
			}
			job := rs.prepareLocked(r, p)
			rs.mu.Unlock()
			if !rs.writePart(r, &job) {
				return
			}
		}
	}
}

// waitAck waits until the peer acknowledged m (a message sent from the
// caller's buffer) and no transmission reads the buffer any more.
func (rs *RailSet) waitAck(ctx context.Context, m *outMsg) error {
	done := ctx.Done()
	var ctxErr error
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for {
		if m.inflight == 0 {
			switch {
			case ctxErr != nil:
				return rs.opErr("send", ctxErr)
			case m.acked:
				return nil
			case rs.c.IsClosed():
				return rs.opErr("send", ErrClosed)
			case rs.err != nil:
				return rs.opErr("send", rs.err)
			}
		}
		ch := rs.sendCh
		rs.sendWait++
		rs.unlendLocked() // the acknowledgement must be read
		rs.mu.Unlock()
		cancelled := false
		select {
		case <-ch:
		case <-done:
			cancelled = true
		}
		rs.mu.Lock()
		rs.sendWait--
		if !cancelled {
			continue
		}
		done = nil
		if m.acked || rs.err != nil || rs.c.IsClosed() {
			continue
		}
		switch rs.cancelLocked(m) {
		case cancelWithdrawn:
			return rs.opErr("send", ctx.Err())
		case cancelCopied:
			return nil
		case cancelBreak:
			ctxErr = ctx.Err()
			rs.mu.Unlock()
			rs.log.Warn("transport: closing rail set: send cancelled while partly written", "peer", rs.peer, "err", ctxErr)
			rs.Close()
			rs.mu.Lock()
		}
	}
}

type cancelOutcome uint8

const (
	cancelWithdrawn cancelOutcome = iota // nothing was sent: the sequence number travels as a skip
	cancelCopied                         // everything was handed to links: keep a copy, Send succeeds
	cancelBreak                          // partly written: the RailSet must close, like a link
)

// cancelLocked handles a ctx that ended while Send waits for m to be
// acknowledged (see cancelOutcome).
func (rs *RailSet) cancelLocked(m *outMsg) cancelOutcome {
	started := false
	for _, p := range m.parts {
		if p.state != partQueued {
			started = true
		}
	}
	switch {
	case !started:
		for _, p := range m.parts {
			r := rs.rails[p.rail]
			for i, q := range r.q {
				if q == p {
					r.q = append(r.q[:i], r.q[i+1:]...)
					break
				}
			}
		}
		m.skip, m.data, m.reqAck = true, nil, false
		shares, _ := rs.planner.plan(0, nil)
		p := &outPart{msg: m, rail: shares[0].Rail}
		m.parts, m.unsent = []*outPart{p}, 1
		r := rs.rails[p.rail]
		r.q = append(r.q, p)
		r.signal()
		return cancelWithdrawn
	case m.unsent == 0 && m.inflight == 0:
		m.data = append([]byte(nil), m.data...)
		m.owned = true
		return cancelCopied
	default:
		return cancelBreak
	}
}
