package collective

import (
	"fmt"
	"math"
	"sort"
)

// The planners below return per-rank orders: send[i] lists i's
// destinations in the order i sends to them, recv[j] lists j's sources in
// the order j receives from them. [exchangeInstance.buildPlan] turns them
// into a plan and computes every time with the same simulator as
// [SimulateExchange], so Predicted always equals what the simulator says.
//
// The step-based planners (caterpillar, matchings, greedy) compose steps in
// which no rank sends or receives twice; a rank's send and receive orders
// are the order of the steps it takes part in. Steps are not barriers.

func (in *exchangeInstance) newOrders() (send, recv [][]int) {
	return make([][]int, in.n), make([][]int, in.n)
}

// caterpillar is the baseline: in step s (0 <= s < P) rank i sends to
// (i+s) mod P. Step 0 is the diagonal (a local copy) and pairs with zero
// bytes are skipped, so rank j receives from j-1, j-2, ... (mod P).
func (in *exchangeInstance) caterpillar() (send, recv [][]int) {
	n := in.n
	send, recv = in.newOrders()
	for s := 1; s < n; s++ {
		for i := 0; i < n; i++ {
			if j := (i + s) % n; in.isMsg(i, j) {
				send[i] = append(send[i], j)
				recv[j] = append(recv[j], i)
			}
		}
	}
	return send, recv
}

// matchings is the paper's series of maximum-weight (maximise) or
// minimum-weight complete matchings of the bipartite graph senders x
// receivers, the weight of edge (i, j) being the time of the message i->j.
// Every pair is an edge: the diagonal and pairs with zero bytes weigh 0
// and carry no message. Each matching is one step; its edges are then
// deleted (made +Inf in the minimising solver, which is exact: no finite
// sentinel). After k steps the remaining graph is (P-k)-regular, so a
// complete matching always exists. The series stops as soon as every
// message is placed (later matchings would only hold empty edges).
func (in *exchangeInstance) matchings(maximise bool) (send, recv [][]int, err error) {
	n := in.n
	send, recv = in.newOrders()
	c := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if maximise {
				c[i*n+j] = -in.cost[i][j]
			} else {
				c[i*n+j] = in.cost[i][j]
			}
		}
	}
	left := in.events
	var s assigner
	inf := math.Inf(1)
	for step := 0; step < n && left > 0; step++ {
		perm, err := s.solve(n, c)
		if err != nil {
			return nil, nil, fmt.Errorf("collective: internal error: matching %d: %w", step, err)
		}
		for i, j := range perm {
			c[i*n+j] = inf
			if in.isMsg(i, j) {
				send[i] = append(send[i], j)
				recv[j] = append(recv[j], i)
				left--
			}
		}
	}
	if left != 0 {
		return nil, nil, fmt.Errorf("collective: internal error: %d messages left after %d matchings", left, n)
	}
	return send, recv, nil
}

// greedy is the paper's greedy technique (section 4.4). Each rank's
// messages are ranked by decreasing time; equal times go by the smallest
// cyclic distance (j - i) mod P, the caterpillar's order, so that on a
// homogeneous system the steps are the caterpillar's contention-free ones.
// Steps are composed by traversing the ranks; each rank picks the first
// destination in its list that it has not sent to yet and that no earlier
// rank picked in this step, or idles in this step if there is none.
//
// The traversal is the cyclic rank order r, r+1, ..., r-1 (mod P) from a
// first rank r; the paper's fairness rule fixes only r, and the rest of
// the order stays cyclic:
//   - the first step starts at rank 0;
//   - if some ranks idled in a step, the next step starts at the first of
//     them in the traversal ("a processor which was idle in any step will
//     be the first to pick the destination processor in the next step";
//     the text names one processor, so with several idle ranks the others
//     keep their cyclic places);
//   - if none idled, the next step starts at the last rank that picked a
//     destination in this one ("the last processor in any step will be the
//     first in the next step");
//   - a rank that has sent everything is skipped; it neither idles nor
//     picks.
//
// Every step places at least one message (the first rank with messages
// left finds every destination free), so there are at most as many steps
// as messages; usually about P.
func (in *exchangeInstance) greedy() (send, recv [][]int) {
	n := in.n
	send, recv = in.newOrders()
	lists := make([][]int, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if in.isMsg(i, j) {
				lists[i] = append(lists[i], j)
			}
		}
		ci, li := in.cost[i], lists[i]
		sort.SliceStable(li, func(a, b int) bool {
			ca, cb := ci[li[a]], ci[li[b]]
			return ca > cb || (ca == cb && (li[a]-i+n)%n < (li[b]-i+n)%n)
		})
	}
	taken := make([]int, n) // taken[j] == step+1: j already receives in this step
	first := 0
	for step, left := 0, in.events; left > 0; step++ {
		firstIdle, lastPick := -1, -1
		for d := 0; d < n; d++ {
			i := first + d
			if i >= n {
				i -= n
			}
			l := lists[i]
			if len(l) == 0 {
				continue
			}
			k := 0
			for k < len(l) && taken[l[k]] == step+1 {
				k++
			}
			if k == len(l) {
				if firstIdle < 0 {
					firstIdle = i
				}
				continue
			}
			j := l[k]
			taken[j] = step + 1
			send[i] = append(send[i], j)
			recv[j] = append(recv[j], i)
			lists[i] = append(l[:k], l[k+1:]...)
			lastPick = i
			left--
		}
		if firstIdle >= 0 {
			first = firstIdle
		} else {
			first = lastPick
		}
	}
	return send, recv
}

// openShop is the heuristic of section 4.5, after the open-shop scheduling
// heuristics: every rank is a sender and a receiver; senders are taken in
// order of availability (sendavail), and a sender picks, among the
// receivers it still has to serve, the one available earliest
// (recvavail); the message starts at max(sendavail[i], recvavail[j]) and
// both become available at its end.
//
// "The earliest available receiver" is read from the sender's side: a
// receiver that is already idle when the sender becomes available can
// start the message at sendavail[i], as early as any other idle one, so
// every idle receiver ties. The paper leaves ties open ("an arbitrary
// order"); here they go to the work left:
//   - senders available at the same time go by the most send time left,
//     then by rank;
//   - receivers that can start at the same time go by the most receive
//     time left, then by the smallest cyclic distance (j - i) mod P, the
//     caterpillar's order, so that on a homogeneous system the heuristic
//     still produces the caterpillar's contention-free steps.
//
// Serving the longest remaining work first keeps the rank that bounds
// t_lb busy. Taking, as the literal reading does, the receiver idle the
// longest (the smallest recvavail) left the open shop 1.14 above t_lb on
// 1,000 random instances of the paper's scenarios (13 to 50 ranks,
// GUSTO-like links, 1 KiB, 1 MiB, mixed and server messages); this
// reading's worst there is 1.10 (TestExchangeOpenShopQuality).
//
// Senders sit in a tournament tree keyed by (sendavail, send time left,
// rank), receivers in two orders (see [openShopPicker] for how a sender
// finds its receiver there). A message costs O(log P) plus that search:
// a few tens of steps at 1,024 ranks with five NIC classes, where the
// scan of every remaining receiver made the heuristic O(P^3). The orders
// are exactly the plain heuristic's, ties included
// (TestExchangeOpenShopEqualsReference).
//
// The heuristic's own times are the simulator's for its orders: a message
// starts at max(sendavail, recvavail), the ends of its predecessors in
// its sender's and its receiver's order, and lasts its cost, which is
// what [simulateOrders] computes with the same two floating-point
// operations. So the plan is written as the heuristic goes, every
// transfer straight into its place (by sender, then the sender's order),
// with no simulation afterwards (TestExchangeOpenShopPlanIsSimulated).
// openShopChunk is how many messages the open shop plans between two
// hand-overs of its log to the goroutine that writes the plan.
const openShopChunk = 1 << 12

func (in *exchangeInstance) openShopPlan() *Plan {
	n := in.n
	ps := newOpenShopPicker(n)
	sendAvail := make([]float64, n)
	sendLeft := make([]float64, n) // send time i has left
	left := make([]int, n)         // messages i still has to send
	for i := 0; i < n; i++ {
		row := ps.row(i)
		for j := 0; j < n; j++ {
			if in.isMsg(i, j) {
				row[j>>6] |= 1 << (j & 63)
				left[i]++
				sendLeft[i] += in.cost[i][j]
				ps.recvLeft[j] += in.cost[i][j]
			}
		}
	}
	// The messages in the order they are planned, each with its start
	// and end: another goroutine writes the plan from this log. Writing
	// each transfer to its place as it is planned (and reading its size)
	// would add two cache misses at large P to every step of the
	// heuristic, where each step waits for the last; the pass over the
	// log has no such chain.
	type event struct {
		i, j       int32
		start, end float64
	}
	// Every sender's transfers together, in its order: sender i's are
	// ts[first[i]:first[i+1]], next[i] is where its next one goes, and
	// recvSeq[j] counts j's receives so far. The writer takes the log as
	// it grows, a chunk at a time, and hands each chunk back for reuse
	// once written (the log of 1,024 ranks would take 24 MB). When a
	// sender's last transfer is written it fills in their sizes, one row
	// of sizes at a time: read in the log's order, each size was a cache
	// miss (and a TLB miss: the sizes of 1,024 ranks span 8 MB).
	first, next := make([]int, n+1), make([]int, n)
	for i := 0; i < n; i++ {
		next[i] = first[i]
		first[i+1] = first[i] + left[i]
	}
	// The plan's transfers are allocated by the writer, off the
	// heuristic's path (56 MB at 1,024 ranks, zeroed page by page).
	var ts []Transfer
	chunks := make(chan []event, in.events/openShopChunk+2)
	free := make(chan []event, 8)
	written := make(chan float64)
	go func() {
		ts = make([]Transfer, in.events)
		recvSeq := make([]int, n)
		mk := 0.0
		for ch := range chunks {
			for _, e := range ch {
				i, j := int(e.i), int(e.j)
				k := next[i]
				next[i]++
				ts[k] = Transfer{Src: i, Dst: j, Start: e.start, End: e.end, SendSeq: k - first[i], RecvSeq: recvSeq[j]}
				recvSeq[j]++
				mk = max(mk, e.end)
				if k+1 == first[i+1] {
					bytes, mine := in.bytes[i], ts[first[i]:k+1]
					for m := range mine {
						mine[m].Bytes = bytes[mine[m].Dst]
					}
				}
			}
			select {
			case free <- ch[:0]:
			default:
			}
		}
		written <- mk
	}()
	log := make([]event, 0, openShopChunk)
	h := newSenderTree(n, sendLeft, func(r int) bool { return left[r] > 0 })
	for range in.events {
		i := int(h.win) // the first sender: while messages are left, one that has some
		p := ps.pick(i, left[i], sendAvail[i])
		j, a := p.j, p.a
		c := in.flat[i*n+j] // a cache miss at large P
		start := sendAvail[i]
		if a > start {
			start = a
		}
		end := start + c
		sendAvail[i] = end
		h.work[i] -= c
		ps.take(j, p.pos, c, end)
		log = append(log, event{int32(i), int32(j), start, end})
		if len(log) == openShopChunk {
			// A written chunk if there is one, else a new one: the
			// heuristic never waits for the writer.
			chunks <- log
			select {
			case log = <-free:
			default:
				log = make([]event, 0, openShopChunk)
			}
		}
		row := ps.row(i)
		row[j>>6] &^= 1 << (j & 63)
		left[i]--
		h.update(end, left[i] == 0)
	}
	chunks <- log
	close(chunks)
	mk := <-written
	return &Plan{Kind: KindAlltoall, Algorithm: OpenShop, Ranks: n, Transfers: ts, Predicted: mk, LowerBound: in.lowerBound}
}
