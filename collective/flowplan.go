package collective

import (
	"cmp"
	"fmt"
	"slices"
)

// The flow-level total-exchange plans post every message at once, as a
// switch lets them run: a fast NIC feeds several slow ones, and only the
// NICs and shared segments limit the flows. They are planned and
// evaluated on a Fabric.
const (
	// Naive posts every message at once, unpaced, and lets the network
	// share itself (Gloo's alltoallv; the redistribution paper's brute
	// force).
	Naive Algorithm = "naive"
	// Paced posts every message at once, each paced to its share of the
	// bound: bytes / Γ, where Γ is the time the busiest NIC or segment
	// needs for its bytes. No resource is then ever over its capacity and
	// every paced flow ends together at the bound (the MADD allocation of
	// coflow scheduling, Varys, SIGCOMM 2014). Small messages go unpaced
	// and first (FlowOptions.SmallBytes); while they run they take their
	// fair share of the NICs they cross, which delays the paced ones by
	// at most the time the small ones need there.
	Paced Algorithm = "paced"
)

// IsFlowPlan reports whether algo is a flow-level plan (Naive or Paced),
// which posts every message at once rather than following one-port
// orders.
func IsFlowPlan(algo Algorithm) bool { return algo == Naive || algo == Paced }

// DefaultSmallBytes is FlowOptions.SmallBytes's default.
const DefaultSmallBytes = 64 << 10

// FlowOptions tunes the flow-level plans.
type FlowOptions struct {
	// SmallBytes: a message of at most this many bytes, or of at most its
	// pair's bandwidth-delay product (start-up time times the slower of
	// the two NICs), goes unpaced and before the paced ones. A sender
	// cannot pace what leaves in its first round trip, and pacing a small
	// message to last as long as the whole exchange only delays it while
	// saving nothing. 0 means DefaultSmallBytes; a negative value paces
	// every message.
	SmallBytes int64
	// NoPacing leaves Paced out of PlanExchangeOn's Auto, for an
	// executor that cannot pace.
	NoPacing bool
}

// small reports whether the message i->j of b bytes goes unpaced.
func (o FlowOptions) small(f *Fabric, i, j int, b int64) bool {
	lim := o.SmallBytes
	if lim < 0 {
		return false
	}
	if lim == 0 {
		lim = DefaultSmallBytes
	}
	bdp := f.StartUp(i, j) * min(f.Out(i), f.In(j))
	return float64(b) <= max(float64(lim), bdp)
}

// PlanFlows plans a total exchange as flows on a fabric: Naive (every
// message at once, unpaced) or Paced (every message at once, the large
// ones paced to bytes / Γ). Transfer.Rate holds each message's pacing
// rate (0: unpaced); SendSeq and RecvSeq give the order in which a rank
// posts its messages (the unpaced small ones first, then by size,
// largest first). Start and End are the flow simulator's prediction,
// Predicted the latest End, and LowerBound the fabric bound.
func PlanFlows(f *Fabric, x *Exchange, algo Algorithm, o FlowOptions) (*Plan, error) {
	if !IsFlowPlan(algo) {
		return nil, fmt.Errorf("collective: %q is not a flow-level plan (want %s or %s)", algo, Naive, Paced)
	}
	b, err := f.Bound(x)
	if err != nil {
		return nil, err
	}
	n := f.Size()
	p := &Plan{Kind: KindAlltoall, Algorithm: algo, Ranks: n}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j || x.Bytes[i][j] == 0 {
				continue
			}
			t := Transfer{Src: i, Dst: j, Bytes: x.Bytes[i][j]}
			if algo == Paced && b.Bandwidth > 0 && !o.small(f, i, j, t.Bytes) {
				t.Rate = float64(t.Bytes) / b.Bandwidth
			}
			p.Transfers = append(p.Transfers, t)
		}
	}
	postingOrder(p)
	return f.SimulateExchange(p)
}

// postingOrder numbers every rank's sends and receives: unpaced messages
// first, then the larger before the smaller, then by peer.
func postingOrder(p *Plan) {
	ts := p.Transfers
	// Each rank's sends, and each rank's receives, sorted on their own:
	// the order restricted to one rank is all that numbers them, and a
	// rank's thousand messages sort far faster than a million at once,
	// by a key of their own rather than through the transfers.
	type keyed struct {
		unpaced bool
		bytes   int64
		k       int32
	}
	before := func(a, b keyed) int {
		if a.unpaced != b.unpaced {
			if a.unpaced {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
			return c
		}
		return int(a.k - b.k) // stable: the plan's order on ties
	}
	var buf []keyed
	var keys []uint64
	for _, side := range []struct {
		rank func(*Transfer) int
		seq  func(*Transfer) *int
	}{
		{func(t *Transfer) int { return t.Src }, func(t *Transfer) *int { return &t.SendSeq }},
		{func(t *Transfer) int { return t.Dst }, func(t *Transfer) *int { return &t.RecvSeq }},
	} {
		for _, ks := range groupTransfers(ts, p.Ranks, side.rank) {
			// The same order by one integer each (paced, the bytes
			// inverted, the position in ks, which is in the plan's
			// order): a sort of plain integers is several times faster.
			var packed bool
			if keys, packed = packedKeys(ts, ks, keys[:0]); packed {
				slices.Sort(keys)
				for q, u := range keys {
					*side.seq(&ts[ks[u&(1<<posBits-1)]]) = q
				}
				continue
			}
			buf = buf[:0]
			for _, k := range ks {
				buf = append(buf, keyed{ts[k].Rate == 0, ts[k].Bytes, k})
			}
			slices.SortFunc(buf, before)
			for q, e := range buf {
				*side.seq(&ts[e.k]) = q
			}
		}
	}
}

// posBits and sizeBits split a packed posting key: a message's position
// among its rank's, and its bytes (up to 4 TiB).
const (
	posBits  = 21
	sizeBits = 42
)

// packedKeys appends to keys, for the transfers ks of one rank, one
// integer each that sorts as postingOrder's order: the unpaced first,
// then the larger, then by position. It tells whether every message
// fits the key (fewer than 2^21 of them, each under 4 TiB).
func packedKeys(ts []Transfer, ks []int32, keys []uint64) ([]uint64, bool) {
	if len(ks) >= 1<<posBits {
		return keys, false
	}
	for i, k := range ks {
		t := &ts[k]
		if t.Bytes < 0 || t.Bytes >= 1<<sizeBits {
			return keys, false
		}
		var paced uint64
		if t.Rate != 0 {
			paced = 1
		}
		keys = append(keys, paced<<63|uint64(1<<sizeBits-1-t.Bytes)<<posBits|uint64(i))
	}
	return keys, true
}

// groupTransfers lists the indices of ts by rank(t), in ts's order, in
// one backing array.
func groupTransfers(ts []Transfer, ranks int, rank func(*Transfer) int) [][]int32 {
	start := make([]int, ranks+1)
	for k := range ts {
		start[rank(&ts[k])+1]++
	}
	for r := range ranks {
		start[r+1] += start[r]
	}
	all := make([]int32, len(ts))
	next := slices.Clone(start[:ranks])
	for k := range ts {
		r := rank(&ts[k])
		all[next[r]] = int32(k)
		next[r]++
	}
	groups := make([][]int32, ranks)
	for r := range groups {
		groups[r] = all[start[r]:start[r+1]]
	}
	return groups
}

// SimulateExchange replays a total-exchange plan on the fabric and
// returns a copy with every transfer's Start and End recomputed, Predicted
// set to the latest End and LowerBound to the fabric bound of the plan's
// messages. A flow-level plan (Naive, Paced) posts every message at its
// Start, at most at its Rate; any other plan follows the one-port
// discipline it was made for: a message begins once its sender's previous
// send (SendSeq) and its receiver's previous receive (RecvSeq) have ended,
// as comm executes such plans. The messages then share the fabric as
// SimulateFlows does.
func (f *Fabric) SimulateExchange(p *Plan) (*Plan, error) {
	if p == nil || p.Kind != KindAlltoall {
		return nil, fmt.Errorf("collective: not a total-exchange plan")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	n := f.Size()
	if p.Ranks != n {
		return nil, fmt.Errorf("collective: the plan is for %d ranks but the fabric has %d", p.Ranks, n)
	}
	flows := make([]Flow, len(p.Transfers))
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
	}
	for k, t := range p.Transfers {
		flows[k] = Flow{Src: t.Src, Dst: t.Dst, Bytes: t.Bytes}
		if t.Src >= 0 && t.Src < n && t.Dst >= 0 && t.Dst < n && t.Src != t.Dst && t.Bytes > 0 {
			x.Bytes[t.Src][t.Dst] += t.Bytes
		}
		if IsFlowPlan(p.Algorithm) {
			flows[k].Start, flows[k].Rate = t.Start, t.Rate
		}
	}
	if !IsFlowPlan(p.Algorithm) {
		onePortDeps(p, flows)
	}
	times, err := f.SimulateFlows(flows)
	if err != nil {
		return nil, err
	}
	b, err := f.Bound(x)
	if err != nil {
		return nil, err
	}
	q := *p
	q.Transfers = append([]Transfer(nil), p.Transfers...)
	q.Predicted, q.LowerBound = 0, b.Seconds
	for k := range q.Transfers {
		q.Transfers[k].Start, q.Transfers[k].End = times[k].Start, times[k].End
		q.Predicted = max(q.Predicted, times[k].End)
	}
	return &q, nil
}

// onePortDeps makes each flow wait for the previous message in its
// sender's order and in its receiver's order.
func onePortDeps(p *Plan, flows []Flow) {
	for r := 0; r < p.Ranks; r++ {
		for _, order := range [][]int{p.SendOrder(r), p.RecvOrder(r)} {
			for q := 1; q < len(order); q++ {
				flows[order[q]].After = append(flows[order[q]].After, order[q-1])
			}
		}
	}
}

// OnePortSimLimit is the most ranks for which PlanExchangeOn replays a
// one-port plan on the fabric flow by flow. The replay has two events per
// message and shares the fabric anew at each: on racks with shared
// uplinks (`hetbench sim scale`) Auto's replays took 0.4 s at 64 ranks,
// one replay 1.5 s at 128 ranks and 8 s at 256, next to 20 ms for the
// open shop's plan itself at 256. Above it the plan's prediction is the
// later of its one-port completion and the fabric bound, and it keeps its
// one-port times, stretched to that bound where the bound is later
// (estimateOnePort).
const OnePortSimLimit = 32

// estimateOnePort is a one-port plan's prediction on the fabric without
// the replay: it cannot end before its own one-port schedule (every
// rank sends and receives one message at a time at the pair's rate) nor
// before the fabric bound. The transfers keep their one-port times, or,
// when the bound is later (a shared segment slower than the pairs it
// carries), those times stretched in proportion so that the last ends at
// the bound: the plan then still ends at Predicted, its messages in
// their order, as ValidateExchange asks.
func (f *Fabric) estimateOnePort(p *Plan, x *Exchange) (*Plan, error) {
	b, err := f.Bound(x)
	if err != nil {
		return nil, err
	}
	q := *p
	q.Predicted, q.LowerBound = max(p.Predicted, b.Seconds), b.Seconds
	if p.Predicted > 0 && q.Predicted > p.Predicted {
		s := q.Predicted / p.Predicted
		q.Transfers = slices.Clone(p.Transfers)
		for k := range q.Transfers {
			q.Transfers[k].Start *= s
			q.Transfers[k].End *= s
		}
	}
	return &q, nil
}

// evalOnePort is a one-port plan p of x as PlanExchangeOn evaluates it
// on the fabric: replayed up to OnePortSimLimit ranks, estimated above.
func (f *Fabric) evalOnePort(p *Plan, x *Exchange) (*Plan, error) {
	if f.Size() > OnePortSimLimit {
		return f.estimateOnePort(p, x)
	}
	return f.SimulateExchange(p)
}

// FlowSimLimit is the most ranks for which PlanExchangeOn's Auto
// simulates the naive and paced plans flow by flow: with every message
// active at once, the simulation costs O(F^2 log F) for F messages (9 ms
// at 16 ranks, 0.3 s at 32). Above it they are estimated (estimateFlows).
const FlowSimLimit = 16

// naiveMargin is how close to the fabric bound Auto estimates that the
// naive plan ends above FlowSimLimit ranks: within 1/0.9 of it, as fair
// sharing measured on switched networks (1.13-1.3x) and simulated here
// (usually within 1.1x).
const naiveMargin = 0.9

// EstimateFlows is PlanFlows without the simulation, as Auto plans naive
// and paced above FlowSimLimit ranks: every message ends at the fabric
// bound (paced) or at the bound over naiveMargin (naive).
func EstimateFlows(f *Fabric, x *Exchange, algo Algorithm, o FlowOptions) (*Plan, error) {
	return estimateFlows(f, x, algo, o)
}

func estimateFlows(f *Fabric, x *Exchange, algo Algorithm, o FlowOptions) (*Plan, error) {
	b, end, err := flowEstimate(f, x, algo)
	if err != nil {
		return nil, err
	}
	n := f.Size()
	p := &Plan{Kind: KindAlltoall, Algorithm: algo, Ranks: n, LowerBound: b.Seconds,
		Transfers: make([]Transfer, 0, n*(n-1))}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && x.Bytes[i][j] > 0 {
				t := Transfer{Src: i, Dst: j, Bytes: x.Bytes[i][j], End: end}
				if algo == Paced && b.Bandwidth > 0 && !o.small(f, i, j, t.Bytes) {
					t.Rate = float64(t.Bytes) / b.Bandwidth
				}
				p.Transfers = append(p.Transfers, t)
				p.Predicted = end
			}
		}
	}
	postingOrder(p)
	return p, nil
}

// flowEstimate is the fabric bound of x and when estimateFlows says its
// messages end.
func flowEstimate(f *Fabric, x *Exchange, algo Algorithm) (FabricBound, float64, error) {
	b, err := f.Bound(x)
	if err != nil {
		return b, 0, err
	}
	end := b.Seconds
	if algo == Naive {
		end /= naiveMargin
	}
	return b, end, nil
}

// estimateScore is estimateFlows' plan without its transfers, for Auto
// to compare: a plan of a million messages costs more to write than to
// choose. full (estimateFlows with everything) makes the one chosen.
func estimateScore(f *Fabric, x *Exchange, algo Algorithm) (*Plan, error) {
	b, end, err := flowEstimate(f, x, algo)
	if err != nil {
		return nil, err
	}
	return &Plan{Kind: KindAlltoall, Algorithm: algo, Ranks: f.Size(), LowerBound: b.Seconds, Predicted: end}, nil
}

// fillEstimate returns p, or, when p is estimateScore's (a flow plan
// without transfers), estimateFlows' plan in full.
func fillEstimate(p *Plan, f *Fabric, x *Exchange, o FlowOptions) (*Plan, error) {
	if p == nil || !IsFlowPlan(p.Algorithm) || p.Transfers != nil || p.Predicted == 0 {
		return p, nil
	}
	return estimateFlows(f, x, p.Algorithm, o)
}

// PlanExchangeOn plans a total exchange for a network described by both
// models: the pairwise model m, which the one-port planners of the
// total-exchange paper plan with, and the fabric f, on which every plan
// is then evaluated (nil: FabricFromModel(m), which knows no shared
// segments). algo is a one-port planner, Naive, Paced, or Auto, which
// keeps, among Naive, Paced (unless fo.NoPacing) and the one-port
// planners that Auto considers, the plan the flow simulator predicts to
// end first (the earlier in that order on ties, the one-port planners as
// PlanExchange's Auto orders them). Paced counts only when it takes at
// least pacedMinSpan; it then comes first and naive must beat it by
// unpacedMargin. Above
// FlowSimLimit ranks Auto estimates the naive and paced plans instead of
// simulating them, and above OnePortSimLimit every one-port plan is
// estimated (estimateOnePort) rather than replayed. The returned plan's
// Predicted and LowerBound are the fabric's, and so are its times where
// it was simulated.
func PlanExchangeOn(m *Model, f *Fabric, x *Exchange, algo Algorithm, opt Options, fo FlowOptions) (*Plan, error) {
	if algo != Naive && algo != Paced {
		if err := checkAlgo(KindAlltoall, algo); err != nil {
			return nil, err
		}
	}
	if f == nil {
		if m == nil {
			return nil, fmt.Errorf("collective: nil model")
		}
		f = FabricFromModel(m)
	}
	one := func(a Algorithm) (*Plan, error) {
		if IsFlowPlan(a) {
			return PlanFlows(f, x, a, fo)
		}
		p, err := PlanExchange(m, x, a, opt)
		if err != nil {
			return nil, err
		}
		return f.evalOnePort(p, x)
	}
	if algo != Auto {
		return one(algo)
	}
	best, bestScore, err := autoFlows(f, x, fo)
	if err != nil {
		return nil, err
	}
	consider := func(p *Plan, score float64) {
		if score < bestScore {
			best, bestScore = p, score
		}
	}
	if f.Size() > OnePortSimLimit && best.LowerBound > 0 && bestScore <= best.LowerBound {
		// The flow plan ends at the fabric bound; a one-port plan is
		// estimated at the later of its own end and that bound, so none
		// can be predicted to end first (ties keep the flow plan):
		// planning them would change nothing (at 1,024 ranks the open
		// shop would take most of the time).
		return fillEstimate(best, f, x, fo)
	}
	for _, a := range autoPreference[KindAlltoall] {
		if lim, ok := autoLimits[a]; ok && f.Size() > lim {
			continue
		}
		p, err := one(a)
		if err != nil {
			return nil, err
		}
		consider(p, p.Predicted)
	}
	return fillEstimate(best, f, x, fo)
}

// bestFlowPlan chooses between posting every message at once unpaced
// and paced (unless noPacing), as made by plan: paced when it takes at
// least pacedMinSpan, unless naive is predicted to beat it by
// unpacedMargin. It returns the plan and its score (its prediction, the
// naive one's raised by the margin when paced was in the running).
func bestFlowPlan(plan func(Algorithm) (*Plan, error), noPacing bool) (*Plan, float64, error) {
	naive, err := plan(Naive)
	if err != nil {
		return nil, 0, err
	}
	if noPacing {
		return naive, naive.Predicted, nil
	}
	paced, err := plan(Paced)
	if err != nil {
		return nil, 0, err
	}
	if paced.Predicted < pacedMinSpan {
		return naive, naive.Predicted, nil
	}
	if score := naive.Predicted * (1 + unpacedMargin); score < paced.Predicted {
		return naive, score, nil
	}
	return paced, paced.Predicted, nil
}

// PlanFlowsAuto plans a total exchange as flows on f, unpaced or paced
// by Auto's rule (see PlanExchangeOn), without the one-port planners:
// for collectives that post all their messages at once (the mesh
// Allgather). Above FlowSimLimit ranks the plans are estimated, not
// simulated.
func PlanFlowsAuto(f *Fabric, x *Exchange, fo FlowOptions) (*Plan, error) {
	p, _, err := autoFlows(f, x, fo)
	if err != nil {
		return nil, err
	}
	return fillEstimate(p, f, x, fo)
}

// autoFlows is Auto's choice between naive and paced (bestFlowPlan),
// simulated up to FlowSimLimit ranks and estimated above (estimateScore:
// fillEstimate then makes the plan chosen).
func autoFlows(f *Fabric, x *Exchange, fo FlowOptions) (*Plan, float64, error) {
	return bestFlowPlan(func(a Algorithm) (*Plan, error) {
		if f.Size() > FlowSimLimit {
			return estimateScore(f, x, a)
		}
		return PlanFlows(f, x, a, fo)
	}, fo.NoPacing)
}

// pacedMinSpan is the shortest predicted exchange Auto paces (see
// unpacedMargin): in a shorter one TCP's uneven sharing costs little, and
// the pacing itself (a system call per link, twice) costs more. On
// loopback (4 ranks, 1 MiB, 0.7 ms predicted) paced ran 4-7% slower than
// naive.
const pacedMinSpan = 10e-3

// unpacedMargin is how much better than paced Auto needs the naive
// plan's prediction to be to choose it. The simulator shares a resource
// among unpaced flows max-min fairly, the best TCP could do: measured on
// switch8 (uniform 1 MiB), naive ran 1.07-2.36x the bound, median 1.48x,
// and paced 1.07-1.19x, median 1.09x, for the same prediction.
const unpacedMargin = 0.05
