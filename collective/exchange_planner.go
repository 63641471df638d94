package collective

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
)

// ExchangePlanner plans total exchanges like [PlanExchange] and keeps
// what it planned, for a runtime that plans every call:
//
//   - A plan is cached under the model and the sizes: when both repeat
//     exactly, the cached plan is returned without planning (a 64-bit
//     digest finds it, then the sizes and the model are compared in
//     full).
//   - When the model repeats and only a few sizes changed since the last
//     plan (at most PatchFraction of the pairs), the last plan is
//     patched, as the total-exchange paper's section 6.2 proposes: every
//     rank keeps its send and receive orders, messages that are gone
//     leave them, new ones join at their ends, and the times are
//     simulated again. The patch is kept only if it is not worse, as a
//     ratio to its t_lb, than PatchSlack above the plan it comes from;
//     otherwise the exchange is planned in full.
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
	// model share one copy of it.
	Capacity int
	// PatchFraction is the largest fraction of the pairs whose sizes may
	// differ from the last plan's for a patch to be tried; 0 never
	// patches. Default 0.1.
	PatchFraction float64
	// PatchSlack is how far a patch's ratio to t_lb may exceed the ratio
	// of the plan it was patched from. Default 0.02.
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
	model  *Model // a copy
	bytes  [][]int64
	plan   *Plan
	ratio  float64 // a plan in full: its Predicted / LowerBound
	used   uint64
	origin *plannerEntry // the plan in full this one was patched from, or itself
}

// NewExchangePlanner returns a planner that plans with algo and opt.
func NewExchangePlanner(algo Algorithm, opt Options) (*ExchangePlanner, error) {
	if err := checkAlgo(KindAlltoall, algo); err != nil {
		return nil, err
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

// Plan returns a plan of x under m: from the cache, patched from the last
// plan, or planned in full, as the type's comment says.
func (pl *ExchangePlanner) Plan(m *Model, x *Exchange) (*Plan, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if m == nil || x == nil {
		return nil, fmt.Errorf("collective: nil model or exchange pattern")
	}
	mkey := pl.modelDigest(m)
	key := pl.sizesDigest(mkey, x.Bytes)
	pl.tick++
	for _, e := range pl.cache[key] {
		if sameSizes(e.bytes, x.Bytes) && sameModel(e.model, m) {
			e.used = pl.tick
			pl.last = e
			pl.stats.Hits++
			return e.plan, nil
		}
	}
	in, err := newExchangeInstance(m, x)
	if err != nil {
		return nil, err
	}
	e := &plannerEntry{key: key, bytes: copySizes(x.Bytes), used: pl.tick}
	sameAsLast := pl.last != nil && sameModel(pl.last.model, m)
	if l := pl.last; sameAsLast && pl.PatchFraction > 0 {
		if p := pl.patch(in, l); p != nil {
			e.model, e.plan, e.origin = l.model, p, l.origin
			pl.stats.Patches++
		}
	}
	if e.plan == nil {
		p, err := PlanExchange(m, x, pl.algo, pl.opt)
		if err != nil {
			return nil, err
		}
		e.model, e.plan, e.origin = pl.modelCopy(m, sameAsLast), p, e
		e.ratio = ratioToBound(p)
		pl.stats.Plans++
	}
	pl.last = e
	pl.store(e)
	return e.plan, nil
}

// patch patches l's plan to in's sizes, or returns nil if too many sizes
// changed or the patch is too far from t_lb.
func (pl *ExchangePlanner) patch(in *exchangeInstance, l *plannerEntry) *Plan {
	n := in.n
	if len(l.bytes) != n {
		return nil
	}
	changed, limit := 0, int(pl.PatchFraction*float64(n*(n-1)))
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && l.bytes[i][j] != in.bytes[i][j] {
				if changed++; changed > limit {
					return nil
				}
			}
		}
	}
	// The orders of the last plan, without the messages that are gone.
	send, recv := in.newOrders()
	old := l.plan
	sendOrd, err := rankOrders(n, old.Transfers, srcOf, sendSeqOf, "send_seq")
	if err != nil {
		return nil
	}
	recvOrd, err := rankOrders(n, old.Transfers, dstOf, recvSeqOf, "recv_seq")
	if err != nil {
		return nil
	}
	for r := 0; r < n; r++ {
		for _, k := range sendOrd[r] {
			if t := old.Transfers[k]; in.isMsg(t.Src, t.Dst) {
				send[r] = append(send[r], t.Dst)
			}
		}
		for _, k := range recvOrd[r] {
			if t := old.Transfers[k]; in.isMsg(t.Src, t.Dst) {
				recv[r] = append(recv[r], t.Src)
			}
		}
	}
	// New messages at the ends of their orders: each comes after every
	// kept one and after the new ones before it, so the orders stay
	// acyclic.
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if in.isMsg(i, j) && l.bytes[i][j] == 0 {
				send[i] = append(send[i], j)
				recv[j] = append(recv[j], i)
			}
		}
	}
	p, err := in.buildPlan(old.Algorithm, send, recv)
	if err != nil {
		return nil
	}
	if ratioToBound(p) > l.origin.ratio*(1+pl.PatchSlack) {
		return nil
	}
	return p
}

// modelCopy is the planner's copy of m: the last plan's when m is the
// same model, so that plans of one model share one copy.
func (pl *ExchangePlanner) modelCopy(m *Model, sameAsLast bool) *Model {
	if sameAsLast {
		return pl.last.model
	}
	return m.Clone()
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

func (pl *ExchangePlanner) modelDigest(m *Model) uint64 {
	var h maphash.Hash
	h.SetSeed(pl.seed)
	var buf []byte
	mat := func(tag byte, a [][]float64) {
		h.WriteByte(tag)
		for _, row := range a {
			buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(len(row)))
			for _, v := range row {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
			}
			h.Write(buf)
		}
	}
	mat('l', m.Latency)
	mat('b', m.Bandwidth)
	mat('p', m.PerByte)
	for _, o := range [][]Overhead{m.SendOverhead, m.RecvOverhead} {
		buf = append(buf[:0], 'o')
		for _, v := range o {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v.Const))
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v.PerByte))
		}
		h.Write(buf)
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
		sameOverheads(a.SendOverhead, b.SendOverhead) && sameOverheads(a.RecvOverhead, b.RecvOverhead)
}

func copySizes(a [][]int64) [][]int64 {
	c := make([][]int64, len(a))
	for i := range a {
		c[i] = append([]int64(nil), a[i]...)
	}
	return c
}
