// The RailSet's acknowledgements: recording the peer's, sending ours when
// no message in the other direction carried them in time (ackLoop), and the
// tick that watches for both a due acknowledgement and an unread lent rail.

package transport

import "time"

func (rs *RailSet) wakeAcker() {
	select {
	case rs.ackCh <- struct{}{}:
	default:
	}
}

// onAck records that the peer has every message below v.
func (rs *RailSet) onAck(v uint64) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if v > rs.nextSeq {
		return railFrameErr("ack", v, rs.nextSeq, ErrMalformed)
	}
	n := 0
	for n < len(rs.unacked) && rs.unacked[n].seq < v {
		m := rs.unacked[n]
		m.acked = true
		rs.copied -= m.counted
		rs.unacked[n] = nil
		n++
	}
	if n > 0 {
		rs.unacked = rs.unacked[n:]
		if len(rs.unacked) == 0 {
			rs.unacked = nil
		}
		rs.sendChangedLocked()
	}
	return nil
}

// watchLocked starts the tick, if it is not running: an acknowledgement is
// due, or the lent rail was left unread.
func (rs *RailSet) watchLocked() {
	if !rs.ticking && rs.err == nil {
		rs.ticking = true
		rs.tick.Reset(rs.cfg.AckDelay)
	}
}

// tickLocked runs every AckDelay while there is something to watch. A
// tick keeps running while messages come in, rather than being started
// for each one: starting a timer wakes a thread when the process is idle,
// which costs a small message's round trip several microseconds.
//   - An acknowledgement that no message carried since the last tick is
//     sent now, so within AckDelay.
//   - The lent rail, if no Recv caller has read it since the last tick
//     and none is reading it, goes back to its reader goroutine: a peer
//     waiting for an acknowledgement (a large message, a full window)
//     gets it within two ticks even if nobody calls Recv.
//
// The tick stops after a tick with nothing to watch.
func (rs *RailSet) tickLocked() {
	active := false
	if rs.complete > rs.ackSent {
		rs.ackNow, active = true, true
	}
	if rs.complete != rs.tickSeen[0] {
		rs.tickSeen[0], active = rs.complete, true
	}
	if l := rs.lent; l != nil {
		switch {
		case rs.lentReads != rs.tickSeen[1]:
			rs.tickSeen[1], active = rs.lentReads, true
		case !l.callerIn:
			rs.unlendLocked()
		}
	}
	if !active {
		rs.ticking = false
		rs.tick.Stop()
	}
}

// ackLoop sends acknowledgements that no message in the other direction
// carried in time, and runs the ticks.
func (rs *RailSet) ackLoop() {
	defer rs.wg.Done()
	defer rs.tick.Stop()
	for {
		tick := false
		select {
		case <-rs.ackCh:
		case <-rs.tick.C:
			tick = true
		case <-rs.c.Quit:
			return
		}
		rs.mu.Lock()
		if rs.err != nil {
			rs.mu.Unlock()
			return
		}
		if tick {
			rs.tickLocked()
		}
		if !rs.ackNow || rs.complete <= rs.ackSent {
			rs.ackNow = false
			rs.mu.Unlock()
			continue
		}
		r := rs.ackRailLocked(time.Now())
		if r == nil {
			rs.mu.Unlock()
			return
		}
		val := rs.complete
		rs.ackNow = false
		rs.mu.Unlock()
		var b [railHeadSize]byte
		putRailHead(b[:], &railHead{Kind: railKindAck, Rail: uint16(r.idx), Ack: val})
		err := r.link.Send(ioCtx, Header{Type: MsgRail, Flags: uint16(r.idx)}, b[:])
		if err != nil {
			rs.failRail(r, err)
			rs.mu.Lock()
			rs.ackNow = true
			rs.mu.Unlock()
			rs.wakeAcker()
			continue
		}
		rs.mu.Lock()
		if val > rs.ackSent {
			rs.ackSent = val
		}
		rs.mu.Unlock()
	}
}

// ackRailLocked is the live rail predicted to deliver a tiny message first.
func (rs *RailSet) ackRailLocked(now time.Time) *rail {
	var best *rail
	var bt time.Time
	for _, r := range rs.rails {
		if !r.alive {
			continue
		}
		t := r.freeAt
		if t.Before(now) {
			t = now
		}
		t = t.Add(time.Duration(rs.costs[r.idx].Latency * float64(time.Second)))
		if best == nil || t.Before(bt) {
			best, bt = r, t
		}
	}
	return best
}
