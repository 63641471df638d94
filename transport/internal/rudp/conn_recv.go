// The Conn's receive path: Read and the receive window, dispatching the
// peer's datagrams (handlePacket, the SYNACK), and reassembly: holding
// packets that arrived out of order and delivering in-order data to the
// read queue.

package rudp

import (
	"io"
	"os"
	"time"
)

// Read reads in-order stream data. It returns io.EOF after the peer's FIN,
// ErrReset or ErrPeerTimeout (wrapped in *net.OpError) when the connection
// failed, and a timeout error matching os.ErrDeadlineExceeded at the read
// deadline.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	for {
		c.mu.Lock()
		if c.userClosed {
			c.mu.Unlock()
			return 0, opError("read", c, ErrClosed)
		}
		if c.rdl.expired() {
			c.mu.Unlock()
			return 0, opError("read", c, os.ErrDeadlineExceeded)
		}
		if c.rcv.readable > 0 {
			if len(p) == 0 {
				c.mu.Unlock()
				return 0, nil
			}
			n := c.consumeLocked(p)
			update := c.windowUpdateLocked()
			c.mu.Unlock()
			if update {
				c.flush()
			}
			return n, nil
		}
		if c.rcv.eof {
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.state == stateDead {
			err := c.err
			c.mu.Unlock()
			return 0, opError("read", c, err)
		}
		c.mu.Unlock()
		select {
		case <-c.readable:
		case <-c.rdl.wait():
		case <-c.quit:
		case <-c.closing:
		}
	}
}

// consumeLocked copies buffered data into p and releases drained buffers.
func (c *Conn) consumeLocked(p []byte) int {
	n := 0
	r := &c.rcv
	for n < len(p) && r.readHead < len(r.readq) {
		ch := &r.readq[r.readHead]
		k := copy(p[n:], ch.pb.b[ch.off:ch.end])
		ch.off += k
		n += k
		if ch.off == ch.end {
			r.held -= cap(ch.pb.b)
			putBuf(ch.pb)
			*ch = rxChunk{}
			r.readHead++
		}
	}
	r.readable -= n
	if r.readHead == len(r.readq) {
		r.readq = r.readq[:0]
		r.readHead = 0
	} else if r.readHead > 64 && r.readHead*2 > len(r.readq) {
		k := copy(r.readq, r.readq[r.readHead:])
		clear(r.readq[k:])
		r.readq = r.readq[:k]
		r.readHead = 0
	}
	if r.readable > 0 {
		signal(c.readable) // let a concurrent reader continue
	}
	return n
}

// windowUpdateLocked recomputes the window after Read and reports whether
// it opened enough to tell the peer at once.
func (c *Conn) windowUpdateLocked() bool {
	c.updateEdgeLocked()
	r := &c.rcv
	if r.advEdge <= r.nxt || r.edge-r.advEdge >= uint64(max(1, c.maxWnd/4)) {
		r.ackNow = true
		return true
	}
	return false
}

func (c *Conn) updateEdgeLocked() {
	r := &c.rcv
	if c.slotCharge == 0 {
		return // before the handshake fixed the packet size
	}
	free := c.cfg.RecvBuffer - r.held
	if free < 0 {
		free = 0
	}
	w := min(free/c.slotCharge, c.maxWnd)
	if e := r.nxt + uint64(w); e > r.edge {
		r.edge = e
	}
}

// handlePacket processes one decoded datagram from the peer (its MAC, if
// any, already checked by the reader). pb is the buffer payload lives in;
// the result says whether the Conn kept it.
func (c *Conn) handlePacket(h *header, payload []byte, pb *pbuf) (kept bool) {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return false
	}
	now := c.now()
	c.stats.PacketsReceived++
	c.stats.BytesReceived += uint64(encodedLen(int(h.nsack)) + len(payload))
	var fail error
	promoted := false
	switch h.typ {
	case typeSYN:
		info, err := decodeSYN(payload)
		switch {
		case err != nil || c.isClient || info.srcID != c.peerID:
			c.drops.foreign.Add(1)
		case c.state == stateSynRcvd:
			// A retransmitted SYN: our SYNACK was lost. It is not a sign
			// of life: a half-open connection lives until synAt.
			c.noteEchoLocked(h, now)
			c.synackDue = true
		default:
			// The peer has our SYNACK (it sent packets naming our id):
			// a late duplicate or a replay. No answer, no state change.
			c.stats.StaleHandshakes++
		}
	case typeSYNACK:
		c.onSynAckLocked(h, payload, now)
	case typeRST:
		if c.rstAcceptedLocked(h, payload) {
			fail = ErrReset
		} else {
			c.drops.foreign.Add(1)
		}
	default:
		if h.dst != c.localID || c.state == stateSynSent {
			c.drops.foreign.Add(1)
			break
		}
		if c.state == stateSynRcvd {
			// The peer names our id, which only our SYNACK carried: the
			// handshake is complete.
			c.state = stateEstablished
			c.synAt = 0
			close(c.established)
			promoted = true
		}
		if !c.onAckLocked(h, now) {
			c.drops.malformed.Add(1)
			break
		}
		c.lastRecv = now
		c.noteEchoLocked(h, now)
		switch h.typ {
		case typeDATA:
			kept = c.onDataLocked(h, payload, pb, now)
		case typeACK:
			if h.flags&flagPING != 0 {
				c.rcv.ackNow = true
			}
		}
	}
	c.mu.Unlock()
	if promoted && c.promote != nil {
		c.promote()
	}
	if fail != nil {
		c.teardown(fail, false)
		return kept
	}
	c.flush()
	return kept
}

// rstAcceptedLocked decides whether an RST ends this connection. An
// authenticated RST also names its sender's id, which must fit.
func (c *Conn) rstAcceptedLocked(h *header, payload []byte) bool {
	src, authed := rstSource(h, payload)
	switch {
	case c.peerID != 0 && h.dst == c.peerID:
		// Reflected by the peer's socket: it has no connection with the
		// id we know it by any more (a reflected RST names no sender).
		return !authed || src == 0
	case h.dst == c.localID && c.state != stateSynSent:
		// Sent by the peer of this connection.
		return !authed || src == c.peerID
	}
	return false
}

// probe makes the connection send a packet to its peer's address now (a
// PING, or the SYNACK while half-open), at most once per RTO. The
// listener calls it when a SYN with another connection id comes from that
// address: a peer that is alive answers as usual, while a socket that
// changed hands (the peer restarted on the same port) answers with an RST
// for the old id, which ends this connection so that the new one can
// start (docs/rudp.md, "Restart").
func (c *Conn) probe() {
	c.mu.Lock()
	now := c.now()
	if c.state == stateDead || (c.lastProbe != 0 && now-c.lastProbe < c.rtoLocked()) {
		c.mu.Unlock()
		return
	}
	c.lastProbe = now
	if c.state == stateSynRcvd {
		c.synackDue = true
	} else {
		c.pingDue = true
	}
	c.mu.Unlock()
	c.flush()
}

func (c *Conn) noteEchoLocked(h *header, now time.Duration) {
	c.rcv.echoTs = h.tsval
	c.rcv.echoAt = now
	c.rcv.haveEcho = true
}

func (c *Conn) onSynAckLocked(h *header, payload []byte, now time.Duration) {
	info, err := decodeSYN(payload)
	if err != nil || !c.isClient || h.dst != c.localID {
		c.drops.foreign.Add(1)
		return
	}
	if c.state != stateSynSent {
		if info.srcID == c.peerID {
			// A duplicate (or a replay): answering with an ACK is
			// harmless and helps a server that missed ours.
			c.stats.StaleHandshakes++
			c.rcv.ackNow = true
		}
		return
	}
	if int(info.maxPacket) > c.maxPacket {
		c.drops.malformed.Add(1)
		return
	}
	c.peerID = info.srcID
	c.setPacketSize(int(info.maxPacket))
	c.snd.peerEdge = uint64(min(h.wnd, 1<<24))
	c.state = stateEstablished
	c.lastRecv = now
	c.noteEchoLocked(h, now)
	if d := usec(now) - h.tsecr; h.tsecr != 0 && d < 1<<31 {
		c.rtt.update(time.Duration(d) * time.Microsecond)
	}
	c.rcv.ackNow = true
	close(c.established)
}

// onDataLocked handles a DATA packet's payload.
func (c *Conn) onDataLocked(h *header, payload []byte, pb *pbuf, now time.Duration) (kept bool) {
	r := &c.rcv
	c.stats.DataPacketsReceived++
	fin := h.flags&flagFIN != 0
	seq, ok := unwrap(h.seq, r.nxt)
	if !ok || seq < r.nxt || r.have.contains(seq) {
		c.stats.DuplicatesDropped++
		r.ackNow = true
		return false
	}
	if seq >= r.edge || (r.finSeen && seq > r.finSeq) {
		c.stats.OutsideWindow++
		r.ackNow = true
		return false
	}
	if fin {
		if r.finSeen && r.finSeq != seq {
			c.drops.malformed.Add(1)
			return false
		}
		if r.have.len() > 0 && r.have.s[len(r.have.s)-1].end > seq+1 {
			c.drops.malformed.Add(1) // data beyond the FIN
			return false
		}
		r.finSeen, r.finSeq = true, seq
	}
	if seq != r.nxt {
		// Out of order: hold it, SACK it at once.
		c.stats.OutOfOrder++
		slot := &r.ooo[seq&uint64(len(r.ooo)-1)]
		kept = c.storeLocked(&slot.pb, &slot.off, &slot.end, payload, pb)
		slot.fin = fin
		slot.present = true
		c.fresh = r.have.add(seq, seq+1, c.fresh[:0])
		r.lastOOO = seq
		r.ackNow = true
		c.updateEdgeLocked()
		return kept
	}
	kept = c.deliverLocked(payload, pb, fin)
	r.nxt++
	filled := false
	if sp, ok := r.have.first(); ok && sp.start == r.nxt {
		for q := sp.start; q < sp.end; q++ {
			c.deliverSlotLocked(&r.ooo[q&uint64(len(r.ooo)-1)])
		}
		r.nxt = sp.end
		filled = true
		r.have.trimBelow(r.nxt)
	}
	c.updateEdgeLocked()
	r.unacked++
	if r.unacked >= c.ackEvery || filled || fin || r.have.len() > 0 || h.flags&flagACKNOW != 0 {
		r.ackNow = true
	} else if r.ackAt == 0 {
		r.ackAt = now + c.cfg.AckDelay
		c.armLocked(r.ackAt)
	}
	signal(c.readable)
	return kept
}

// storeLocked keeps payload in *dst: small payloads are copied into a small
// buffer so that a 64 KiB read buffer is not pinned; otherwise pb itself is
// kept (the result says so).
func (c *Conn) storeLocked(dst **pbuf, off, end *int, payload []byte, pb *pbuf) bool {
	if len(payload) <= smallBufSize && cap(pb.b) > smallBufSize {
		nb := getBuf(len(payload))
		copy(nb.b, payload)
		*dst, *off, *end = nb, 0, len(payload)
		c.rcv.held += cap(nb.b)
		return false
	}
	*dst = pb
	*off = cap(pb.b) - cap(payload)
	*end = *off + len(payload)
	c.rcv.held += cap(pb.b)
	return true
}

// deliverLocked appends in-order payload to the read queue.
func (c *Conn) deliverLocked(payload []byte, pb *pbuf, fin bool) (kept bool) {
	r := &c.rcv
	if fin {
		r.eof = true
	}
	if len(payload) == 0 {
		return false
	}
	r.readable += len(payload)
	if c.appendTailLocked(payload) {
		return false
	}
	var ch rxChunk
	kept = c.storeLocked(&ch.pb, &ch.off, &ch.end, payload, pb)
	r.readq = append(r.readq, ch)
	return kept
}

// appendTailLocked copies a small payload behind the last unread chunk when
// its buffer has room.
func (c *Conn) appendTailLocked(payload []byte) bool {
	r := &c.rcv
	if len(payload) > smallBufSize/2 || len(r.readq) == r.readHead {
		return false
	}
	t := &r.readq[len(r.readq)-1]
	if cap(t.pb.b)-t.end < len(payload) {
		return false
	}
	t.end += copy(t.pb.b[t.end:cap(t.pb.b)], payload)
	return true
}

func (c *Conn) deliverSlotLocked(slot *rxSlot) {
	r := &c.rcv
	if slot.fin {
		r.eof = true
	}
	if n := slot.end - slot.off; n > 0 {
		r.readable += n
		if c.appendTailLocked(slot.pb.b[slot.off:slot.end]) {
			r.held -= cap(slot.pb.b)
			putBuf(slot.pb)
		} else {
			r.readq = append(r.readq, rxChunk{pb: slot.pb, off: slot.off, end: slot.end})
		}
	} else if slot.pb != nil {
		r.held -= cap(slot.pb.b)
		putBuf(slot.pb)
	}
	*slot = rxSlot{}
}
