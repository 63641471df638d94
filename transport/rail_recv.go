// The RailSet's receive path: incoming messages and their parts, Recv, the
// rails' reader goroutines, frame handling, reassembly in place (with the
// Alloc hook) and in-order delivery to the ready queue.

package transport

import (
	"context"
	"errors"
)

type inState uint8

const (
	inAnnounced inState = iota // the header arrived
	inClaimed                  // the bytes are being written in place
	inDone                     // the bytes are in place and verified
)

type inPart struct {
	off, n uint64
	crc    uint32
	rail   int    // the rail whose copy is expected
	gen    uint32 // the sender's count of the part's moves, in that copy
	inline bool
	state  inState
}

// inMsg is a message being received.
type inMsg struct {
	h        Header // the upper layer's header
	nparts   uint32
	parts    []*inPart
	done     uint32
	bytes    uint64
	buf      []byte
	inline   []byte // the payload of a single inline part when buf is nil
	reqAck   bool
	skip     bool
	complete bool
}

func (m *inMsg) part(off uint64) *inPart {
	for _, p := range m.parts {
		if p.off == off {
			return p
		}
	}
	return nil
}

// Recv returns the next message, in the order the peer sent them.
func (rs *RailSet) Recv(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, rs.opErr("recv", err)
	}
	rs.mu.Lock()
	rs.recvIn++
	m, err := rs.recvLocked(ctx)
	rs.recvIn--
	rs.leaveRecvLocked()
	rs.mu.Unlock()
	if err != nil {
		return Message{}, rs.opErr("recv", err)
	}
	return m, nil
}

func (rs *RailSet) recvLocked(ctx context.Context) (Message, error) {
	for {
		if rs.c.IsClosed() {
			return Message{}, ErrClosed
		}
		if rs.readyHead < len(rs.ready) {
			m := rs.ready[rs.readyHead]
			rs.ready[rs.readyHead] = Message{}
			rs.readyHead++
			if rs.readyHead == len(rs.ready) {
				rs.ready, rs.readyHead = rs.ready[:0], 0
			}
			full := rs.readyBytes >= int64(rs.cfg.RecvBuffer)
			rs.readyBytes -= int64(len(m.Payload))
			if full && rs.readyBytes < int64(rs.cfg.RecvBuffer) {
				rs.recvChangedLocked() // readers waiting for room
			}
			return m, nil
		}
		if rs.err != nil {
			return Message{}, rs.err
		}
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		if r := rs.lent; r != nil && !r.callerIn {
			rs.readLent(ctx, r)
			continue
		}
		ch := rs.recvCh
		rs.recvWait++
		rs.recvCallers++
		rs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		case <-rs.c.Quit:
		}
		rs.mu.Lock()
		rs.recvWait--
		rs.recvCallers--
	}
}

// readLoop is rail r's reader goroutine: it reads the rail while the rail
// is not lent, until the rail goes down.
func (rs *RailSet) readLoop(r *rail) {
	defer rs.wg.Done()
	rs.readFailed(r, rs.readRail(r))
	rs.mu.Lock()
	r.readerOut = true
	rs.readerGoneLocked(r)
	rs.mu.Unlock()
}

// readFailed takes rail r down after reading or handling a frame of it
// failed.
func (rs *RailSet) readFailed(r *rail, err error) {
	var fe *FrameError
	if errors.As(err, &fe) {
		rs.log.Warn("transport: bad rail frame", "peer", rs.peer, "rail", r.idx, "err", err)
	}
	rs.failRail(r, err)
}

// readerGoneLocked closes r.readerDone once the rail is down and neither
// its reader goroutine nor a Recv caller reads it: nothing of this rail
// will be written in place any more, so the parts it was writing can take
// another rail's copy.
func (rs *RailSet) readerGoneLocked(r *rail) {
	if r.alive || !r.readerOut || r.callerIn || r.doneSent {
		return
	}
	r.doneSent = true
	for _, m := range rs.in {
		for _, p := range m.parts {
			if p.rail == r.idx && p.state == inClaimed {
				p.state = inAnnounced
			}
		}
	}
	close(r.readerDone)
}

func (rs *RailSet) readRail(r *rail) error {
	rs.mu.Lock()
	for {
		for r.alive && (r.lent || r.callerIn || rs.readyBytes >= int64(rs.cfg.RecvBuffer)) {
			if r.lent || r.callerIn {
				rs.mu.Unlock()
				select {
				case <-r.lendWake:
				case <-r.quit:
				}
				rs.mu.Lock()
				continue
			}
			ch := rs.recvCh
			rs.recvWait++
			rs.mu.Unlock()
			select {
			case <-ch:
			case <-r.quit:
			}
			rs.mu.Lock()
			rs.recvWait--
		}
		alive := r.alive
		rs.mu.Unlock()
		if !alive {
			return errRailDown
		}
		m, err := r.link.Recv(ioCtx)
		if err != nil {
			return err
		}
		if err := rs.onFrame(r, &m); err != nil {
			return err
		}
		rs.mu.Lock()
	}
}

// onFrame handles a frame read on rail r.
func (rs *RailSet) onFrame(r *rail, m *Message) error {
	switch m.Header.Type {
	case MsgRail:
		return rs.onRail(r, m)
	case MsgRailData:
		return rs.onData(r, m)
	}
	return &FrameError{Field: "rail outer type", Value: uint64(m.Header.Type), Err: ErrMalformed}
}

func (rs *RailSet) onRail(r *rail, m *Message) error {
	h, inline, err := decodeRailFrame(m.Payload, uint64(rs.maxMsg))
	if err != nil {
		return err
	}
	if int(h.Rail) != r.idx || int(m.Header.Flags) != r.idx {
		return railFrameErr("rail", uint64(h.Rail), uint64(r.idx), ErrMalformed)
	}
	if err := rs.onAck(h.Ack); err != nil {
		return err
	}
	switch h.Kind {
	case railKindAck:
		return nil
	case railKindBye:
		rs.mu.Lock()
		rs.peerBye = true
		rs.mu.Unlock()
		return errRailBye
	}
	return rs.onPart(r, &m.Header, &h, inline)
}

// inMsgLocked returns the message being received under seq, creating it
// (and calling the upper Alloc, with allocMu only) if this is its first
// part. It returns nil if the message completed meanwhile. mu is held on
// entry and exit but released in between.
func (rs *RailSet) inMsgLocked(outer *Header, h *railHead, inline bool) *inMsg {
	if m := rs.in[h.Seq]; m != nil {
		return m
	}
	rs.mu.Unlock()
	rs.allocMu.Lock()
	defer rs.allocMu.Unlock()
	rs.mu.Lock()
	if m := rs.in[h.Seq]; m != nil || h.Seq < rs.complete {
		return m
	}
	if h.Kind == railKindSkip {
		m := &inMsg{skip: true, nparts: 1}
		rs.in[h.Seq] = m
		return m
	}
	rs.mu.Unlock()
	uh := Header{Version: outer.Version, Type: h.Type, Flags: h.UFlags, Job: outer.Job, Src: outer.Src,
		Comm: h.Comm, Tag: h.Tag, Seq: h.USeq, Len: h.Total}
	var buf []byte
	if rs.upper != nil {
		if b := rs.upper(uh); uint64(cap(b)) >= h.Total {
			buf = b[:h.Total]
		}
	}
	if buf == nil && !(h.Parts == 1 && inline) {
		buf = make([]byte, h.Total)
	}
	rs.mu.Lock()
	m := &inMsg{h: uh, nparts: h.Parts, buf: buf}
	rs.in[h.Seq] = m
	return m
}

// onPart handles a part announcement (or a skip) received on rail r.
func (rs *RailSet) onPart(r *rail, outer *Header, h *railHead, inline []byte) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// A part that is not inline is followed by its data frame on this
	// rail, whatever becomes of this header.
	r.awaitData = h.Kind == railKindPart && h.Flags&railFlagInline == 0
	if h.Seq < rs.complete {
		return nil // a copy of a complete message
	}
	if h.Seq-rs.complete >= railMaxReorder {
		return railFrameErr("seq", h.Seq, rs.complete+railMaxReorder-1, ErrMalformed)
	}
	m := rs.inMsgLocked(outer, h, inline != nil)
	if m == nil {
		return nil
	}
	if m.skip != (h.Kind == railKindSkip) {
		return railFrameErr("kind", uint64(h.Kind), 0, ErrMalformed)
	}
	if m.skip {
		if !m.complete {
			m.complete = true
			rs.advanceLocked(r)
		}
		return nil
	}
	if m.h.Type != h.Type || m.h.Flags != h.UFlags || m.h.Comm != h.Comm || m.h.Tag != h.Tag ||
		m.h.Seq != h.USeq || m.h.Len != h.Total || m.nparts != h.Parts {
		return railFrameErr("message header", h.Seq, 0, ErrMalformed)
	}
	if h.Flags&railFlagAckReq != 0 {
		m.reqAck = true
	}
	isInline := h.Flags&railFlagInline != 0
	p := m.part(h.Off)
	if p == nil {
		if uint32(len(m.parts)) >= m.nparts {
			return railFrameErr("parts", uint64(len(m.parts)+1), uint64(m.nparts), ErrMalformed)
		}
		for _, q := range m.parts {
			if h.Off < q.off+q.n && q.off < h.Off+h.Len {
				return railFrameErr("overlapping part", h.Off, 0, ErrMalformed)
			}
		}
		p = &inPart{off: h.Off, n: h.Len, crc: h.CRC, rail: r.idx, gen: h.Gen, inline: isInline}
		m.parts = append(m.parts, p)
	} else {
		if p.n != h.Len || p.crc != h.CRC || p.inline != isInline {
			return railFrameErr("re-sent part", h.Off, 0, ErrMalformed)
		}
		switch {
		case h.Gen < p.gen:
			// A copy the peer sent before it gave up on this rail, read
			// after the copy it re-sent on another: this rail is the one
			// abandoned, whatever became of the part.
			return errRailSuperseded
		case p.state == inDone:
			return nil
		case h.Gen == p.gen || p.rail == r.idx:
			return railFrameErr("part sent twice", h.Off, uint64(p.gen), ErrMalformed)
		}
		// The peer re-sent the part: it gave up on the rail that carried
		// it. Take that rail down too and wait until its reader can no
		// longer write in place.
		old := rs.rails[p.rail]
		rs.mu.Unlock()
		rs.failRail(old, errRailSuperseded)
		select {
		case <-old.readerDone:
		case <-r.quit:
		}
		rs.mu.Lock()
		if !r.alive {
			return errRailDown
		}
		if p.state == inDone {
			return nil
		}
		p.rail, p.gen, p.state = r.idx, h.Gen, inAnnounced
	}
	if isInline {
		if m.buf != nil {
			copy(m.buf[p.off:p.off+p.n], inline)
		} else {
			m.inline = inline
		}
		return rs.partDoneLocked(r, m, p)
	}
	return nil
}

// onData handles the bytes of a part received on rail r.
func (rs *RailSet) onData(r *rail, msg *Message) error {
	fh := &msg.Header
	if int(fh.Flags) != r.idx {
		return railFrameErr("data rail", uint64(fh.Flags), uint64(r.idx), ErrMalformed)
	}
	seq, off := fh.Seq, railDataOffset(fh)
	payload := msg.Payload
	// The bytes are this rail's alone (its claim, or its own buffer):
	// check them before taking the lock.
	sum := crc32c(payload)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.awaitData = false
	if !r.alive {
		return errRailDown
	}
	if seq < rs.complete {
		return nil
	}
	m := rs.in[seq]
	var p *inPart
	if m != nil && !m.skip {
		p = m.part(off)
	}
	switch {
	case p == nil || p.inline:
		return railFrameErr("data without its part header", seq, 0, ErrMalformed)
	case uint64(len(payload)) != p.n:
		return railFrameErr("data length", uint64(len(payload)), p.n, ErrMalformed)
	case p.rail != r.idx || p.state == inDone:
		return railFrameErr("data of another rail's part", seq, 0, ErrMalformed)
	}
	if sum != p.crc {
		if p.state == inClaimed {
			p.state = inAnnounced
		}
		return railFrameErr("part checksum", uint64(sum), uint64(p.crc), ErrRailChecksum)
	}
	if &payload[0] != &m.buf[off] {
		// Read elsewhere (no Router, or the Alloc hook ran before the
		// part header was processed): copy into place. The claim keeps
		// the hook off these bytes meanwhile.
		p.state = inClaimed
		rs.copyIns++
		buf := m.buf
		rs.mu.Unlock()
		copy(buf[off:off+p.n], payload)
		rs.mu.Lock()
	}
	return rs.partDoneLocked(r, m, p)
}

// partDoneLocked marks p's bytes, received on rail r, as in place and
// checked.
func (rs *RailSet) partDoneLocked(r *rail, m *inMsg, p *inPart) error {
	p.state = inDone
	m.done++
	m.bytes += p.n
	if m.done < m.nparts {
		return nil
	}
	if m.bytes != m.h.Len {
		return railFrameErr("parts total", m.bytes, m.h.Len, ErrMalformed)
	}
	m.complete = true
	rs.advanceLocked(r)
	return nil
}

// advanceLocked moves the complete messages at the head of the sequence to
// the ready queue, and schedules the acknowledgement. from is the rail
// whose frame completed a message.
func (rs *RailSet) advanceLocked(from *rail) {
	advanced := false
	for {
		m := rs.in[rs.complete]
		if m == nil || !m.complete {
			break
		}
		delete(rs.in, rs.complete)
		rs.complete++
		advanced = true
		if m.reqAck {
			rs.ackNow = true
		}
		if m.skip {
			continue
		}
		payload := m.buf
		if payload == nil {
			payload = m.inline
		}
		if payload == nil {
			payload = []byte{}
		}
		rs.ready = append(rs.ready, Message{Header: m.h, Payload: payload})
		rs.readyBytes += int64(len(payload))
	}
	if !advanced {
		return
	}
	if l := rs.lent; l != nil && l.callerIn && l != from {
		l.sl.stopRecv() // the Recv caller reading it has a message now
	}
	if from.callerIn {
		rs.lendMisses = 0
	} else if rs.recvIn > 0 {
		// A hand-off: from's reader goroutine is done with the frame
		// (this is the last thing it does with it) and stops reading
		// from once lent.
		rs.lendLocked(from)
	}
	rs.recvChangedLocked()
	if rs.ackNow {
		rs.wakeAcker()
	} else {
		rs.watchLocked() // a message in the other direction may carry it
	}
}

// allocPart is the Alloc hook for MsgRailData frames (see RailRouter): the
// bytes of an announced part land at their offset in the message's buffer.
func (rs *RailSet) allocPart(h Header) []byte {
	idx := int(h.Flags)
	off := railDataOffset(&h)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if idx >= len(rs.rails) || !rs.rails[idx].alive {
		return nil
	}
	m := rs.in[h.Seq]
	if m == nil || m.buf == nil {
		return nil
	}
	p := m.part(off)
	if p == nil || p.inline || p.n != h.Len || p.rail != idx || p.state != inAnnounced {
		return nil
	}
	p.state = inClaimed
	return m.buf[off : off+p.n : off+p.n]
}
