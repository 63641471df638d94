// The Conn's send path: Write, the send queue, the send token (flush) and
// building a batch of packets within the congestion window and the pacer,
// retransmissions first.

package rudp

import (
	"os"
	"time"
)

// Write queues p on the stream. It blocks while the send buffer is full and
// returns once all of p is queued (not acknowledged).
func (c *Conn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	written := 0
	for {
		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			return written, opError("write", c, err)
		}
		if c.wdl.expired() {
			c.mu.Unlock()
			return written, opError("write", c, os.ErrDeadlineExceeded)
		}
		if len(p) == 0 {
			c.mu.Unlock()
			return written, nil
		}
		// Small writes fill the last segment if it has not left yet.
		if c.snd.end > c.snd.nxt {
			t := c.snd.queue.at(int(c.snd.end - 1 - c.snd.una))
			if !t.fin {
				room := min(len(t.buf.b)-dataOff, c.maxPayload) - t.n
				if room > 0 {
					k := copy(t.buf.b[dataOff+t.n:dataOff+t.n+room], p)
					t.n += k
					p = p[k:]
					written += k
					c.mu.Unlock()
					continue
				}
			}
		}
		if c.snd.charge >= c.cfg.SendBuffer {
			c.mu.Unlock()
			select {
			case <-c.writable:
			case <-c.wdl.wait():
			case <-c.quit:
			case <-c.closing:
			}
			continue
		}
		maxPayload := c.maxPayload
		c.mu.Unlock()

		n := min(len(p), maxPayload)
		s := newSegment(dataOff + n)
		copy(s.buf.b[dataOff:], p[:n])
		s.n = n

		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			freeSegment(s)
			return written, opError("write", c, err)
		}
		c.enqueueLocked(s)
		c.mu.Unlock()
		p = p[n:]
		written += n
		c.flush()
	}
}

func (c *Conn) writeErrLocked() error {
	switch {
	case c.userClosed || c.wClosed:
		return ErrClosed
	case c.state == stateDead:
		return c.err
	}
	return nil
}

func (c *Conn) enqueueLocked(s *segment) {
	s.seq = c.snd.end
	s.state = segQueued
	c.snd.end++
	c.snd.queue.push(s)
	c.snd.charge += cap(s.buf.b)
}

// flush transmits whatever the windows allow. Only one goroutine at a time
// holds the send token; a caller that finds it taken asks the holder to go
// around once more and returns. The token holder writes packet headers into
// segment buffers under mu and sends them without it; segments acknowledged
// meanwhile are freed only by the holder (deferred), so a buffer is never
// recycled while the kernel reads it.
func (c *Conn) flush() {
	c.mu.Lock()
	if c.sending {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.sending = true
	for {
		c.again = false
		pkts := c.collectLocked()
		if len(pkts) == 0 {
			break
		}
		c.mu.Unlock()
		for _, b := range pkts {
			_ = c.ep.write(b, c.peer)
		}
		c.mu.Lock()
		c.reclaimLocked()
	}
	c.sending = false
	c.reclaimLocked()
	fin := c.finish
	c.mu.Unlock()
	if fin {
		c.teardown(ErrClosed, true)
	}
}

func (c *Conn) reclaimLocked() {
	for i, s := range c.deferred {
		freeSegment(s)
		c.deferred[i] = nil
	}
	c.deferred = c.deferred[:0]
}

func (c *Conn) retireSegLocked(s *segment) {
	if c.sending {
		c.deferred = append(c.deferred, s)
	} else {
		freeSegment(s)
	}
}

// collectLocked prepares the next batch of packets.
func (c *Conn) collectLocked() [][]byte {
	c.batch = c.batch[:0]
	if c.state == stateDead {
		return c.batch
	}
	now := c.now()
	if c.state == stateSynSent {
		if c.synDue {
			c.synDue = false
			c.batch = append(c.batch, c.buildSynLocked(typeSYN, 0, now))
		}
		return c.batch
	}
	if c.synackDue {
		c.synackDue = false
		c.batch = append(c.batch, c.buildSynLocked(typeSYNACK, c.peerID, now))
	}
	if c.state == stateSynRcvd {
		// Half-open: nothing but the SYNACK until the peer names our id.
		c.noteSentLocked(now)
		return c.batch
	}
	var ah header
	nblocks := c.ackHeaderLocked(&ah, now)
	c.snd.stop = stopNone
	sentData := false

	// Retransmissions first, oldest sequence number first.
	for len(c.batch) < maxBatch && c.snd.lost.head != nil {
		s := c.snd.lost.head
		if !c.canSendLocked(s.wire(), now) {
			break
		}
		c.transmitLocked(s, &ah, nblocks, now)
		c.stats.Retransmissions++
		sentData = true
	}
	// New data within the peer's window.
	for len(c.batch) < maxBatch && c.snd.nxt < c.snd.end && c.snd.lost.head == nil {
		if c.snd.nxt >= c.snd.peerEdge {
			// Zero window: probe at the retransmission timeout.
			if c.snd.flight.head == nil && c.snd.ptoAt == 0 {
				c.snd.lastProgress = now
				c.armPTOLocked(now)
			}
			break
		}
		s := c.snd.queue.at(int(c.snd.nxt - c.snd.una))
		if !c.canSendLocked(s.wire(), now) {
			break
		}
		c.snd.nxt++
		c.transmitLocked(s, &ah, nblocks, now)
		sentData = true
	}
	idle := c.snd.nxt == c.snd.end && c.snd.lost.head == nil
	if sentData && c.cc.cwnd <= 4*c.cc.mss {
		// A tiny window gains nothing from delayed ACKs: ask for all.
		for _, b := range c.batch {
			if pktType(b[1]) == typeDATA {
				b[2] |= flagACKNOW
			}
		}
	} else if sentData && c.snd.stop != stopPacing && (c.snd.stop == stopCwnd || idle || c.snd.nxt >= c.snd.peerEdge) {
		// Nothing more leaves now: ask for an immediate ACK of the last
		// packet, so that neither a delayed ACK nor a lost tail waits for a
		// timeout.
		c.batch[len(c.batch)-1][2] |= flagACKNOW
	}
	if !sentData && (c.rcv.ackNow || c.pingDue) {
		if c.pingDue {
			ah.flags = flagPING
		}
		ah.typ = typeACK
		ah.nsack = uint8(nblocks)
		copy(ah.sack[:nblocks], c.rcv.sack[:nblocks])
		n := ah.encode(c.ctrlAck)
		c.batch = append(c.batch, c.ctrlAck[:n])
		c.ackSentLocked()
	}
	c.noteSentLocked(now)
	return c.batch
}

// noteSentLocked accounts for the batch about to leave.
func (c *Conn) noteSentLocked(now time.Duration) {
	if len(c.batch) > 0 {
		c.pingDue = false
		c.lastSent = now
		c.stats.PacketsSent += uint64(len(c.batch))
		for _, b := range c.batch {
			c.stats.BytesSent += uint64(len(b))
		}
	}
}

// canSendLocked applies the congestion window and the pacer.
func (c *Conn) canSendLocked(size int, now time.Duration) bool {
	if c.snd.probes > 0 {
		c.snd.probes--
		return true
	}
	if c.snd.inflight > 0 && c.snd.inflight+size > c.cc.cwnd {
		c.snd.cwndLimited = true
		c.snd.stop = stopCwnd
		return false
	}
	if c.cfg.DisablePacing || c.rtt.samples == 0 {
		return true
	}
	rate := c.cc.pacingRate(c.rtt.srtt)
	c.pace.refill(now, rate, pacerBurst(rate, c.cc.mss))
	ok, wait := c.pace.take(size, rate)
	if !ok {
		c.snd.stop = stopPacing
		c.snd.pacingAt = now + max(wait, 20*time.Microsecond)
		c.armLocked(c.snd.pacingAt)
	}
	return ok
}

// transmitLocked writes the header of data segment s and adds it to the
// batch.
func (c *Conn) transmitLocked(s *segment, ah *header, nblocks int, now time.Duration) {
	k := min(nblocks, dataSACKBlocks)
	h := *ah
	h.typ = typeDATA
	h.flags = 0
	if s.fin {
		h.flags = flagFIN
	}
	h.seq = uint32(s.seq)
	h.plen = uint16(s.n)
	h.nsack = uint8(k)
	copy(h.sack[:k], c.rcv.sack[:k])
	start := dataOff - encodedLen(k)
	h.encode(s.buf.b[start:])
	c.batch = append(c.batch, s.buf.b[start:dataOff+s.n])

	switch s.state {
	case segLost:
		c.snd.lost.remove(s)
	case segInFlight:
		c.snd.flight.remove(s)
		c.snd.inflight -= s.wire()
	}
	s.state = segInFlight
	s.tx = c.snd.nextTx
	c.snd.nextTx++
	s.sentAt = now
	s.txCount++
	c.snd.flight.pushBack(s)
	c.snd.inflight += s.wire()
	c.stats.DataPacketsSent++
	if c.snd.ptoAt == 0 {
		c.snd.lastProgress = now
		c.armPTOLocked(now)
	}
	c.ackSentLocked()
}

// buildSynLocked writes a SYN or SYNACK (signed when the connection has a
// key) into ctrlSyn and returns it.
func (c *Conn) buildSynLocked(typ pktType, dst uint64, now time.Duration) []byte {
	h := header{typ: typ, dst: dst, tsval: usec(now)}
	if c.rcv.haveEcho {
		h.tsecr = c.rcv.echoTs + usec(now-c.rcv.echoAt)
	}
	if typ == typeSYNACK {
		h.wnd = uint32(c.rcv.edge - c.rcv.nxt)
	} else {
		h.wnd = uint32(max(2, c.cfg.RecvBuffer/bufCharge(c.maxPacket)))
	}
	return buildSYN(c.ctrlSyn, h, synInfo{srcID: c.localID, maxPacket: uint16(c.maxPacket)}, c.auth)
}
