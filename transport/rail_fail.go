// Rail failure: taking a rail down, moving its parts to the rails still up
// (fail-over), telling OnRailDown (RailEvent), and the end of the RailSet
// when no rail is left.

package transport

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// RailEvent reports a rail that failed.
type RailEvent struct {
	Peer int   // the peer's rank
	Rail int   // the failed rail (its index in the links given to NewRailSet)
	Err  error // why it failed
	// Live lists the rails still up, and Model is the model of those
	// rails (Costs[i] is rail Live[i]'s), with the same policy and tuning:
	// the pair's new effective cost is Model.Time(m).
	Live  []int
	Model RailModel
}

// failRail takes rail r down: its queued parts and the parts it carried
// for messages not yet acknowledged move to the rails still up, it is
// closed, and OnRailDown is told. With no rail left the RailSet fails.
func (rs *RailSet) failRail(r *rail, cause error) {
	rs.mu.Lock()
	if !r.alive {
		rs.mu.Unlock()
		return
	}
	quiet := rs.peerBye || rs.c.IsClosed()
	if errors.Is(cause, errRailBye) {
		cause = ErrPeerClosed
	}
	r.alive, r.err = false, cause
	close(r.quit)
	if rs.lent == r {
		rs.lent = nil
	}
	r.lent = false
	rs.live[r.idx] = false
	rs.nlive--
	moved := r.q
	r.q = nil
	for _, m := range rs.unacked {
		for _, p := range m.parts {
			if p.rail == r.idx && p.state != partQueued {
				moved = append(moved, p)
			}
		}
	}
	terminated := false
	if rs.nlive == 0 {
		terminated = rs.terminateLocked(cause)
	} else {
		rs.replanLocked()
		// Oldest messages first: the receiver delivers in order.
		sort.SliceStable(moved, func(i, j int) bool { return moved[i].msg.seq < moved[j].msg.seq })
		now := time.Now()
		start := rs.startBuf[:len(rs.rails)]
		front := make(map[*rail][]*outPart)
		for _, p := range moved {
			if p.msg.acked {
				continue
			}
			if p.state == partSent {
				p.msg.unsent++
			}
			p.state = partQueued
			p.gen++
			for i, x := range rs.rails {
				start[i] = 0
				if d := x.freeAt.Sub(now); d > 0 {
					start[i] = d.Seconds()
				}
			}
			shares, _ := rs.planner.mux(p.n, start)
			p.rail = shares[0].Rail
			to := rs.rails[p.rail]
			front[to] = append(front[to], p)
			rs.chargeLocked(to, p.n, now)
			to.stats.Resent++
		}
		for to, ps := range front {
			to.q = append(ps, to.q...)
			to.signal()
		}
	}
	var ev RailEvent
	if !quiet {
		ev = RailEvent{Peer: rs.peer, Rail: r.idx, Err: cause}
		ev.Model, ev.Live = rs.liveModelLocked()
	}
	rs.sendChangedLocked()
	rs.recvChangedLocked()
	rs.mu.Unlock()

	_ = r.link.Close()
	if terminated && rs.router != nil {
		rs.router.unregister(rs.peer, rs)
	}
	if quiet {
		return
	}
	rs.log.Warn("transport: rail down", "peer", rs.peer, "rail", r.idx, "remote", r.link.RemoteAddr().String(),
		"live", len(ev.Live), "err", cause)
	if cb := rs.cfg.OnRailDown; cb != nil {
		rs.evMu.Lock()
		cb(ev)
		rs.evMu.Unlock()
	}
}

// terminateLocked records that no rail is left. It reports whether this
// call did.
func (rs *RailSet) terminateLocked(cause error) bool {
	if rs.err != nil {
		return false
	}
	switch {
	case rs.c.IsClosed():
		rs.err = ErrClosed
	case rs.peerBye:
		rs.err = ErrPeerClosed
	default:
		rs.err = fmt.Errorf("%w: every rail failed, the last with: %w", ErrPeerClosed, cause)
	}
	// No tick from now on (watchLocked checks err): ackLoop may have
	// returned already.
	rs.ticking = false
	rs.tick.Stop()
	rs.sendChangedLocked()
	rs.recvChangedLocked()
	rs.wakeAcker()
	return true
}
