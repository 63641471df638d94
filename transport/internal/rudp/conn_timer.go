// The Conn's timer: the retransmission timeout and tail-loss probes, and
// the other deadlines it watches (SYN retries, delayed ACKs, pacing,
// keep-alives, the idle timeout and Close's linger).

package rudp

import "time"

// rtoLocked is the RFC 6298 retransmission timeout with exponential backoff.
func (c *Conn) rtoLocked() time.Duration {
	rto := c.rtt.rto(c.cfg.InitialRTO, c.cfg.AckDelay, c.cfg.MinRTO, c.cfg.MaxRTO)
	for i := 0; i < c.snd.rtoCount && rto < c.cfg.MaxRTO; i++ {
		rto *= 2
	}
	return min(rto, max(c.cfg.MaxRTO, c.cfg.InitialRTO))
}

// probeLocked is the tail-loss probe timeout, doubled per unanswered probe
// and never beyond the RTO.
func (c *Conn) probeLocked() time.Duration {
	p := c.rtt.probeTimeout(c.cfg.InitialRTO) << min(c.snd.ptoCount, 20)
	return min(p, c.rtoLocked())
}

// armPTOLocked schedules the next probe, or the RTO counted from the last
// acknowledgement progress, whichever is first.
func (c *Conn) armPTOLocked(now time.Duration) {
	s := &c.snd
	s.ptoAt = min(now+c.probeLocked(), max(s.lastProgress+c.rtoLocked(), now))
	c.armLocked(s.ptoAt)
}

// armLocked makes the timer fire no later than at.
func (c *Conn) armLocked(at time.Duration) {
	if at <= 0 || c.state == stateDead {
		return
	}
	if c.timerAt != 0 && c.timerAt <= at {
		return
	}
	c.timerAt = at
	c.timer.Reset(max(at-c.now(), 0))
}

func (c *Conn) timerLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.quit:
			return
		case <-c.timer.C:
		}
		c.onTimer()
	}
}

func (c *Conn) onTimer() {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return
	}
	now := c.now()
	c.timerAt = 0
	var fail error
	rst := false
	if c.cfg.IdleTimeout > 0 && now-c.lastRecv >= c.cfg.IdleTimeout {
		fail = ErrPeerTimeout
	}
	if c.userClosed && c.lingerAt != 0 && now >= c.lingerAt {
		fail, rst = ErrClosed, true
	}
	if c.state == stateSynRcvd && now >= c.synAt {
		fail = ErrPeerTimeout // the handshake was never completed
	}
	if c.state == stateSynSent && now >= c.synAt {
		c.synDue = true
		c.synCount++
		c.synAt = now + min(c.cfg.InitialRTO<<min(c.synCount, 10), max(c.cfg.MaxRTO, c.cfg.InitialRTO))
	}
	if c.rcv.ackAt != 0 && now >= c.rcv.ackAt {
		c.rcv.ackNow = true
		c.rcv.ackAt = 0
	}
	if c.snd.lossAt != 0 && now >= c.snd.lossAt {
		c.detectLossLocked(now)
	}
	if c.snd.ptoAt != 0 && now >= c.snd.ptoAt {
		c.onPTOLocked(now)
	}
	if c.snd.pacingAt != 0 && now >= c.snd.pacingAt {
		c.snd.pacingAt = 0
	}
	if c.state == stateEstablished && c.cfg.KeepAlive > 0 && now-c.lastSent >= c.cfg.KeepAlive {
		c.pingDue = true
	}
	c.armLocked(c.nextDeadlineLocked(now))
	c.mu.Unlock()
	if fail != nil {
		c.teardown(fail, rst)
		return
	}
	c.flush()
}

// onPTOLocked handles the retransmission timer. Before a full RTO has
// passed without acknowledgement progress it sends a tail-loss probe (the
// oldest unacknowledged packet again, past the congestion window), whose
// acknowledgement lets SACK-based detection find the other losses. After
// the RTO the path is taken to have lost everything: the window collapses
// to one packet and all in-flight packets are resent (RFC 6298 5.5-5.7).
func (c *Conn) onPTOLocked(now time.Duration) {
	s := &c.snd
	s.ptoAt = 0
	switch {
	case s.flight.head != nil:
		if now >= s.lastProgress+c.rtoLocked() {
			s.rtoCount++
			c.stats.Timeouts++
			if !s.undo.pending {
				s.undo = rtoUndo{pending: true, tx: s.nextTx, cwnd: c.cc.cwnd, ssthresh: c.cc.ssthresh}
			}
			c.cc.onRTO(s.nextTx - 1)
			for s.flight.head != nil {
				c.markLostLocked(s.flight.head)
			}
			s.lastProgress = now
		} else {
			s.ptoCount++
			c.stats.Probes++
			c.markLostLocked(s.flight.head)
		}
		s.probes = 1
		c.armPTOLocked(now)
	case s.nxt < s.end && s.nxt >= s.peerEdge:
		// Zero-window probe: ask for the current window.
		s.ptoCount++
		c.pingDue = true
		s.lastProgress = now
		c.armPTOLocked(now)
	}
}

// nextDeadlineLocked is the earliest time the timer must look again.
func (c *Conn) nextDeadlineLocked(now time.Duration) time.Duration {
	next := time.Duration(0)
	consider := func(t time.Duration) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	consider(c.snd.ptoAt)
	consider(c.snd.lossAt)
	consider(c.snd.pacingAt)
	consider(c.rcv.ackAt)
	consider(c.lingerAt)
	if c.state == stateSynSent || c.state == stateSynRcvd {
		consider(c.synAt)
	}
	if c.cfg.KeepAlive > 0 && c.state == stateEstablished {
		consider(c.lastSent + c.cfg.KeepAlive)
	}
	if c.cfg.IdleTimeout > 0 {
		consider(c.lastRecv + c.cfg.IdleTimeout)
	}
	if next != 0 && next <= now {
		next = now + time.Microsecond
	}
	return next
}
