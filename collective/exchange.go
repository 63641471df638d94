package collective

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Total exchange (all-to-all personalised communication) after Bhat,
// Prasanna and Raghavendra, "Adaptive communication algorithms for
// distributed heterogeneous systems".
//
// Conventions shared by every planner, the simulator and the validator:
//
//   - Bytes[i][j] is what rank i sends to rank j (row = sender). The paper
//     writes its matrix C the other way round (C[i][j] is the time from P_j
//     to P_i); nothing here uses the paper's orientation.
//   - The diagonal is a local copy: it is never planned and costs nothing.
//   - A pair with zero bytes sends no message at all: it has no transfer,
//     no start-up cost and no place in any order. (The model's Cost would
//     charge the latency T_ij even for zero bytes; skipping the message is
//     what the runtime does, so the plans do the same.)
//   - Every rank has one send port and one receive port. A plan fixes, for
//     every rank, the order of its sends (SendSeq) and of its receives
//     (RecvSeq); a transfer starts as soon as it is next in both orders and
//     both ports are free, and lasts Model.Cost(src, dst, bytes). There is
//     no barrier between the "steps" of the step-based planners.
//   - t_lb, the lower bound, is the largest total send time or total
//     receive time of any rank.

// PlanExchange plans a total exchange of pattern x under model m with the
// named planner: [Caterpillar], [MaxMatch], [MinMatch], [Greedy],
// [OpenShop], or [Auto] (every planner that is cheap enough for the size,
// keeping the lowest predicted completion; up to 64 ranks also the open
// shop under five other receiver rules, whose plans are labelled
// openshop too).
//
// The returned plan has Kind alltoall and one [Transfer] per message
// (every i != j with Bytes[i][j] > 0), sorted by sender and then by the
// sender's order; its Start and End times are what [SimulateExchange]
// computes for its orders, Predicted is the makespan and LowerBound is
// t_lb. Plans are a pure function of the inputs (opt.Seed is unused: the
// total-exchange planners are deterministic).
func PlanExchange(m *Model, x *Exchange, algo Algorithm, opt Options) (*Plan, error) {
	if err := checkAlgo(KindAlltoall, algo); err != nil {
		return nil, err
	}
	in, err := newExchangeInstance(m, x)
	if err != nil {
		return nil, err
	}
	if algo == Auto {
		return in.planAuto()
	}
	return in.plan(algo)
}

// planAuto is Auto: every planner cheap enough for the size, and up to
// variantLimit ranks the open shop under the other receiver rules too
// (labelled openshop); the lowest predicted completion wins, the
// planners' plan on ties.
func (in *exchangeInstance) planAuto() (*Plan, error) {
	best, err := planAuto(KindAlltoall, in.n, in.plan)
	if err != nil || in.n > variantLimit {
		return best, err
	}
	for _, w := range openShopRules {
		send, recv := in.openShopRule(w)
		p, err := in.buildPlan(OpenShop, send, recv)
		if err != nil {
			return nil, err
		}
		if p.Predicted < best.Predicted {
			best = p
		}
	}
	return best, nil
}

// exchangeInstance is a validated total-exchange problem as the planners
// see it.
type exchangeInstance struct {
	n      int
	bytes  [][]int64
	cost   [][]float64 // cost[i][j] of the message i->j; 0 when there is none
	flat   []float64   // the rows of cost, one after the other: flat[i*n+j]
	events int         // number of messages
	// lowerBound is t_lb, summed as [exchangeLowerBound] sums it (in
	// order of the peer's rank, the pairs without a message adding 0), so
	// that it is the same to the last bit.
	lowerBound float64
}

func newExchangeInstance(m *Model, x *Exchange) (*exchangeInstance, error) {
	if m == nil {
		return nil, fmt.Errorf("collective: nil model")
	}
	if x == nil {
		return nil, fmt.Errorf("collective: nil exchange pattern")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	n := m.Size()
	if x.Size() != n {
		return nil, fmt.Errorf("collective: the model describes %d ranks but the exchange pattern has %d", n, x.Size())
	}
	if err := x.Validate(n); err != nil {
		return nil, err
	}
	in := &exchangeInstance{n: n, bytes: x.Bytes, cost: make([][]float64, n), flat: make([]float64, n*n)}
	for i := 0; i < n; i++ {
		in.cost[i] = in.flat[i*n : (i+1)*n : (i+1)*n]
		for j := 0; j < n; j++ {
			if !in.isMsg(i, j) {
				continue
			}
			c := m.Cost(i, j, x.Bytes[i][j])
			if math.IsInf(c, 0) || math.IsNaN(c) {
				return nil, fmt.Errorf("collective: the message %d->%d of %d bytes has no finite cost under the model (%v)", i, j, x.Bytes[i][j], c)
			}
			in.cost[i][j] = c
			in.events++
		}
	}
	rcv := make([]float64, n)
	for i := 0; i < n; i++ {
		snd := 0.0
		for j, c := range in.cost[i] {
			snd += c
			rcv[j] += c
		}
		in.lowerBound = math.Max(in.lowerBound, snd)
	}
	for _, r := range rcv {
		in.lowerBound = math.Max(in.lowerBound, r)
	}
	return in, nil
}

// isMsg reports whether i sends a message to j.
func (in *exchangeInstance) isMsg(i, j int) bool { return i != j && in.bytes[i][j] > 0 }

// plan runs one planner (not Auto).
func (in *exchangeInstance) plan(algo Algorithm) (*Plan, error) {
	var send, recv [][]int
	switch algo {
	case Caterpillar:
		send, recv = in.caterpillar()
	case MaxMatch, MinMatch:
		var err error
		if send, recv, err = in.matchings(algo == MaxMatch); err != nil {
			return nil, err
		}
	case Greedy:
		send, recv = in.greedy()
	case OpenShop:
		return in.openShopPlan(), nil
	default:
		return nil, fmt.Errorf("collective: %q is not a total-exchange planner", algo)
	}
	return in.buildPlan(algo, send, recv)
}

// buildPlan turns per-rank orders (send[i] lists i's destinations in send
// order, recv[j] j's sources in receive order) into a simulated plan.
func (in *exchangeInstance) buildPlan(algo Algorithm, send, recv [][]int) (*Plan, error) {
	n := in.n
	p := &Plan{Kind: KindAlltoall, Algorithm: algo, Ranks: n, Transfers: make([]Transfer, 0, in.events)}
	at := make([]int32, n*n) // index+1 of the transfer i->j; 0 = none yet
	for i := 0; i < n; i++ {
		for k, j := range send[i] {
			if j < 0 || j >= n || !in.isMsg(i, j) || at[i*n+j] != 0 {
				return nil, fmt.Errorf("collective: internal error: %s ordered a bad or repeated send %d->%d", algo, i, j)
			}
			at[i*n+j] = int32(len(p.Transfers) + 1)
			p.Transfers = append(p.Transfers, Transfer{Src: i, Dst: j, Bytes: in.bytes[i][j], SendSeq: k, RecvSeq: -1})
		}
	}
	if len(p.Transfers) != in.events {
		return nil, fmt.Errorf("collective: internal error: %s planned %d of %d messages", algo, len(p.Transfers), in.events)
	}
	for j := 0; j < n; j++ {
		for k, i := range recv[j] {
			if i < 0 || i >= n || at[i*n+j] == 0 || p.Transfers[at[i*n+j]-1].RecvSeq != -1 {
				return nil, fmt.Errorf("collective: internal error: %s ordered a bad or repeated receive %d->%d", algo, i, j)
			}
			p.Transfers[at[i*n+j]-1].RecvSeq = k
		}
	}
	costs := make([]float64, len(p.Transfers))
	for k, t := range p.Transfers {
		if t.RecvSeq < 0 {
			return nil, fmt.Errorf("collective: internal error: %s left %d->%d out of %d's receive order", algo, t.Src, t.Dst, t.Dst)
		}
		costs[k] = in.cost[t.Src][t.Dst]
	}
	// The orders as transfer indices, for the simulator.
	sendOrd, recvOrd := make([][]int, n), make([][]int, n)
	idx := make([]int, 2*len(p.Transfers))
	for r := 0; r < n; r++ {
		sendOrd[r], idx = idx[:len(send[r]):len(send[r])], idx[len(send[r]):]
		for k, j := range send[r] {
			sendOrd[r][k] = int(at[r*n+j]) - 1
		}
		recvOrd[r], idx = idx[:len(recv[r]):len(recv[r])], idx[len(recv[r]):]
		for k, i := range recv[r] {
			recvOrd[r][k] = int(at[i*n+r]) - 1
		}
	}
	mk, err := simulateOrders(p.Transfers, costs, sendOrd, recvOrd)
	if err != nil {
		return nil, fmt.Errorf("collective: internal error: %s: %w", algo, err)
	}
	p.Predicted = mk
	p.LowerBound = in.lowerBound
	return p, nil
}

// SimulateExchange evaluates a total-exchange plan under m and returns a
// copy with every Start and End recomputed, Predicted set to the makespan
// and LowerBound to t_lb of the plan's messages under m.
//
// Each rank sends in SendSeq order and receives in RecvSeq order; a
// transfer starts when it is next in both orders and both ports are free,
// i.e. at the later of the ends of its predecessors in the two orders, and
// lasts m.Cost(Src, Dst, Bytes). Orders need not be contiguous but must
// not repeat a number at a rank. If the orders are cyclic (every remaining
// transfer waits, directly or not, for itself) the error is an
// [*ExchangeDeadlockError] naming one cycle.
func SimulateExchange(m *Model, p *Plan) (*Plan, error) {
	if p == nil {
		return nil, fmt.Errorf("collective: nil plan")
	}
	if p.Kind != KindAlltoall {
		return nil, fmt.Errorf("collective: plan kind is %q, want %q", p.Kind, KindAlltoall)
	}
	if m == nil {
		return nil, fmt.Errorf("collective: nil model")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	n := m.Size()
	if p.Ranks != n {
		return nil, fmt.Errorf("collective: the plan is for %d ranks but the model describes %d", p.Ranks, n)
	}
	q := *p
	q.Transfers = append(make([]Transfer, 0, len(p.Transfers)), p.Transfers...)
	costs := make([]float64, len(q.Transfers))
	for k, t := range q.Transfers {
		switch {
		case t.Src < 0 || t.Src >= n || t.Dst < 0 || t.Dst >= n:
			return nil, fmt.Errorf("collective: transfer %d (%d->%d): rank out of range [0,%d)", k, t.Src, t.Dst, n)
		case t.Src == t.Dst:
			return nil, fmt.Errorf("collective: transfer %d (%d->%d): the diagonal is a local copy and is never planned", k, t.Src, t.Dst)
		case t.Bytes < 0:
			return nil, fmt.Errorf("collective: transfer %d (%d->%d): negative size %d", k, t.Src, t.Dst, t.Bytes)
		}
		costs[k] = m.Cost(t.Src, t.Dst, t.Bytes)
		if math.IsInf(costs[k], 0) || math.IsNaN(costs[k]) {
			return nil, fmt.Errorf("collective: transfer %d (%d->%d, %d bytes) has no finite cost under the model", k, t.Src, t.Dst, t.Bytes)
		}
	}
	mk, err := simulateTransfers(n, q.Transfers, costs)
	if err != nil {
		return nil, err
	}
	q.Predicted = mk
	q.LowerBound = exchangeLowerBound(n, q.Transfers, costs)
	return &q, nil
}

// ExchangeDeadlockError reports total-exchange orders that cannot be
// executed. Cycle lists indices into the plan's Transfers such that each
// waits for the next and the last for the first; Transfers[k] is the plan's
// transfer Cycle[k], and Wait[k] is "send" when it waits in its sender's
// order, "recv" when it waits in its receiver's order.
type ExchangeDeadlockError struct {
	Cycle     []int
	Transfers []Transfer
	Wait      []string
}

func (e *ExchangeDeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("collective: deadlock: the send and receive orders are cyclic:")
	for k, c := range e.Cycle {
		next := (k + 1) % len(e.Cycle)
		t, u := e.Transfers[k], e.Transfers[next]
		rank, seq, what := t.Src, t.SendSeq, "send"
		if e.Wait[k] == "recv" {
			rank, seq, what = t.Dst, t.RecvSeq, "receive"
		}
		if k > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " transfer %d (%d->%d, %s #%d of rank %d) waits for transfer %d (%d->%d)",
			c, t.Src, t.Dst, what, seq, rank, e.Cycle[next], u.Src, u.Dst)
	}
	return b.String()
}

// rankOrders groups transfer indices by key(t) (a rank) and orders each
// group by seq(t). It fails on a repeated seq within a group. Most plans
// number each rank 0..k-1, which is placed directly; anything else is
// sorted.
func rankOrders(n int, ts []Transfer, key, seq func(*Transfer) int, what string) ([][]int, error) {
	count := make([]int, n)
	for k := range ts {
		count[key(&ts[k])]++
	}
	orders := make([][]int, n)
	buf := make([]int, len(ts))
	off := 0
	for r := 0; r < n; r++ {
		orders[r] = buf[off : off+count[r] : off+count[r]]
		off += count[r]
		for k := range orders[r] {
			orders[r][k] = -1
		}
	}
	direct := true
	for k := range ts {
		r, s := key(&ts[k]), seq(&ts[k])
		if s < 0 || s >= count[r] || orders[r][s] != -1 {
			direct = false
			break
		}
		orders[r][s] = k
	}
	if direct {
		return orders, nil
	}
	for r := range orders {
		orders[r] = orders[r][:0]
	}
	for k := range ts {
		r := key(&ts[k])
		orders[r] = append(orders[r], k)
	}
	for r, o := range orders {
		sort.SliceStable(o, func(a, b int) bool { return seq(&ts[o[a]]) < seq(&ts[o[b]]) })
		for k := 1; k < len(o); k++ {
			if seq(&ts[o[k]]) == seq(&ts[o[k-1]]) {
				return nil, fmt.Errorf("collective: rank %d: transfers %d (%d->%d) and %d (%d->%d) both have %s %d",
					r, o[k-1], ts[o[k-1]].Src, ts[o[k-1]].Dst, o[k], ts[o[k]].Src, ts[o[k]].Dst, what, seq(&ts[o[k]]))
			}
		}
	}
	return orders, nil
}

func srcOf(t *Transfer) int     { return t.Src }
func dstOf(t *Transfer) int     { return t.Dst }
func sendSeqOf(t *Transfer) int { return t.SendSeq }
func recvSeqOf(t *Transfer) int { return t.RecvSeq }

// simulateTransfers sets Start and End of every transfer from the orders
// its SendSeq and RecvSeq describe and durations costs, and returns the
// makespan. Ranks must be in range.
func simulateTransfers(n int, ts []Transfer, costs []float64) (float64, error) {
	sendOrd, err := rankOrders(n, ts, srcOf, sendSeqOf, "send_seq")
	if err != nil {
		return 0, err
	}
	recvOrd, err := rankOrders(n, ts, dstOf, recvSeqOf, "recv_seq")
	if err != nil {
		return 0, err
	}
	return simulateOrders(ts, costs, sendOrd, recvOrd)
}

// simulateOrders is the discrete-event simulation of the one-port model:
// sendOrd[r] and recvOrd[r] list indices into ts in rank r's send and
// receive order. A transfer runs when it heads both its sender's and its
// receiver's remaining order; it starts when both ports are free (the
// later of the ends of its predecessors in the two orders) and lasts
// costs[k]. The result does not depend on the order in which ready
// transfers are taken. It returns the makespan, or an
// [*ExchangeDeadlockError] if some transfers never become ready.
func simulateOrders(ts []Transfer, costs []float64, sendOrd, recvOrd [][]int) (float64, error) {
	n := len(sendOrd)
	posS := make([]int32, len(ts)) // position of each transfer in its orders
	posR := make([]int32, len(ts))
	for _, o := range sendOrd {
		for k, t := range o {
			posS[t] = int32(k)
		}
	}
	for _, o := range recvOrd {
		for k, t := range o {
			posR[t] = int32(k)
		}
	}
	sp := make([]int32, n) // how far each rank has got in its orders
	rp := make([]int32, n)
	sendFree := make([]float64, n)
	recvFree := make([]float64, n)
	ready := make([]int32, 0, n)
	isReady := func(t int) bool {
		tr := &ts[t]
		return sp[tr.Src] == posS[t] && rp[tr.Dst] == posR[t]
	}
	for r := 0; r < n; r++ {
		if len(sendOrd[r]) > 0 && isReady(sendOrd[r][0]) {
			ready = append(ready, int32(sendOrd[r][0]))
		}
	}
	mk := 0.0
	done := 0
	for len(ready) > 0 {
		t := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		tr := &ts[t]
		s, d := tr.Src, tr.Dst
		start := sendFree[s]
		if recvFree[d] > start {
			start = recvFree[d]
		}
		tr.Start, tr.End = start, start+costs[t]
		sendFree[s], recvFree[d] = tr.End, tr.End
		if tr.End > mk {
			mk = tr.End
		}
		sp[s]++
		rp[d]++
		done++
		// Only the new heads of s's sends and d's receives can have
		// become ready. They are one transfer only if the plan repeats the
		// pair s->d (an invalid plan, still simulated): take it once.
		next := -1
		if k := sp[s]; int(k) < len(sendOrd[s]) && isReady(sendOrd[s][k]) {
			next = sendOrd[s][k]
			ready = append(ready, int32(next))
		}
		if k := rp[d]; int(k) < len(recvOrd[d]) && isReady(recvOrd[d][k]) && recvOrd[d][k] != next {
			ready = append(ready, int32(recvOrd[d][k]))
		}
	}
	if done == len(ts) {
		return mk, nil
	}
	// Some transfers never became ready: from one of them, follow a
	// predecessor that did not run until a transfer repeats.
	ran := func(t int) bool { return posS[t] < sp[ts[t].Src] }
	t := 0
	for ran(t) {
		t++
	}
	visit := map[int]int{}
	var path []int
	var wait []string
	for {
		if at, ok := visit[t]; ok {
			e := &ExchangeDeadlockError{Cycle: path[at:], Wait: wait[at:]}
			for _, c := range e.Cycle {
				e.Transfers = append(e.Transfers, ts[c])
			}
			return 0, e
		}
		visit[t] = len(path)
		path = append(path, t)
		tr := &ts[t]
		if k := posS[t]; k > 0 && !ran(sendOrd[tr.Src][k-1]) {
			wait = append(wait, "send")
			t = sendOrd[tr.Src][k-1]
		} else {
			wait = append(wait, "recv")
			t = recvOrd[tr.Dst][posR[t]-1]
		}
	}
}

// exchangeLowerBound returns t_lb: the largest sum of send costs or of
// receive costs at any rank. The sums run over a dense matrix in order of
// the peer's rank, so every plan of a pattern gets the same bound to the
// last bit, however its transfers are listed.
func exchangeLowerBound(n int, ts []Transfer, costs []float64) float64 {
	c := make([]float64, n*n)
	for k, t := range ts {
		c[t.Src*n+t.Dst] += costs[k]
	}
	lb := 0.0
	for r := 0; r < n; r++ {
		snd, rcv := 0.0, 0.0
		for p := 0; p < n; p++ {
			snd += c[r*n+p]
			rcv += c[p*n+r]
		}
		lb = math.Max(lb, math.Max(snd, rcv))
	}
	return lb
}

// ValidateExchange checks that p is a valid schedule of the total exchange
// x, and names the pair, rank and transfers at fault when it is not:
//
//   - p is an alltoall plan for x.Size() ranks and x itself is valid;
//   - every i != j with Bytes[i][j] > 0 is delivered by exactly one
//     transfer carrying exactly Bytes[i][j] bytes, and there is no other
//     transfer (no diagonal, no zero-byte pair, no rank out of range);
//   - at every rank the SendSeq of its sends and the RecvSeq of its
//     receives are each a permutation of 0..k-1;
//   - times are finite with 0 <= Start <= End, consecutive sends of a rank
//     (and receives of a rank) do not overlap, they happen in the planned
//     order, and Predicted is the latest End (0 without transfers).
//
// Times are compared with a tolerance of 1e-9 times max(1, Predicted), to
// accept plans written by other tools. Durations are not checked: that
// needs the model (use [SimulateExchange] and compare).
func ValidateExchange(x *Exchange, p *Plan) error {
	if x == nil || p == nil {
		return fmt.Errorf("collective: nil exchange pattern or plan")
	}
	if p.Kind != KindAlltoall {
		return fmt.Errorf("collective: plan kind is %q, want %q", p.Kind, KindAlltoall)
	}
	n := x.Size()
	if p.Ranks != n {
		return fmt.Errorf("collective: the plan is for %d ranks but the pattern has %d", p.Ranks, n)
	}
	if err := x.Validate(n); err != nil {
		return err
	}
	if len(p.Tasks) != 0 || len(p.Steps) != 0 {
		return fmt.Errorf("collective: an alltoall plan has multicast tasks or redistribution steps")
	}
	ts := p.Transfers
	at := make([]int32, n*n) // index+1 of the transfer of each pair
	for k, t := range ts {
		switch {
		case t.Src < 0 || t.Src >= n || t.Dst < 0 || t.Dst >= n:
			return fmt.Errorf("collective: transfer %d (%d->%d): rank out of range [0,%d)", k, t.Src, t.Dst, n)
		case t.Src == t.Dst:
			return fmt.Errorf("collective: transfer %d (%d->%d): the diagonal is a local copy and must not be planned", k, t.Src, t.Dst)
		case x.Bytes[t.Src][t.Dst] == 0:
			return fmt.Errorf("collective: transfer %d (%d->%d): the pair has zero bytes and sends no message", k, t.Src, t.Dst)
		case t.Bytes != x.Bytes[t.Src][t.Dst]:
			return fmt.Errorf("collective: transfer %d (%d->%d) carries %d bytes, the pattern has %d", k, t.Src, t.Dst, t.Bytes, x.Bytes[t.Src][t.Dst])
		}
		if prev := at[t.Src*n+t.Dst]; prev != 0 {
			return fmt.Errorf("collective: the pair %d->%d is delivered twice, by transfers %d and %d", t.Src, t.Dst, prev-1, k)
		}
		at[t.Src*n+t.Dst] = int32(k + 1)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && x.Bytes[i][j] > 0 {
				if at[i*n+j] == 0 {
					return fmt.Errorf("collective: the pair %d->%d (%d bytes) is never delivered", i, j, x.Bytes[i][j])
				}
			}
		}
	}

	tol := 1e-9 * math.Max(1, math.Abs(p.Predicted))
	mk := 0.0
	for k, t := range ts {
		if !finiteNonNeg(t.Start) || !finiteNonNeg(t.End) || t.End < t.Start {
			return fmt.Errorf("collective: transfer %d (%d->%d): bad times [%v, %v]", k, t.Src, t.Dst, t.Start, t.End)
		}
		if !finiteNonNeg(t.Rate) || t.Rate > 0 && p.Algorithm != Paced {
			return fmt.Errorf("collective: transfer %d (%d->%d): rate %v (only a paced plan paces, at a finite rate)", k, t.Src, t.Dst, t.Rate)
		}
		mk = math.Max(mk, t.End)
	}
	sides := []struct {
		rank    func(*Transfer) int
		seq     func(*Transfer) int
		seqName string
		what    string
	}{
		{srcOf, sendSeqOf, "send_seq", "sends"},
		{dstOf, recvSeqOf, "recv_seq", "receives"},
	}
	for _, s := range sides {
		groups := make([][]int, n)
		for k := range ts {
			r := s.rank(&ts[k])
			groups[r] = append(groups[r], k)
		}
		for r, g := range groups {
			// The numbers must be exactly 0..len(g)-1.
			slot := make([]int, len(g))
			for k := range slot {
				slot[k] = -1
			}
			for _, k := range g {
				q := s.seq(&ts[k])
				if q < 0 || q >= len(g) {
					return fmt.Errorf("collective: rank %d: transfer %d (%d->%d) has %s %d, want 0..%d (rank %d has %d %s)",
						r, k, ts[k].Src, ts[k].Dst, s.seqName, q, len(g)-1, r, len(g), s.what)
				}
				if o := slot[q]; o >= 0 {
					return fmt.Errorf("collective: rank %d: transfers %d (%d->%d) and %d (%d->%d) both have %s %d",
						r, o, ts[o].Src, ts[o].Dst, k, ts[k].Src, ts[k].Dst, s.seqName, q)
				}
				slot[q] = k
			}
			if IsFlowPlan(p.Algorithm) {
				continue // messages overlap by design
			}
			// Overlaps first (by time), then agreement with the order.
			byTime := append([]int(nil), g...)
			sort.SliceStable(byTime, func(a, b int) bool {
				ta, tb := ts[byTime[a]], ts[byTime[b]]
				return ta.Start < tb.Start || (ta.Start == tb.Start && ta.End < tb.End)
			})
			for k := 1; k < len(byTime); k++ {
				a, b := ts[byTime[k-1]], ts[byTime[k]]
				if b.Start < a.End-tol {
					return fmt.Errorf("collective: rank %d %s two messages at once: transfer %d (%d->%d) [%v, %v] overlaps transfer %d (%d->%d) [%v, %v]",
						r, s.what, byTime[k-1], a.Src, a.Dst, a.Start, a.End, byTime[k], b.Src, b.Dst, b.Start, b.End)
				}
			}
			for q := 1; q < len(slot); q++ {
				a, b := ts[slot[q-1]], ts[slot[q]]
				if b.Start < a.End-tol {
					return fmt.Errorf("collective: rank %d %s out of its planned order: transfer %d (%d->%d, %s %d) starts at %v, before transfer %d (%d->%d, %s %d) ends at %v",
						r, s.what, slot[q], b.Src, b.Dst, s.seqName, q, b.Start, slot[q-1], a.Src, a.Dst, s.seqName, q-1, a.End)
				}
			}
		}
	}
	if math.IsNaN(p.Predicted) || math.Abs(p.Predicted-mk) > tol {
		return fmt.Errorf("collective: predicted completion %v differs from the latest transfer end %v", p.Predicted, mk)
	}
	return nil
}
