// Acknowledgements in both directions: the acknowledgement fields and SACK
// blocks every packet carries, and processing the peer's (retiring
// segments, RTT samples, loss detection, undoing a spurious timeout).

package rudp

import "time"

// ackHeaderLocked fills the acknowledgement fields every packet carries and
// the SACK blocks; it returns how many blocks there are.
func (c *Conn) ackHeaderLocked(h *header, now time.Duration) int {
	r := &c.rcv
	c.updateEdgeLocked()
	h.dst = c.peerID
	h.ack = uint32(r.nxt)
	h.wnd = uint32(r.edge - r.nxt)
	h.tsval = usec(now)
	if r.haveEcho {
		h.tsecr = r.echoTs + usec(now-r.echoAt)
	}
	n := 0
	if len(r.have.s) > 0 {
		// First the block holding the latest arrival (RFC 2018), then the
		// others from the lowest, which are the holes to fill first.
		first := -1
		if i := r.have.search(r.lastOOO); i < len(r.have.s) && r.have.s[i].start <= r.lastOOO {
			first = i
			sp := r.have.s[i]
			r.sack[n] = sackBlock{uint32(sp.start), uint32(sp.end)}
			n++
		}
		for i := 0; i < len(r.have.s) && n < maxSACKBlocks; i++ {
			if i == first {
				continue
			}
			sp := r.have.s[i]
			r.sack[n] = sackBlock{uint32(sp.start), uint32(sp.end)}
			n++
		}
	}
	return n
}

func (c *Conn) ackSentLocked() {
	r := &c.rcv
	r.ackNow = false
	r.unacked = 0
	r.ackAt = 0
	r.advEdge = r.edge
}

// onAckLocked processes the acknowledgement fields. It returns false for a
// packet that acknowledges data never sent (dropped as malformed).
func (c *Conn) onAckLocked(h *header, now time.Duration) bool {
	s := &c.snd
	ack, ok := unwrap(h.ack, s.una)
	if !ok || ack > s.nxt {
		return false
	}
	ackedBytes := 0
	priorInflight := s.inflight
	newly := false
	for s.una < ack {
		seg := s.queue.pop()
		s.una++
		if seg != nil {
			ackedBytes += c.ackSegLocked(seg)
			newly = true
		}
	}
	s.sacked.trimBelow(s.una)
	for i := range int(h.nsack) {
		b := h.sack[i]
		st, ok1 := unwrap(b.start, s.una)
		en, ok2 := unwrap(b.end, s.una)
		if !ok1 || !ok2 {
			continue
		}
		st = max(st, s.una)
		en = min(en, s.nxt)
		if st >= en {
			continue
		}
		c.fresh = s.sacked.add(st, en, c.fresh[:0])
		for _, sp := range c.fresh {
			for q := sp.start; q < sp.end; q++ {
				i := int(q - s.una)
				if seg := s.queue.at(i); seg != nil {
					s.queue.set(i, nil)
					ackedBytes += c.ackSegLocked(seg)
					newly = true
				}
			}
		}
	}
	if e := ack + uint64(min(h.wnd, 1<<24)); e > s.peerEdge {
		s.peerEdge = e
	}
	if newly || c.rtt.samples == 0 {
		if d := usec(now) - h.tsecr; h.tsecr != 0 && d < 1<<31 && d < 60_000_000 {
			c.rtt.update(time.Duration(d) * time.Microsecond)
		}
	}
	if s.undo.pending && newly {
		if s.undo.spurious {
			c.undoRTOLocked()
		}
		s.undo = rtoUndo{}
	}
	if newly {
		s.ptoCount = 0
		s.rtoCount = 0
		s.lastProgress = now
		limited := s.cwndLimited || 2*priorInflight >= c.cc.cwnd
		s.cwndLimited = false
		c.cc.onAck(ackedBytes, now, c.rtt.smoothed(c.cfg.InitialRTO), limited)
		c.detectLossLocked(now)
		if s.flight.head != nil {
			c.armPTOLocked(now)
		} else {
			s.ptoAt = 0
		}
		signal(c.writable)
		c.checkFinishLocked()
	}
	return true
}

// undoRTOLocked reverts a spurious timeout: the window comes back and the
// packets it marked lost that were not resent yet are in flight again.
func (c *Conn) undoRTOLocked() {
	s := &c.snd
	c.stats.SpuriousTimeouts++
	c.cc.cwnd = max(c.cc.cwnd, s.undo.cwnd)
	c.cc.ssthresh = max(c.cc.ssthresh, s.undo.ssthresh)
	for seg := s.lost.head; seg != nil; {
		next := seg.next
		if seg.tx < s.undo.tx {
			s.lost.remove(seg)
			seg.state = segInFlight
			// Keep the flight list ordered by transmission number.
			p := s.flight.head
			for p != nil && p.tx < seg.tx {
				p = p.next
			}
			if p == nil {
				s.flight.pushBack(seg)
			} else {
				seg.prev, seg.next = p.prev, p
				if p.prev != nil {
					p.prev.next = seg
				} else {
					s.flight.head = seg
				}
				p.prev = seg
				s.flight.n++
			}
			s.inflight += seg.wire()
		}
		seg = next
	}
}

// ackSegLocked retires an acknowledged segment and returns its wire size.
func (c *Conn) ackSegLocked(seg *segment) int {
	s := &c.snd
	switch seg.state {
	case segInFlight:
		s.flight.remove(seg)
		s.inflight -= seg.wire()
	case segLost:
		s.lost.remove(seg)
	}
	// Which transmission of a resent packet was acknowledged is unknown;
	// crediting the latest one would declare everything sent between them
	// lost. Only packets sent once advance the loss-detection reference.
	if seg.txCount == 1 && seg.tx > s.largestAcked {
		s.largestAcked = seg.tx
	}
	if s.undo.pending && seg.tx < s.undo.tx {
		// Acknowledged without having been resent since the RTO: the
		// timeout was spurious (F-RTO, RFC 5682).
		s.undo.spurious = true
	}
	if seg.fin {
		s.finAcked = true
	}
	s.charge -= cap(seg.buf.b)
	n := seg.wire()
	c.retireSegLocked(seg)
	return n
}

// detectLossLocked declares lost the packets sent before an acknowledged
// one that are either three transmissions older (packet threshold) or
// older by 9/8 of the RTT (time threshold), as RFC 9002 does. With fewer
// than four packets in flight the packet threshold drops to what can still
// be observed (early retransmit, RFC 5827), so that small windows recover
// from acknowledgements rather than timers.
func (c *Conn) detectLossLocked(now time.Duration) {
	s := &c.snd
	s.lossAt = 0
	delay := c.rtt.lossDelay()
	thresh := uint64(min(3, max(1, s.flight.n-1)))
	for seg := s.flight.head; seg != nil && seg.tx < s.largestAcked; {
		next := seg.next
		if seg.tx+thresh <= s.largestAcked || now-seg.sentAt >= delay {
			c.markLostLocked(seg)
			c.stats.FastRetransmits++
			c.cc.onLoss(seg.tx, s.nextTx-1)
		} else {
			s.lossAt = seg.sentAt + delay
			c.armLocked(s.lossAt)
			break
		}
		seg = next
	}
}

func (c *Conn) markLostLocked(seg *segment) {
	c.snd.flight.remove(seg)
	c.snd.inflight -= seg.wire()
	seg.state = segLost
	c.snd.lost.insertBySeq(seg)
}
