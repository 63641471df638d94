package collective

import (
	"math"
	"math/rand/v2"
)

// This file is a brute-force reference of the multicast planners: a literal
// reading of the paper with explicit task lists (UpdateSenderState inserts
// into a node's list, SendAvailable walks it) and an exhaustive search over
// every candidate (k, i, j) at every step. It shares only the cost helpers
// (mcCosts) and WR's speed key with the real planners, and is used to check
// that their incremental bookkeeping (bitsets, caches, pruning) changes
// nothing: on every instance both must produce identical plans.

type mcRefEntry struct {
	send  bool
	task  int
	msg   int
	start float64 // receives: start of the receive processing
	ct    float64 // completion time
}

type mcRef struct {
	c        *mcCosts
	mc       *Multicast
	n        int
	preempt  bool
	lists    [][]mcRefEntry
	lastSend []int    // index of the last send in the node's list, -1 if none
	holds    [][]bool // holds[k][v]: v is in A_k
	joined   [][]int  // joined[k][v]: the step at which v joined A_k (-1: the source)
	need     [][]bool // need[k][v]: v still has to receive m_k (v in B_k)
	tasks    []Task

	// tie, when set, replaces the tie-breaking of the timed planners
	// (candidates of equal completion time); fefTie that of FEF (equal
	// weights). The example test uses them to show that other plausible
	// rules do not reproduce the paper's figures.
	tie    func(r *mcRef, a, b *mcRefCand, withReceiver bool) bool
	fefTie func(r *mcRef, a, b *mcRefCand) bool
}

func newMCRef(m *Model, mc *Multicast, preempt bool) *mcRef {
	n := m.Size()
	r := &mcRef{c: newMCCosts(m), mc: mc, n: n, preempt: preempt, lists: make([][]mcRefEntry, n), lastSend: make([]int, n)}
	for v := range r.lastSend {
		r.lastSend[v] = -1
	}
	for _, msg := range mc.Messages {
		h, d, jn := make([]bool, n), make([]bool, n), make([]int, n)
		h[msg.Source] = true
		jn[msg.Source] = -1
		for _, x := range msg.Dests {
			d[x] = true
		}
		r.holds, r.need, r.joined = append(r.holds, h), append(r.need, d), append(r.joined, jn)
	}
	r.tasks = []Task{}
	return r
}

// ra is ReceiveAvailable: the completion time of the node's last task.
func (r *mcRef) ra(v int) float64 {
	if l := r.lists[v]; len(l) > 0 {
		return l[len(l)-1].ct
	}
	return 0
}

// sendAvail is SendAvailable (Figure 16); it returns the start time and the
// index in the list where the send goes. Without preemption a send goes at
// the end of the list.
func (r *mcRef) sendAvail(j, k int) (float64, int) {
	list := r.lists[j]
	if !r.preempt {
		return r.ra(j), len(list)
	}
	s := r.c.send(j, r.mc.Messages[k].Bytes)
	target := r.lastSend[j]
	if r.mc.Messages[k].Source != j {
		for x, e := range list {
			if !e.send && e.msg == k && x > target {
				target = x
			}
		}
	}
	cur := 0.0
	if target >= 0 {
		cur = list[target].ct
	}
	next := target + 1
	for next < len(list) {
		e := list[next]
		if e.send {
			panic("reference: a send follows the target task")
		}
		if cur+s <= e.start {
			break
		}
		cur = e.ct
		next++
	}
	return cur, next
}

type mcRefCand struct {
	j, i, k     int
	ct          float64 // completion (FEF: weight)
	sa, se, arr float64
	start       float64
	at          int // insertion index in the sender's list
}

func (r *mcRef) eval(j, i, k int) mcRefCand {
	l := r.mc.Messages[k].Bytes
	sa, at := r.sendAvail(j, k)
	se := sa + r.c.send(j, l)
	arr := se + r.c.wire(j, i, l)
	st := arr
	if a := r.ra(i); a > st {
		st = a
	}
	return mcRefCand{j: j, i: i, k: k, ct: st + r.c.recv(i, l), sa: sa, se: se, arr: arr, start: st, at: at}
}

// msgLess is the message order: size, then index.
func (r *mcRef) msgLess(a, b int) bool {
	la, lb := r.mc.Messages[a].Bytes, r.mc.Messages[b].Bytes
	if la != lb {
		return la < lb
	}
	return a < b
}

// senderLess is the sender order for message k: source first, then index.
func (r *mcRef) senderLess(k, a, b int) bool {
	src := r.mc.Messages[k].Source
	if (a == src) != (b == src) {
		return a == src
	}
	return a < b
}

// timedLess orders candidates of the timed planners; withReceiver adds
// "lowest receiver" after the completion time (ECF).
func (r *mcRef) timedLess(a, b *mcRefCand, withReceiver bool) bool {
	if a.ct != b.ct {
		return a.ct < b.ct
	}
	if r.tie != nil {
		return r.tie(r, a, b, withReceiver)
	}
	if withReceiver && a.i != b.i {
		return a.i < b.i
	}
	if a.k != b.k {
		return r.msgLess(a.k, b.k)
	}
	return r.senderLess(a.k, a.j, b.j)
}

func (r *mcRef) commit(c mcRefCand) {
	t := len(r.tasks)
	l := r.mc.Messages[c.k].Bytes
	r.tasks = append(r.tasks, Task{Message: c.k, Src: c.j, Dst: c.i, Bytes: l, SendStart: c.sa, SendEnd: c.se, Arrival: c.arr, RecvEnd: c.ct})
	// UpdateReceiverState: append.
	r.lists[c.i] = append(r.lists[c.i], mcRefEntry{task: t, msg: c.k, start: c.start, ct: c.ct})
	// UpdateSenderState: insert at the found position.
	list := r.lists[c.j]
	list = append(list, mcRefEntry{})
	copy(list[c.at+1:], list[c.at:])
	list[c.at] = mcRefEntry{send: true, task: t, msg: c.k, ct: c.se}
	r.lists[c.j] = list
	r.lastSend[c.j] = c.at
	r.holds[c.k][c.i] = true
	r.joined[c.k][c.i] = t
	r.need[c.k][c.i] = false
}

func (r *mcRef) pending(i int) bool {
	for k := range r.need {
		if r.need[k][i] {
			return true
		}
	}
	return false
}

// bestFor is the exhaustive "choose P_k in SR_i and P_j in A_k with the
// earliest completion".
func (r *mcRef) bestFor(i int) (mcRefCand, bool) {
	var best mcRefCand
	found := false
	for k := range r.need {
		if !r.need[k][i] {
			continue
		}
		for j := 0; j < r.n; j++ {
			if !r.holds[k][j] {
				continue
			}
			c := r.eval(j, i, k)
			if !found || r.timedLess(&c, &best, false) {
				best, found = c, true
			}
		}
	}
	return best, found
}

func (r *mcRef) run(algo Algorithm, seed int64) *Plan {
	base := algo
	switch algo {
	case ECFP:
		base = ECF
	case WRP:
		base = WR
	case EAFP:
		base = EAF
	case RRP:
		base = RR
	case RRSP:
		base = RRS
	}
	n := r.n
	w := make([]float64, n)              // WR: W_i
	vt := make([][]float64, len(r.need)) // WR: W at which node v received m_k
	for k := range vt {
		vt[k] = make([]float64, n)
	}
	speed := make([]float64, n)
	mcSpeeds(r.c, mcMeanDelivered(r.mc), speed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	next := 0
	for {
		var sel mcRefCand
		found := false
		switch base {
		case FEF:
			for k := range r.need {
				l := r.mc.Messages[k].Bytes
				for i := 0; i < n; i++ {
					if !r.need[k][i] {
						continue
					}
					for j := 0; j < n; j++ {
						if !r.holds[k][j] {
							continue
						}
						c := mcRefCand{j: j, i: i, k: k, ct: (r.c.send(j, l) + r.c.wire(j, i, l)) + r.c.recv(i, l)}
						var less bool
						switch {
						case !found || c.ct < sel.ct:
							less = true
						case c.ct > sel.ct:
						case r.fefTie != nil:
							less = r.fefTie(r, &c, &sel)
						default:
							less = c.i < sel.i || (c.i == sel.i && (c.j < sel.j || (c.j == sel.j && r.msgLess(c.k, sel.k))))
						}
						if less {
							sel, found = c, true
						}
					}
				}
			}
			if found {
				sel = r.eval(sel.j, sel.i, sel.k)
			}
		case ECF:
			for k := range r.need {
				for i := 0; i < n; i++ {
					if !r.need[k][i] {
						continue
					}
					for j := 0; j < n; j++ {
						if !r.holds[k][j] {
							continue
						}
						c := r.eval(j, i, k)
						if !found || r.timedLess(&c, &sel, true) {
							sel, found = c, true
						}
					}
				}
			}
		default:
			i := -1
			var cands []int
			for x := 0; x < n; x++ {
				if r.pending(x) {
					cands = append(cands, x)
				}
			}
			if len(cands) == 0 {
				break
			}
			switch base {
			case WR:
				for _, x := range cands {
					if i < 0 || w[x] < w[i] || (w[x] == w[i] && speed[x] < speed[i]) {
						i = x
					}
				}
			case EAF:
				for _, x := range cands {
					if i < 0 || r.ra(x) < r.ra(i) {
						i = x
					}
				}
			case RR:
				for x := 0; x < n; x++ {
					if y := (next + x) % n; r.pending(y) {
						i = y
						break
					}
				}
				next = (i + 1) % n
			case RRS:
				i = cands[rng.IntN(len(cands))]
			}
			sel, found = r.bestFor(i)
			if found && base == WR {
				l := r.mc.Messages[sel.k].Bytes
				ar := 0.0
				if sel.j != r.mc.Messages[sel.k].Source {
					ar = vt[sel.k][sel.j]
				}
				ar = (ar + r.c.send(sel.j, l)) + r.c.wire(sel.j, i, l)
				if w[i] > ar {
					ar = w[i]
				}
				w[i] = ar + r.c.recv(i, l)
				vt[sel.k][i] = w[i]
			}
		}
		if !found {
			break
		}
		r.commit(sel)
	}
	pred := 0.0
	for v, list := range r.lists {
		for x, e := range list {
			t := &r.tasks[e.task]
			if e.send {
				t.SendSeq = x
			} else {
				t.RecvSeq = x
				if t.RecvEnd > pred {
					pred = t.RecvEnd
				}
			}
			_ = v
		}
	}
	return &Plan{Kind: KindMulticast, Algorithm: algo, Ranks: n, Predicted: pred, Tasks: r.tasks}
}

func mcPreemptive(algo Algorithm) bool {
	return algo == ECFP || algo == WRP || algo == EAFP || algo == RRP || algo == RRSP
}

// mcReferencePlan plans with the brute-force reference (no lower bound).
func mcReferencePlan(m *Model, mc *Multicast, algo Algorithm, seed int64) *Plan {
	return newMCRef(m, mc, mcPreemptive(algo)).run(algo, seed)
}

// mcReferenceLowerBound is section 3.2 by brute force: earliest reach
// times by Bellman-Ford relaxation to a fixpoint (relays restricted to the
// message's source and destinations), then, at every node, the best of all
// orders of its receives (equation 4 generalised: start = max(previous
// end, arrival)). Small inputs only (it tries every permutation).
func mcReferenceLowerBound(m *Model, mc *Multicast) float64 {
	c := newMCCosts(m)
	n := c.n
	type rcv struct{ arr, r float64 }
	per := make([][]rcv, n)
	for _, msg := range mc.Messages {
		if len(msg.Dests) == 0 {
			continue
		}
		l := msg.Bytes
		end := make([]float64, n)
		arr := make([]float64, n)
		in := make([]bool, n)
		for v := range end {
			end[v], arr[v] = math.Inf(1), math.Inf(1)
		}
		in[msg.Source] = true
		for _, d := range msg.Dests {
			in[d] = true
		}
		end[msg.Source] = 0
		for changed := true; changed; {
			changed = false
			for u := 0; u < n; u++ {
				if !in[u] || math.IsInf(end[u], 1) {
					continue
				}
				for _, v := range msg.Dests {
					if v == u {
						continue
					}
					a := (end[u] + c.send(u, l)) + c.wire(u, v, l)
					if e := a + c.recv(v, l); e < end[v] {
						end[v], arr[v], changed = e, a, true
					}
				}
			}
		}
		for _, d := range msg.Dests {
			per[d] = append(per[d], rcv{arr[d], c.recv(d, l)})
		}
	}
	lb := 0.0
	for _, rs := range per {
		best := math.Inf(1)
		var perm func(k int)
		perm = func(k int) {
			if k == len(rs) {
				t := 0.0
				for _, r := range rs {
					t = math.Max(t, r.arr) + r.r
				}
				best = math.Min(best, t)
				return
			}
			for x := k; x < len(rs); x++ {
				rs[k], rs[x] = rs[x], rs[k]
				perm(k + 1)
				rs[k], rs[x] = rs[x], rs[k]
			}
		}
		if len(rs) > 0 {
			perm(0)
			lb = math.Max(lb, best)
		}
	}
	return lb
}
