package collective

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
)

// ExchangePlanner plans total exchanges and keeps what it planned, for a
// runtime that plans every call. Plan plans like [PlanExchange] (the
// one-port model only); PlanOn plans like [PlanExchangeOn] (the pairwise
// model and a fabric, with FlowOptions), which is what comm's Alltoallv
// asks for.
//
//   - A plan is cached under what it was made from: the method (Plan or
//     PlanOn), the model, PlanOn's fabric and flow options, and the
//     sizes. When all of them repeat exactly, the cached plan is
//     returned without planning (a 64-bit digest finds it, then
//     everything is compared in full).
//   - When the rest repeats and only a few sizes changed since the last
//     plan (at most PatchFraction of the pairs), and that plan is a
//     one-port plan (not Naive or Paced: see [IsFlowPlan]), the last
//     plan is patched, as the total-exchange paper's section 6.2
//     proposes: every rank keeps its send and receive orders, messages
//     that are gone leave them, new ones join at their ends, and the
//     times are simulated again. PlanOn then evaluates the patch as
//     PlanExchangeOn evaluates one-port plans: replayed on the fabric up
//     to OnePortSimLimit ranks, estimated above, so that its Predicted
//     and LowerBound are the fabric's. The patch is kept only if it is
//     not worse, as a ratio to its lower bound, than PatchSlack above
//     the plan in full it comes from, and (PlanOn under Auto) only if
//     it is predicted to end strictly before the flow plan that Auto
//     would choose for the new sizes (naive or paced, simulated or
//     estimated as PlanExchangeOn does): otherwise the exchange is
//     planned in full, so a patch never keeps a one-port plan where
//     posting everything at once now wins. Flow plans are never
//     patched; they are cheap to make again.
//
// Every plan returned passes [ValidateExchange] (a patch delivers every
// message once, in orders that stay acyclic, at times simulated as a
// planner's are), and what a planner returns depends only on the calls
// made to it so far, in their order, with their arguments and its
// settings: planners given the same calls in the same order return the
// same plans (the ranks of a communicator rely on it). The digests'
// random seed only chooses buckets; every candidate is compared in full.
//
// The zero value is not usable: make one with [NewExchangePlanner]. It
// is safe for concurrent use; calls are serialised. The plans it returns
// are shared with its cache and must not be modified.
type ExchangePlanner struct {
	algo Algorithm
	opt  Options

	// Capacity is the number of plans kept (least recently used goes
	// first); 0 keeps none. Default 8. Each holds its plan (64 bytes a
	// message) and a copy of its sizes (8 bytes a pair), about 72 MB a
	// plan at 1,024 ranks; plans made one after another under the same
	// model (and fabric) share one copy of it.
	Capacity int
	// PatchFraction is the largest fraction of the pairs whose sizes may
	// differ from the last plan's for a patch to be tried; 0 never
	// patches. Default 0.1.
	PatchFraction float64
	// PatchSlack is how far a patch's ratio to its lower bound may
	// exceed the ratio of the plan in full it was patched from. Default
	// 0.02.
	PatchSlack float64

	mu    sync.Mutex
	seed  maphash.Seed
	tick  uint64
	cache map[uint64][]*plannerEntry
	last  *plannerEntry
	stats PlannerStats
}

// PlannerStats counts what an [ExchangePlanner] did.
type PlannerStats struct {
	Hits    int // plans returned from the cache
	Patches int // plans patched from the last one
	Plans   int // plans made in full (a rejected patch included)
}

type plannerEntry struct {
	key    uint64
	call   plannerCall // its model and fabric are copies
	bytes  [][]int64
	plan   *Plan
	ratio  float64 // a plan in full: its Predicted / LowerBound
	used   uint64
	origin *plannerEntry // the plan in full this one was patched from, or itself
}

// plannerCall is what a plan is made from, besides the sizes.
type plannerCall struct {
	on bool   // PlanOn (else Plan)
	m  *Model // never nil
	f  *Fabric
	fo FlowOptions
}

// same reports whether c and d make the same plans of the same sizes.
func (c plannerCall) same(d plannerCall) bool {
	return c.on == d.on && c.fo == d.fo && sameFabric(c.f, d.f) && sameModel(c.m, d.m)
}

// fabric is the fabric that c's plans are evaluated on.
func (c plannerCall) fabric() *Fabric {
	if c.f == nil {
		return FabricFromModel(c.m)
	}
	return c.f
}

// NewExchangePlanner returns a planner that plans with algo and opt: a
// one-port planner or Auto, or (for PlanOn only) Naive or Paced.
func NewExchangePlanner(algo Algorithm, opt Options) (*ExchangePlanner, error) {
	if !IsFlowPlan(algo) {
		if err := checkAlgo(KindAlltoall, algo); err != nil {
			return nil, err
		}
	}
	return &ExchangePlanner{algo: algo, opt: opt, Capacity: 8, PatchFraction: 0.1, PatchSlack: 0.02,
		seed: maphash.MakeSeed(), cache: map[uint64][]*plannerEntry{}}, nil
}

// Stats returns what the planner did so far.
func (pl *ExchangePlanner) Stats() PlannerStats {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.stats
}

// Plan returns a plan of x under m, as [PlanExchange] makes it: from the
// cache, patched from the last plan, or planned in full, as the type's
// comment says. The planner's algorithm must not be Naive or Paced.
func (pl *ExchangePlanner) Plan(m *Model, x *Exchange) (*Plan, error) {
	if IsFlowPlan(pl.algo) {
		return nil, fmt.Errorf("collective: %q plans on a fabric (use PlanOn)", pl.algo)
	}
	return pl.plan(plannerCall{m: m}, x)
}

// PlanOn returns a plan of x under the pairwise model m and the fabric f
// (nil: FabricFromModel(m)), as [PlanExchangeOn] makes it with the
// planner's algorithm, options and fo: from the cache, patched from the
// last plan, or planned in full, as the type's comment says. m must not
// be nil. A plan PlanOn makes in full is PlanExchangeOn's.
func (pl *ExchangePlanner) PlanOn(m *Model, f *Fabric, x *Exchange, fo FlowOptions) (*Plan, error) {
	return pl.plan(plannerCall{on: true, m: m, f: f, fo: fo}, x)
}

func (pl *ExchangePlanner) plan(c plannerCall, x *Exchange) (*Plan, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if c.m == nil || x == nil {
		return nil, fmt.Errorf("collective: nil model or exchange pattern")
	}
	key := pl.sizesDigest(pl.callDigest(c), x.Bytes)
	pl.tick++
	for _, e := range pl.cache[key] {
		if sameSizes(e.bytes, x.Bytes) && e.call.same(c) {
			e.used = pl.tick
			pl.last = e
			pl.stats.Hits++
			return e.plan, nil
		}
	}
	e := &plannerEntry{key: key, used: pl.tick}
	if l := pl.last; l != nil && l.call.same(c) && pl.PatchFraction > 0 && !IsFlowPlan(l.plan.Algorithm) {
		if p := pl.patch(c, x, l); p != nil {
			e.call, e.plan, e.origin = l.call, p, l.origin
			pl.stats.Patches++
		}
	}
	if e.plan == nil {
		var p *Plan
		var err error
		if c.on {
			p, err = PlanExchangeOn(c.m, c.f, x, pl.algo, pl.opt, c.fo)
		} else {
			p, err = PlanExchange(c.m, x, pl.algo, pl.opt)
		}
		if err != nil {
			return nil, err
		}
		e.call, e.plan, e.origin = pl.callCopy(c), p, e
		e.ratio = ratioToBound(p)
		pl.stats.Plans++
	}
	e.bytes = copySizes(x.Bytes)
	pl.last = e
	pl.store(e)
	return e.plan, nil
}

// patch patches l's plan to x's sizes, or returns nil if too many sizes
// changed or the patch is refused (see the type's comment).
func (pl *ExchangePlanner) patch(c plannerCall, x *Exchange, l *plannerEntry) *Plan {
	n := x.Size()
	if len(l.bytes) != n || c.m.Size() != n {
		return nil
	}
	var changed [][2]int
	limit := int(pl.PatchFraction * float64(n*(n-1)))
	for i := 0; i < n; i++ {
		if len(x.Bytes[i]) != n {
			return nil
		}
		for j := 0; j < n; j++ {
			if i != j && l.bytes[i][j] != x.Bytes[i][j] {
				if changed = append(changed, [2]int{i, j}); len(changed) > limit {
					return nil
				}
			}
		}
	}
	in, err := newExchangeInstance(c.m, x)
	if err != nil {
		return nil
	}
	p, err := patchPlan(in, l.plan, l.bytes, changed)
	if err != nil {
		return nil
	}
	if c.on {
		f := c.fabric()
		if p, err = f.evalOnePort(p, x); err != nil || pl.refused(p, l) {
			return nil
		}
		// Auto keeps a one-port plan only when it is predicted to end
		// strictly before the flow plan it would choose.
		if pl.algo == Auto {
			if _, score, err := autoFlows(f, x, c.fo); err != nil || !(p.Predicted < score) {
				return nil
			}
		}
	} else if pl.refused(p, l) {
		return nil
	}
	return p
}

// patchPlan is the one-port plan old, made for the sizes was, patched to
// in's sizes (changed lists the pairs whose sizes differ): every rank
// keeps its send and receive orders, the messages that are gone leave
// them, and the new ones join at their ends, in the order of their
// pairs (each comes after every kept one and after the new ones before
// it, so the orders stay acyclic). The times are simulated again on the
// one-port model. The kept messages keep their places in the plan's
// transfers, the new ones follow.
func patchPlan(in *exchangeInstance, old *Plan, was [][]int64, changed [][2]int) (*Plan, error) {
	n := in.n
	// The pairs that changed, as bits of a matrix, and the sequence
	// numbers that the messages gone leave free, by rank.
	bit := func(i, j int) (int, uint64) { return (i*n + j) / 64, 1 << ((i*n + j) % 64) }
	chg := make([]uint64, (n*n+63)/64)
	for _, pr := range changed {
		w, b := bit(pr[0], pr[1])
		chg[w] |= b
	}
	goneSend, goneRecv := map[int][]int{}, map[int][]int{}
	ts := make([]Transfer, 0, in.events)
	for _, t := range old.Transfers {
		if w, b := bit(t.Src, t.Dst); chg[w]&b != 0 {
			if t.Bytes = in.bytes[t.Src][t.Dst]; t.Bytes == 0 {
				goneSend[t.Src] = append(goneSend[t.Src], t.SendSeq)
				goneRecv[t.Dst] = append(goneRecv[t.Dst], t.RecvSeq)
				continue
			}
		}
		ts = append(ts, t) // the times follow from the simulation
	}
	// The kept messages close up their orders; the new ones come after
	// the last of them.
	nextSend, nextRecv := make([]int, n), make([]int, n)
	for _, side := range []struct {
		gone map[int][]int
		rank func(*Transfer) int
		seq  func(*Transfer) *int
		next []int
	}{
		{goneSend, srcOf, func(t *Transfer) *int { return &t.SendSeq }, nextSend},
		{goneRecv, dstOf, func(t *Transfer) *int { return &t.RecvSeq }, nextRecv},
	} {
		for _, g := range side.gone {
			slices.Sort(g)
		}
		for k := range ts {
			r, q := side.rank(&ts[k]), side.seq(&ts[k])
			if g := side.gone[r]; len(g) > 0 {
				below, _ := slices.BinarySearch(g, *q)
				*q -= below
			}
			side.next[r] = max(side.next[r], *q+1)
		}
	}
	for _, pr := range changed {
		if i, j := pr[0], pr[1]; was[i][j] == 0 && in.isMsg(i, j) {
			ts = append(ts, Transfer{Src: i, Dst: j, Bytes: in.bytes[i][j], SendSeq: nextSend[i], RecvSeq: nextRecv[j]})
			nextSend[i]++
			nextRecv[j]++
		}
	}
	if len(ts) != in.events {
		return nil, fmt.Errorf("collective: internal error: a patch of %d messages for %d", len(ts), in.events)
	}
	costs := make([]float64, len(ts))
	for k, t := range ts {
		costs[k] = in.cost[t.Src][t.Dst]
	}
	mk, err := simulateTransfers(n, ts, costs)
	if err != nil {
		return nil, err
	}
	return &Plan{Kind: KindAlltoall, Algorithm: old.Algorithm, Ranks: n, Transfers: ts, Predicted: mk, LowerBound: in.lowerBound}, nil
}

// refused reports whether the patch p of l's plan is too far from its
// lower bound: PatchSlack above the ratio of the plan in full it comes
// from.
func (pl *ExchangePlanner) refused(p *Plan, l *plannerEntry) bool {
	return ratioToBound(p) > l.origin.ratio*(1+pl.PatchSlack)
}

// callCopy is the planner's copy of c's model and fabric: the last
// plan's when they are the same, so that plans of one model share one
// copy.
func (pl *ExchangePlanner) callCopy(c plannerCall) plannerCall {
	l := pl.last
	if l != nil && sameModel(l.call.m, c.m) {
		c.m = l.call.m
	} else {
		c.m = c.m.Clone()
	}
	if l != nil && c.f != nil && sameFabric(l.call.f, c.f) {
		c.f = l.call.f
	} else {
		c.f = c.f.clone()
	}
	return c
}

// store keeps e, dropping the least recently used plans above Capacity.
func (pl *ExchangePlanner) store(e *plannerEntry) {
	if pl.Capacity <= 0 {
		return
	}
	pl.cache[e.key] = append(pl.cache[e.key], e)
	count := 0
	for _, es := range pl.cache {
		count += len(es)
	}
	for ; count > pl.Capacity; count-- {
		var old *plannerEntry
		for _, es := range pl.cache {
			for _, c := range es {
				if old == nil || c.used < old.used {
					old = c
				}
			}
		}
		es := pl.cache[old.key]
		for k, c := range es {
			if c == old {
				es = append(es[:k], es[k+1:]...)
				break
			}
		}
		if len(es) == 0 {
			delete(pl.cache, old.key)
		} else {
			pl.cache[old.key] = es
		}
	}
}

// ratioToBound is p's predicted completion over its t_lb (1 without
// messages).
func ratioToBound(p *Plan) float64 {
	if p.LowerBound <= 0 {
		return 1
	}
	return p.Predicted / p.LowerBound
}

// callDigest digests what c's plans are made from, besides the sizes:
// the method, the model (rails and segments included: FabricFromModel
// reads them), and PlanOn's fabric and flow options.
func (pl *ExchangePlanner) callDigest(c plannerCall) uint64 {
	var h maphash.Hash
	h.SetSeed(pl.seed)
	var buf []byte
	word := func(v uint64) { buf = binary.LittleEndian.AppendUint64(buf, v) }
	float := func(v float64) { word(math.Float64bits(v)) }
	flush := func() { h.Write(buf); buf = buf[:0] }
	mat := func(tag byte, a [][]float64) {
		h.WriteByte(tag)
		for _, row := range a {
			word(uint64(len(row)))
			for _, v := range row {
				float(v)
			}
			flush()
		}
	}
	segs := func(ss []Segment) {
		for _, s := range ss {
			h.WriteString(s.Name)
			word(uint64(len(s.A)))
			for _, r := range append(s.A, s.B...) {
				word(uint64(r))
			}
			float(s.AB)
			float(s.BA)
			flush()
		}
	}
	m := c.m
	mat('l', m.Latency)
	mat('b', m.Bandwidth)
	mat('p', m.PerByte)
	for _, o := range [][]Overhead{m.SendOverhead, m.RecvOverhead} {
		buf = append(buf, 'o')
		for _, v := range o {
			float(v.Const)
			float(v.PerByte)
		}
		flush()
	}
	for _, r := range m.Rails {
		h.WriteString(r.Name)
		mat('L', r.Latency)
		mat('B', r.Bandwidth)
	}
	h.WriteByte('s')
	segs(m.Segments)
	if c.on {
		h.WriteByte('f')
		word(uint64(c.fo.SmallBytes))
		if c.fo.NoPacing {
			word(1)
		}
		flush()
	}
	if f := c.f; f != nil {
		mat('e', f.Egress)
		mat('i', f.Ingress)
		mat('t', f.Latency)
		h.WriteByte('S')
		segs(f.Segments)
	}
	return h.Sum64()
}

func (pl *ExchangePlanner) sizesDigest(mkey uint64, bytes [][]int64) uint64 {
	var h maphash.Hash
	h.SetSeed(pl.seed)
	buf := binary.LittleEndian.AppendUint64(nil, mkey)
	for _, row := range bytes {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(row)))
		for _, v := range row {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
		h.Write(buf)
		buf = buf[:0]
	}
	return h.Sum64()
}

func sameSizes(a, b [][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

func sameMatrix(a, b [][]float64) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if math.Float64bits(a[i][j]) != math.Float64bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

func sameOverheads(a, b []Overhead) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func sameModel(a, b *Model) bool {
	return sameMatrix(a.Latency, b.Latency) && sameMatrix(a.Bandwidth, b.Bandwidth) && sameMatrix(a.PerByte, b.PerByte) &&
		sameOverheads(a.SendOverhead, b.SendOverhead) && sameOverheads(a.RecvOverhead, b.RecvOverhead) &&
		slices.EqualFunc(a.Rails, b.Rails, func(x, y Rail) bool {
			return x.Name == y.Name && sameMatrix(x.Latency, y.Latency) && sameMatrix(x.Bandwidth, y.Bandwidth)
		}) &&
		sameSegments(a.Segments, b.Segments)
}

// sameFabric reports whether a and b are the same fabric (or both nil).
func sameFabric(a, b *Fabric) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameMatrix(a.Egress, b.Egress) && sameMatrix(a.Ingress, b.Ingress) && sameMatrix(a.Latency, b.Latency) &&
		sameSegments(a.Segments, b.Segments)
}

func sameSegments(a, b []Segment) bool {
	return slices.EqualFunc(a, b, func(x, y Segment) bool {
		return x.Name == y.Name && slices.Equal(x.A, y.A) && slices.Equal(x.B, y.B) &&
			math.Float64bits(x.AB) == math.Float64bits(y.AB) && math.Float64bits(x.BA) == math.Float64bits(y.BA)
	})
}

func copySizes(a [][]int64) [][]int64 {
	c := make([][]int64, len(a))
	for i := range a {
		c[i] = append([]int64(nil), a[i]...)
	}
	return c
}
