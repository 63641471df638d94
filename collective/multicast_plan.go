package collective

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
)

// mcCosts is the multicast cost model flattened into arrays. The planners
// and the simulator compute every time through the same expressions, in the
// same order of floating-point operations, so a planner's predicted times
// equal the simulator's bit for bit. (The explicit float64 conversions keep
// the compiler from fusing a multiply and an add on machines with FMA.)
type mcCosts struct {
	n      int
	sc, sm []float64 // send overhead S(i,l) = sc[i] + sm[i]*l
	rc, rm []float64 // receive overhead R(j,l) = rc[j] + rm[j]*l
	xin    []float64 // xin[j*n+i] = X(i,j), seconds per byte from i to j (receiver-major)
	lin    []float64 // lin[j*n+i] = latency from i to j (zero when the model has none)
}

func newMCCosts(m *Model) *mcCosts {
	n := m.Size()
	c := &mcCosts{n: n}
	buf := make([]float64, 4*n+2*n*n)
	c.sc, c.sm, c.rc, c.rm = buf[:n], buf[n:2*n], buf[2*n:3*n], buf[3*n:4*n]
	c.xin, c.lin = buf[4*n:4*n+n*n], buf[4*n+n*n:]
	for i := 0; i < n; i++ {
		if m.SendOverhead != nil {
			c.sc[i], c.sm[i] = m.SendOverhead[i].Const, m.SendOverhead[i].PerByte
		}
		if m.RecvOverhead != nil {
			c.rc[i], c.rm[i] = m.RecvOverhead[i].Const, m.RecvOverhead[i].PerByte
		}
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			c.xin[j*n+i] = m.SecondsPerByte(i, j)
			if m.Latency != nil {
				c.lin[j*n+i] = m.Latency[i][j]
			}
		}
	}
	return c
}

// send returns S(i,l).
func (c *mcCosts) send(i int, l int64) float64 { return c.sc[i] + float64(c.sm[i]*float64(l)) }

// recv returns R(j,l).
func (c *mcCosts) recv(j int, l int64) float64 { return c.rc[j] + float64(c.rm[j]*float64(l)) }

// wire returns X(i,j)*l plus the latency from i to j (as Model.Transmit).
func (c *mcCosts) wire(i, j int, l int64) float64 {
	return float64(float64(l)*c.xin[j*c.n+i]) + c.lin[j*c.n+i]
}

// mcCand is a candidate task: sender j sends message (rank) r to a receiver.
type mcCand struct {
	ct    float64 // completion of the receive (FEF: the weight)
	start float64 // start of the receive processing
	sa    float64 // send start
	se    float64 // send end
	arr   float64 // arrival at the receiver
	rank  int32   // message rank (messages sorted by size, then index)
	j     int32   // sender; -1 for "no candidate"
	slot  int32   // the send goes before the sender's receive number slot
}

// mcPlanner is the state shared by all multicast planners.
//
// Messages are renumbered by rank: sorted by size, then by index, so that
// "the first set bit" of a bitset is the first message in the tie-breaking
// message order. For every node it keeps
//
//   - sr: the messages it still has to receive (the paper's SR_i),
//   - old and post: the messages it holds (it is in A_k). With preemption a
//     new send of a held message goes after the node's last send, and, for
//     a relay, after its receive of the message; old holds the messages
//     whose receive precedes the last send (and the node's own messages),
//     for which the last send is the only constraint, post those received
//     after it. Without preemption every held message is in old.
//   - its task list: receives in order (start, end, message, task), and for
//     the last send its end and its slot (the number of receives before it;
//     a node that has not sent has the paper's sentinel: end 0, slot 0).
//     Sends never move once placed and always go after the last send, so the
//     list is fully described by the receives and each send's slot.
type mcPlanner struct {
	c       *mcCosts
	n, m, w int
	preempt bool

	bytes []int64 // by rank
	src   []int32 // by rank
	orig  []int32 // by rank: index in Multicast.Messages

	sr, old, post []uint64 // n*w bitsets over ranks
	pending       []int32  // |sr| per node

	rbase        []int32 // first receive of node j in the flat receive arrays
	nrecv        []int32
	rStart, rEnd []float64
	rMsg, rTask  []int32
	lastEnd      []float64 // end of the last send (0: sentinel)
	slot         []int32   // receives before the last send
	tail         []float64 // end of the last task: the paper's ReceiveAvailable
	recvPos      []int32   // n*m: position of the receive of rank r at node j, -1 if none

	// SendAvailable cache, n*m. sendVer[j] counts j's sends (from 1); an
	// entry computed at saSV (0: never) with saN receives in j's list holds
	// the start saVal and slot saSlot.
	sendVer []uint32
	saVal   []float64
	saSlot  []int32
	saN     []int32
	saSV    []uint32

	tasks []Task
	tSlot []int32 // per task: the slot of its send in the sender's list
	total int     // deliveries to plan
	mean  int64   // mean size of a delivery (WR's notion of "fastest")
}

// mcMeanDelivered returns the mean size of the messages over all
// deliveries (a message counts once per destination), rounded down.
func mcMeanDelivered(mc *Multicast) int64 {
	var sum, cnt float64
	for _, msg := range mc.Messages {
		sum += float64(msg.Bytes) * float64(len(msg.Dests))
		cnt += float64(len(msg.Dests))
	}
	if cnt == 0 {
		return 0
	}
	return int64(sum / cnt)
}

// mcSpeeds fills speed[i] with WR's tie-breaking key: the receive overhead
// of node i for a message of the mean delivered size (smaller is faster).
func mcSpeeds(c *mcCosts, mean int64, speed []float64) {
	for i := range speed {
		speed[i] = c.recv(i, mean)
	}
}

func newMCPlanner(c *mcCosts, mc *Multicast, preempt bool) *mcPlanner {
	n := c.n
	p := &mcPlanner{c: c, n: n, preempt: preempt}
	var ks []int32
	for k, msg := range mc.Messages {
		if len(msg.Dests) > 0 {
			ks = append(ks, int32(k))
			p.total += len(msg.Dests)
		}
	}
	sort.SliceStable(ks, func(a, b int) bool { return mc.Messages[ks[a]].Bytes < mc.Messages[ks[b]].Bytes })
	m := len(ks)
	w := (m + 63) / 64
	p.m, p.w = m, w
	p.bytes = make([]int64, m)
	// One allocation per element type; take carves it up.
	i32 := make([]int32, 2*m+4*n+3*n*m+3*p.total)
	take := func(k int) []int32 { s := i32[:k:k]; i32 = i32[k:]; return s }
	p.src, p.orig = take(m), take(m)
	p.pending, p.rbase, p.nrecv, p.slot = take(n), take(n), take(n), take(n)
	p.recvPos, p.saSlot, p.saN = take(n*m), take(n*m), take(n*m)
	p.rMsg, p.rTask, p.tSlot = take(p.total), take(p.total), take(p.total)[:0]
	bs := make([]uint64, 3*n*w)
	p.sr, p.old, p.post = bs[:n*w], bs[n*w:2*n*w], bs[2*n*w:]
	f64 := make([]float64, 2*p.total+2*n+n*m)
	p.rStart, p.rEnd = f64[:p.total], f64[p.total:2*p.total]
	p.lastEnd, p.tail, p.saVal = f64[2*p.total:2*p.total+n], f64[2*p.total+n:2*p.total+2*n], f64[2*p.total+2*n:]
	u32 := make([]uint32, n+n*m)
	p.sendVer, p.saSV = u32[:n], u32[n:]
	for i := range p.sendVer {
		p.sendVer[i] = 1
	}
	for i := range p.recvPos {
		p.recvPos[i] = -1
	}
	for r, k := range ks {
		msg := &mc.Messages[k]
		p.bytes[r], p.src[r], p.orig[r] = msg.Bytes, int32(msg.Source), k
		p.old[msg.Source*w+r/64] |= 1 << (r % 64)
		for _, d := range msg.Dests {
			p.sr[d*w+r/64] |= 1 << (r % 64)
			p.pending[d]++
		}
	}
	var off int32
	for i := 0; i < n; i++ {
		p.rbase[i] = off
		off += p.pending[i]
	}
	p.tasks = make([]Task, 0, p.total)
	p.mean = mcMeanDelivered(mc)
	return p
}

func firstAnd(a, b []uint64) int32 {
	for x := range a {
		if v := a[x] & b[x]; v != 0 {
			return int32(x*64 + bits.TrailingZeros64(v))
		}
	}
	return -1
}

func hasBit(a []uint64, r int32) bool { return a[r/64]&(1<<(r%64)) != 0 }

// sendAvail is the paper's SendAvailable (Figure 16) for sending rank r,
// with s seconds of send overhead, from node j: it returns the earliest
// start and the slot of the new send. The target is the later, in j's list,
// of j's last send and its receive of r; the send then goes into the first
// gap before a following receive that is long enough not to delay it
// (equation 10). The test "end + s <= start of the next receive" is the
// paper's TimeSpan >= S written without a subtraction, which is exactly the
// condition under which the simulator reproduces the receive's times.
// Positions, not completion times, decide which of the two targets is
// later, so zero-cost tasks cannot reorder sends.
//
// Results are cached. Receives are only ever appended, so a result that
// stopped at a gap stays valid, and one that reached the end of the list
// resumes from there. A send by j moves its last send: that invalidates the
// results whose target was the last send, but not those whose target is a
// receive after it (the new send lies before their scan).
func (p *mcPlanner) sendAvail(j int, r int32, s float64) (float64, int32) {
	idx := j*p.m + int(r)
	q := p.recvPos[idx]
	nr := p.nrecv[j]
	base := p.rbase[j]
	var cur float64
	var next int32
	if sv := p.saSV[idx]; sv != 0 && (q >= p.slot[j] || sv == p.sendVer[j]) {
		cur, next = p.saVal[idx], p.saSlot[idx]
		if next < p.saN[idx] || next == nr {
			return cur, next
		}
	} else if q >= p.slot[j] {
		cur, next = p.rEnd[base+q], q+1
	} else {
		cur, next = p.lastEnd[j], p.slot[j]
	}
	for ; next < nr && cur+s > p.rStart[base+next]; next++ {
		cur = p.rEnd[base+next]
	}
	p.saVal[idx], p.saSlot[idx], p.saN[idx], p.saSV[idx] = cur, next, nr, p.sendVer[j]
	return cur, next
}

// start returns where and when node j would send rank r (s: its send
// overhead).
func (p *mcPlanner) start(j int, r int32, s float64) (float64, int32) {
	if p.preempt {
		return p.sendAvail(j, r, s)
	}
	return p.tail[j], p.nrecv[j]
}

// eval fills c with the task "j sends rank r to i" under the current state.
func (p *mcPlanner) eval(j, i int, r int32, c *mcCand) {
	l := p.bytes[r]
	s := p.c.send(j, l)
	sa, slot := p.start(j, r, s)
	se := sa + s
	arr := se + p.c.wire(j, i, l)
	st := arr
	if rai := p.tail[i]; rai > st {
		st = rai
	}
	*c = mcCand{ct: st + p.c.recv(i, l), start: st, sa: sa, se: se, arr: arr, rank: r, j: int32(j), slot: slot}
}

// ctOf is eval's completion time alone.
func (p *mcPlanner) ctOf(j, i int, r int32) float64 {
	l := p.bytes[r]
	s := p.c.send(j, l)
	sa, _ := p.start(j, r, s)
	st := (sa + s) + p.c.wire(j, i, l)
	if rai := p.tail[i]; rai > st {
		st = rai
	}
	return st + p.c.recv(i, l)
}

// tieWins reports whether sending rank r from j beats sending rank br from
// bj when both complete at the same time: message order, then the
// message's source before relays, then the lower relay index.
func (p *mcPlanner) tieWins(r, j, br, bj int32) bool {
	if bj < 0 {
		return true
	}
	if r != br {
		return r < br
	}
	as, bs := j == p.src[r], bj == p.src[br]
	if as != bs {
		return as
	}
	return j < bj
}

// better reports whether candidate a beats b for the same receiver.
func (p *mcPlanner) better(a, b *mcCand) bool {
	if b.j < 0 || a.ct != b.ct {
		return b.j < 0 || a.ct < b.ct
	}
	return p.tieWins(a.rank, a.j, b.rank, b.j)
}

// mcDest is what bestFor's scans need to know about receiver i: the
// messages it still needs (SR_i), when it is free to receive (its
// ReceiveAvailable), and its column of the cost model (per sender j, the
// seconds per byte and the latency from j to i; its receive overhead
// R(i,l) = rc + rm*l).
type mcDest struct {
	sr         []uint64
	avail      float64
	xrow, lrow []float64
	rc, rm     float64
}

// mcBest is the best task found so far by bestFor's scans: sender j sends
// message rank r and the receive completes at ct (j < 0: none yet).
type mcBest struct {
	ct   float64
	j, r int32
}

// bestFor returns the best task delivering one of i's pending messages:
// the minimum over k in SR_i and j in A_k of the completion time, ties as
// in tieWins.
//
// For a fixed sender, an "old" message's completion time does not
// decrease with its size (same target, larger overheads), so the first
// pending old message in rank order is the sender's best old candidate.
// With preemption, the messages a sender received after its last send are
// scanned next, in list order, with lower bounds (the send cannot start
// before that receive ends) that skip candidates which cannot beat the
// best so far, or can at most tie with it and lose the tie.
func (p *mcPlanner) bestFor(i int) mcCand {
	n, w := p.n, p.w
	sri := p.sr[i*w : i*w+w]
	first := firstAnd(sri, sri)
	if first < 0 {
		return mcCand{j: -1}
	}
	c := p.c
	d := mcDest{sr: sri, avail: p.tail[i], xrow: c.xin[i*n : i*n+n], lrow: c.lin[i*n : i*n+n], rc: c.rc[i], rm: c.rm[i]}
	b := mcBest{ct: math.Inf(1), j: -1, r: -1}
	// Node i never holds a message it still needs, so j == i is skipped by
	// the bitsets.
	if !p.preempt && w == 1 {
		p.scanOldAppendOneWord(&d, &b)
	} else {
		p.scanOld(&d, &b)
		if p.preempt {
			p.scanPost(&d, first, &b)
		}
	}
	var best mcCand
	p.eval(int(b.j), i, b.r, &best)
	return best
}

// scanOldAppendOneWord is scanOld in the common case, with everything in
// locals: no preemption (a send goes at the end of its sender's list) and
// one word of bits per node.
func (p *mcPlanner) scanOldAppendOneWord(d *mcDest, b *mcBest) {
	c, n := p.c, p.n
	rai, xrow, lrow, rci, rmi := d.avail, d.xrow, d.lrow, d.rc, d.rm
	bct, bj, br := b.ct, b.j, b.r
	old, tail, bytes := p.old[:n], p.tail[:n], p.bytes
	sc, sm := c.sc[:n], c.sm[:n]
	s0 := d.sr[0]
	for j := range old {
		v := s0 & old[j]
		if v == 0 {
			continue
		}
		r := int32(bits.TrailingZeros64(v))
		fl := float64(bytes[r])
		st := (tail[j] + (sc[j] + float64(sm[j]*fl))) + (float64(fl*xrow[j]) + lrow[j])
		if st < rai {
			st = rai
		}
		if ct := st + (rci + float64(rmi*fl)); ct < bct || (ct == bct && p.tieWins(r, int32(j), br, bj)) {
			bct, bj, br = ct, int32(j), r
		}
	}
	b.ct, b.j, b.r = bct, bj, br
}

// scanOld updates b with every sender's best "old" candidate: the first
// message in rank order that the receiver needs and the sender held
// before its last send. With preemption, a lower bound (the send starts
// no earlier than the sender's last send ends) skips the senders that
// cannot win before their SendAvailable is computed.
func (p *mcPlanner) scanOld(d *mcDest, b *mcBest) {
	c, n, w := p.c, p.n, p.w
	sri, rai, xrow, lrow, rci, rmi := d.sr, d.avail, d.xrow, d.lrow, d.rc, d.rm
	bct, bj, br := b.ct, b.j, b.r
	for j := 0; j < n; j++ {
		var r int32
		if w == 1 {
			v := sri[0] & p.old[j]
			if v == 0 {
				continue
			}
			r = int32(bits.TrailingZeros64(v))
		} else if r = firstAnd(sri, p.old[j*w:j*w+w]); r < 0 {
			continue
		}
		fl := float64(p.bytes[r])
		s := c.sc[j] + float64(c.sm[j]*fl)
		t := float64(fl*xrow[j]) + lrow[j]
		rr := rci + float64(rmi*fl)
		var sa float64
		if p.preempt {
			// The send starts no earlier than the last send ends.
			lb := (p.lastEnd[j] + s) + t
			if lb < rai {
				lb = rai
			}
			if lb += rr; lb > bct || (lb == bct && !p.tieWins(r, int32(j), br, bj)) {
				continue
			}
			sa, _ = p.sendAvail(j, r, s)
		} else {
			sa = p.tail[j]
		}
		st := (sa + s) + t
		if st < rai {
			st = rai
		}
		if ct := st + rr; ct < bct || (ct == bct && p.tieWins(r, int32(j), br, bj)) {
			bct, bj, br = ct, int32(j), r
		}
	}
	b.ct, b.j, b.r = bct, bj, br
}

// scanPost updates b, with preemption, with the "post" candidates: the
// messages the receiver needs that a sender received after its last send,
// in the order of the sender's list. first is the receiver's first
// pending message in rank order (the smallest), which bounds every
// candidate's receive overhead from below. Lower bounds skip a sender's
// post candidates altogether, or end its scan, once none can beat b.
func (p *mcPlanner) scanPost(d *mcDest, first int32, b *mcBest) {
	c, n, w := p.c, p.n, p.w
	sri, rai, xrow, lrow, rci, rmi := d.sr, d.avail, d.xrow, d.lrow, d.rc, d.rm
	bct, bj, br := b.ct, b.j, b.r
	rmin := rci + float64(rmi*float64(p.bytes[first]))
	for j := 0; j < n; j++ {
		r0 := firstAnd(sri, p.post[j*w:j*w+w])
		if r0 < 0 {
			continue
		}
		base := p.rbase[j]
		// Every post candidate of j sends a message no smaller than r0
		// after j's first post receive ends: if even that cannot beat
		// the best, or only tie with it and lose, skip them all.
		{
			fl := float64(p.bytes[r0])
			lb := (p.rEnd[base+p.slot[j]] + (c.sc[j] + float64(c.sm[j]*fl))) + (float64(fl*xrow[j]) + lrow[j])
			if lb < rai {
				lb = rai
			}
			if lb += rci + float64(rmi*fl); lb > bct || (lb == bct && r0 > br) {
				continue
			}
		}
		for q, nr := p.slot[j], p.nrecv[j]; q < nr; q++ {
			end := p.rEnd[base+q]
			lb := end
			if lb < rai {
				lb = rai
			}
			if lb+rmin > bct {
				break // later receives end later, and no message is smaller
			}
			r := p.rMsg[base+q]
			if !hasBit(sri, r) {
				continue
			}
			fl := float64(p.bytes[r])
			s := c.sc[j] + float64(c.sm[j]*fl)
			t := float64(fl*xrow[j]) + lrow[j]
			rr := rci + float64(rmi*fl)
			if lb = (end + s) + t; lb < rai {
				lb = rai
			}
			if lb += rr; lb > bct || (lb == bct && !p.tieWins(r, int32(j), br, bj)) {
				continue
			}
			sa, _ := p.sendAvail(j, r, s)
			st := (sa + s) + t
			if st < rai {
				st = rai
			}
			if ct := st + rr; ct < bct || (ct == bct && p.tieWins(r, int32(j), br, bj)) {
				bct, bj, br = ct, int32(j), r
			}
		}
	}
	b.ct, b.j, b.r = bct, bj, br
}

// commit appends the task c (to receiver i) to the plan and updates the
// state: UpdateReceiverState and UpdateSenderState of Figures 13-14, or the
// plain appends of the non-preemptive planners.
func (p *mcPlanner) commit(c *mcCand, i int) {
	j, r, w := int(c.j), c.rank, p.w
	t := int32(len(p.tasks))
	p.tasks = append(p.tasks, Task{Message: int(p.orig[r]), Src: j, Dst: i, Bytes: p.bytes[r],
		SendStart: c.sa, SendEnd: c.se, Arrival: c.arr, RecvEnd: c.ct})
	p.tSlot = append(p.tSlot, c.slot)

	q := p.nrecv[i]
	at := p.rbase[i] + q
	p.rStart[at], p.rEnd[at], p.rMsg[at], p.rTask[at] = c.start, c.ct, r, t
	p.nrecv[i]++
	p.tail[i] = c.ct
	p.recvPos[i*p.m+int(r)] = q
	bit := uint64(1) << (r % 64)
	p.sr[i*w+int(r/64)] &^= bit
	p.pending[i]--
	if p.preempt {
		p.post[i*w+int(r/64)] |= bit
	} else {
		p.old[i*w+int(r/64)] |= bit
	}

	if p.preempt {
		base := p.rbase[j]
		for x := p.slot[j]; x < c.slot; x++ {
			rr := p.rMsg[base+x]
			b := uint64(1) << (rr % 64)
			p.post[j*w+int(rr/64)] &^= b
			p.old[j*w+int(rr/64)] |= b
		}
	}
	if c.slot == p.nrecv[j] {
		p.tail[j] = c.se
	}
	p.slot[j], p.lastEnd[j] = c.slot, c.se
	p.sendVer[j]++
}

// runECF is ECF (and ECFP): repeatedly commit the pending task with the
// earliest completion over all receivers (ties: lowest receiver, then as in
// tieWins).
//
// Each receiver keeps its best task, either exact or a lower bound. Every
// candidate's completion time only grows (available times only grow) and
// candidates only disappear, except for the new ones a commit j -> i*
// creates ("i* relays the message it just received"), which are compared
// with every receiver's entry at once. So after a commit, an exact entry
// whose sender or receiver was j or i* becomes a lower bound, and a lower
// bound that a new candidate beats becomes exact. A receiver is recomputed
// only when its lower bound is the smallest of all.
func (p *mcPlanner) runECF() {
	n, w := p.n, p.w
	cand := make([]mcCand, n)
	exact := make([]bool, n)
	lb := make([]float64, n) // completion lower bound of a stale entry
	for i := 0; i < n; i++ {
		if p.pending[i] > 0 {
			cand[i], exact[i] = p.bestFor(i), true
		}
	}
	// stale turns receiver i's entry into a lower bound: its old best, or
	// better, the earliest any receive can end: its available time plus
	// the receive overhead of its smallest pending message.
	stale := func(i int) {
		exact[i] = false
		sri := p.sr[i*w : i*w+w]
		lb[i] = cand[i].ct
		if r := firstAnd(sri, sri); r >= 0 {
			if v := p.tail[i] + p.c.recv(i, p.bytes[r]); v > lb[i] {
				lb[i] = v
			}
		}
	}
	var c mcCand
	for len(p.tasks) < p.total {
		gi := -1
		for {
			gi = -1
			best := 0.0
			for i := 0; i < n; i++ {
				if p.pending[i] == 0 {
					continue
				}
				v := cand[i].ct
				if !exact[i] {
					v = lb[i]
				}
				if gi < 0 || v < best {
					gi, best = i, v
				}
			}
			if exact[gi] {
				break
			}
			cand[gi], exact[gi] = p.bestFor(gi), true
		}
		sel := cand[gi]
		p.commit(&sel, gi)
		js, is, rs := sel.j, int32(gi), sel.rank
		for i := 0; i < n; i++ {
			if p.pending[i] == 0 {
				continue
			}
			if i == int(is) || i == int(js) || (exact[i] && (cand[i].j == js || cand[i].j == is)) {
				stale(i)
			}
			if hasBit(p.sr[i*w:i*w+w], rs) {
				if ct := p.ctOf(gi, i, rs); ct < cand[i].ct || (ct == cand[i].ct && p.tieWins(rs, is, cand[i].rank, cand[i].j)) {
					p.eval(gi, i, rs, &c)
					cand[i], exact[i] = c, true
				}
			}
		}
	}
}

// runFEF is Fastest-Edge-First: repeatedly commit the pending task of
// least weight S(j,l)+X(j,i)*l+R(i,l) (ties: lowest receiver, lowest
// sender, message order), appending it to both task lists. Weights are
// static, so a receiver's best edge changes only when it receives (its
// pending set shrinks) or when a node joins the senders of a message the
// receiver still needs.
func (p *mcPlanner) runFEF() {
	n, w := p.n, p.w
	c := p.c
	best := make([]mcCand, n)
	dirty := make([]bool, n)
	for i := range dirty {
		dirty[i] = true
	}
	weight := func(j, i int, r int32) float64 {
		fl := float64(p.bytes[r])
		return ((c.sc[j] + float64(c.sm[j]*fl)) + (float64(fl*c.xin[i*n+j]) + c.lin[i*n+j])) + (c.rc[i] + float64(c.rm[i]*fl))
	}
	var e mcCand
	for len(p.tasks) < p.total {
		gi := -1
		for i := 0; i < n; i++ {
			if p.pending[i] == 0 {
				continue
			}
			if dirty[i] {
				sri := p.sr[i*w : i*w+w]
				b := mcCand{ct: math.Inf(1), j: -1}
				for j := 0; j < n; j++ {
					if r := firstAnd(sri, p.old[j*w:j*w+w]); r >= 0 {
						if wt := weight(j, i, r); wt < b.ct {
							b = mcCand{ct: wt, j: int32(j), rank: r}
						}
					}
				}
				best[i], dirty[i] = b, false
			}
			if gi < 0 || best[i].ct < best[gi].ct {
				gi = i
			}
		}
		sel := best[gi]
		p.eval(int(sel.j), gi, sel.rank, &e)
		p.commit(&e, gi)
		dirty[gi] = true
		for i := 0; i < n; i++ {
			if p.pending[i] == 0 || dirty[i] || !hasBit(p.sr[i*w:i*w+w], sel.rank) {
				continue
			}
			// Ties: the lower sender, then the lower rank.
			b := &best[i]
			if wt := weight(gi, i, sel.rank); wt < b.ct || (wt == b.ct && (int32(gi) < b.j || (int32(gi) == b.j && sel.rank < b.rank))) {
				*b = mcCand{ct: wt, j: int32(gi), rank: sel.rank}
			}
		}
	}
}

// runReceiverFirst is WR, EAF, RR and RRS (and their preemptive versions):
// choose the receiver first, then its best task (bestFor).
func (p *mcPlanner) runReceiverFirst(base Algorithm, seed int64) {
	n := p.n
	var vw, vt, speed []float64
	if base == WR {
		// W_i (equation 8), the virtual time at which node i received each
		// message (W_{s,n} of equation 9), and the speed for breaking ties.
		vw, vt, speed = make([]float64, n), make([]float64, n*p.m), make([]float64, n)
		mcSpeeds(p.c, p.mean, speed)
	}
	var rng *rand.Rand
	if base == RRS {
		rng = rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	}
	next := 0 // RR: the node whose turn it is
	for len(p.tasks) < p.total {
		i := -1
		switch base {
		case WR:
			for x := 0; x < n; x++ {
				if p.pending[x] > 0 && (i < 0 || vw[x] < vw[i] || (vw[x] == vw[i] && speed[x] < speed[i])) {
					i = x
				}
			}
		case EAF:
			for x := 0; x < n; x++ {
				if p.pending[x] > 0 && (i < 0 || p.tail[x] < p.tail[i]) {
					i = x
				}
			}
		case RR:
			for x := 0; x < n; x++ {
				if y := (next + x) % n; p.pending[y] > 0 {
					i = y
					break
				}
			}
			next = (i + 1) % n
		case RRS:
			cnt := 0
			for x := 0; x < n; x++ {
				if p.pending[x] > 0 {
					cnt++
				}
			}
			pick := rng.IntN(cnt)
			for x := 0; x < n; x++ {
				if p.pending[x] > 0 {
					if pick == 0 {
						i = x
						break
					}
					pick--
				}
			}
		}
		c := p.bestFor(i)
		p.commit(&c, i)
		if base == WR {
			j, r := int(c.j), int(c.rank)
			l := p.bytes[r]
			ar := 0.0
			if c.j != p.src[r] {
				ar = vt[j*p.m+r]
			}
			ar = (ar + p.c.send(j, l)) + p.c.wire(j, i, l)
			if vw[i] > ar {
				ar = vw[i]
			}
			vw[i] = ar + p.c.recv(i, l)
			vt[i*p.m+r] = vw[i]
		}
	}
}

// finish numbers every node's unified task list (SendSeq, RecvSeq) and
// returns the plan.
func (p *mcPlanner) finish(algo Algorithm) *Plan {
	n := p.n
	// Sends grouped by sender, in commit order (which is list order: each
	// new send goes after the previous one).
	cnt := make([]int32, 2*n+1+len(p.tasks))
	fill, sends := cnt[n+1:2*n+1], cnt[2*n+1:]
	for _, t := range p.tasks {
		cnt[t.Src+1]++
	}
	for i := 0; i < n; i++ {
		cnt[i+1] += cnt[i]
	}
	copy(fill, cnt[:n])
	for t := range p.tasks {
		s := p.tasks[t].Src
		sends[fill[s]] = int32(t)
		fill[s]++
	}
	pred := 0.0
	for j := 0; j < n; j++ {
		pos := 0
		si, se := cnt[j], cnt[j+1]
		base := p.rbase[j]
		for q := int32(0); q <= p.nrecv[j]; q++ {
			for ; si < se && p.tSlot[sends[si]] == q; si++ {
				p.tasks[sends[si]].SendSeq = pos
				pos++
			}
			if q < p.nrecv[j] {
				t := &p.tasks[p.rTask[base+q]]
				t.RecvSeq = pos
				pos++
				if t.RecvEnd > pred {
					pred = t.RecvEnd
				}
			}
		}
	}
	return &Plan{Kind: KindMulticast, Algorithm: algo, Ranks: n, Predicted: pred, Tasks: p.tasks}
}

// mcSchedule runs one planner (not Auto) on a validated problem.
func mcSchedule(c *mcCosts, mc *Multicast, algo Algorithm, seed int64) *Plan {
	base, preempt := algo, false
	switch algo {
	case ECFP:
		base, preempt = ECF, true
	case WRP:
		base, preempt = WR, true
	case EAFP:
		base, preempt = EAF, true
	case RRP:
		base, preempt = RR, true
	case RRSP:
		base, preempt = RRS, true
	}
	p := newMCPlanner(c, mc, preempt)
	switch base {
	case FEF:
		p.runFEF()
	case ECF:
		p.runECF()
	default:
		p.runReceiverFirst(base, seed)
	}
	return p.finish(algo)
}
