package taskmap

import (
	"fmt"
	"math"
	"sort"
)

// Algorithm names a mapping algorithm.
type Algorithm string

// The algorithms of the paper.
const (
	// Static executes the initial mapping (by default the baseline) as it
	// is: the paper's "baseline" curve.
	Static Algorithm = "static"
	// PS is the hybrid remapper with the minimum partial completion time
	// criterion and static priorities (section 3.4).
	PS Algorithm = "ps"
	// CS is the hybrid remapper with the minimum completion time criterion
	// and static priorities (section 3.5).
	CS Algorithm = "cs"
	// CD is the hybrid remapper with the minimum completion time criterion
	// and dynamic priorities (section 3.6).
	CD Algorithm = "cd"
	// GS is Generational Scheduling (Freund et al., section 4.2): at the
	// start and at every completion, the ready subtasks that have not
	// started are mapped again, first come first served, each where it
	// completes soonest.
	GS Algorithm = "gs"
	// Ideal is the baseline computed from the run-time values (simulation
	// only; see IdealMapping).
	Ideal Algorithm = "ideal"
)

// Algorithms returns every algorithm Simulate accepts.
func Algorithms() []Algorithm { return []Algorithm{Static, PS, CS, CD, GS, Ideal} }

// IsHybrid reports whether a is one of the hybrid remapper variants.
func (a Algorithm) IsHybrid() bool { return a == PS || a == CS || a == CD }

// Observation is what is known at run time when a remapping starts: the
// current time and the run-time start and completion times of the
// subtasks that have started or completed (NaN for the others). All times
// are on the clock of the mapping's predictions (0 is the start of the
// application).
type Observation struct {
	Now    float64
	Start  []float64
	Finish []float64
}

// NewObservation returns an observation of n subtasks at time 0 with
// nothing started.
func NewObservation(n int) *Observation {
	o := &Observation{Start: make([]float64, n), Finish: make([]float64, n)}
	for i := 0; i < n; i++ {
		o.Start[i], o.Finish[i] = math.NaN(), math.NaN()
	}
	return o
}

func (o *Observation) check(p *Problem) error {
	if o == nil {
		return invalid("nil observation")
	}
	if len(o.Start) != p.n || len(o.Finish) != p.n {
		return invalid("observation of %d/%d tasks, the problem has %d", len(o.Start), len(o.Finish), p.n)
	}
	if math.IsNaN(o.Now) || math.IsInf(o.Now, 0) {
		return invalid("observation time is %v", o.Now)
	}
	return nil
}

// Remapper is the run-time phase of the hybrid remapper (sections 3.3 to
// 3.6) for one execution of a problem: block 0 runs as the initial
// mapping placed it, and every later block k is remapped, in order, once
// the first subtask of block k-1 has started, from the run-time
// completion times known by then and expected values elsewhere.
//
// It is a pure data structure: the caller (the simulator, or the run-time
// executor) decides when to call Remap and supplies what it observed.
type Remapper struct {
	p    *Problem
	algo Algorithm
	v    values
	init []int     // initial machine of every task
	rank []float64 // static ranks under the initial mapping
	cur  *Mapping  // Machine: remapped or initial; Order: blocks < next
	next int

	ef, free, a, key []float64
	ptr              []int
}

// NewRemapper prepares the hybrid remapper variant algo (PS, CS or CD)
// with an initial mapping (nil: the baseline). It computes the ranks
// (section 3.2) from the initial mapping and the expected values.
func NewRemapper(p *Problem, initial *Mapping, algo Algorithm) (*Remapper, error) {
	if !algo.IsHybrid() {
		return nil, invalid("%q is not a hybrid remapper variant (ps, cs, cd)", algo)
	}
	if initial == nil {
		initial = Baseline(p)
	} else if err := initial.Validate(p); err != nil {
		return nil, err
	}
	r := &Remapper{p: p, algo: algo, v: values{p: p}, init: append([]int(nil), initial.Machine...), next: 1,
		ef: make([]float64, p.n), free: make([]float64, p.m), a: make([]float64, p.m), key: make([]float64, p.n), ptr: make([]int, p.m)}
	r.rank = ranks(&r.v, r.init)
	r.cur = newMapping(p)
	copy(r.cur.Machine, r.init)
	for x, ord := range initial.Order {
		for _, i := range ord {
			if p.block[i] == 0 {
				r.cur.assign(i, x, initial.Start[i], initial.Finish[i])
			}
		}
	}
	return r, nil
}

// Algorithm returns the variant.
func (r *Remapper) Algorithm() Algorithm { return r.algo }

// Rank returns the static rank of task i.
func (r *Remapper) Rank(i int) float64 { return r.rank[i] }

// NextBlock returns the block the next call to Remap must remap, or the
// number of blocks when every block has been mapped.
func (r *Remapper) NextBlock() int { return r.next }

// Done reports whether every block has been mapped.
func (r *Remapper) Done() bool { return r.next >= len(r.p.blocks) }

// Mapping returns the current mapping. Machine holds the remapped machine
// of the blocks mapped so far and the initial machine of the others;
// Order holds only the blocks mapped so far, block after block; Start and
// Finish hold the times predicted when each subtask was mapped. It is
// the remapper's own state: do not modify it.
func (r *Remapper) Mapping() *Mapping { return r.cur }

// SetSpeed scales the expected execution times on machine x by factor
// from now on (1: as expected; 2: twice as slow). The paper's remapper
// does not do this; the run-time executor can, when it has measured that a
// machine runs slower than expected.
func (r *Remapper) SetSpeed(x int, factor float64) error {
	if x < 0 || x >= r.p.m {
		return invalid("machine %d out of range", x)
	}
	if !(factor > 0) || math.IsInf(factor, 0) {
		return invalid("speed factor %v: must be positive and finite", factor)
	}
	if r.v.speed == nil {
		r.v.speed = make([]float64, r.p.m)
		for j := range r.v.speed {
			r.v.speed[j] = 1
		}
	}
	r.v.speed[x] = factor
	return nil
}

// Remap remaps block k, which must be NextBlock(), from what obs says
// about the execution so far. It returns the block's subtasks in the
// order they were mapped; their machines and predicted times are in
// Mapping().
//
// Completion times come from obs where they are known; a subtask that has
// started but not finished is expected to finish at max(now, start + e);
// one that has not started at e + max(machine free, inputs arrived, now),
// recursively, following the machines' orders. This gives pct of every
// mapped subtask, and A[x], the time machine x finishes the work mapped to
// it so far. Then, for every subtask s_i of block k in priority order, for
// every machine x:
//
//	dr(s_i, x)  = max over s_j in ips(s_i) of (pct(s_j) + c_ji)
//	pct(s_i, x) = e_ix + max(A[x], dr(s_i, x))
//	ct(s_i, x)  = pct(s_i, x) + max over s_j in iss(s_i) of (c_ij + rank(s_j))
//
// (c_ij with s_j on its initial machine; ct = pct without successors).
// PS picks the machine of least pct, CS and CD the machine of least ct;
// A[x] becomes pct(s_i, x). PS and CS take the subtasks by decreasing
// static rank, CD by decreasing ct(s_i, initial machine of s_i), computed
// before the block is mapped. Ties go to the lower index.
func (r *Remapper) Remap(k int, obs *Observation) ([]int, error) {
	p := r.p
	if k != r.next {
		if k >= 1 && k < len(p.blocks) && k < r.next {
			return nil, invalid("block %d is already mapped", k)
		}
		return nil, invalid("cannot remap block %d: blocks are remapped in order and the next is %d of %d", k, r.next, len(p.blocks))
	}
	if r.Done() {
		return nil, invalid("every block is already mapped")
	}
	if err := obs.check(p); err != nil {
		return nil, err
	}
	r.expect(obs)
	copy(r.a, r.free)

	tasks := append([]int(nil), p.blocks[k]...)
	switch r.algo {
	case CD:
		for _, s := range tasks {
			x := r.init[s]
			r.key[s] = r.pct(s, x, obs.Now) + r.tail(s, x)
		}
	default:
		for _, s := range tasks {
			r.key[s] = r.rank[s]
		}
	}
	sort.SliceStable(tasks, func(a, b int) bool { return r.key[tasks[a]] > r.key[tasks[b]] })

	for _, s := range tasks {
		best, bestX, bestPct := math.Inf(1), 0, 0.0
		for x := 0; x < p.m; x++ {
			pct := r.pct(s, x, obs.Now)
			crit := pct
			if r.algo != PS {
				crit += r.tail(s, x)
			}
			if crit < best {
				best, bestX, bestPct = crit, x, pct
			}
		}
		r.cur.assign(s, bestX, bestPct-r.v.execTime(s, bestX), bestPct)
		r.a[bestX] = bestPct
	}
	r.next++
	return tasks, nil
}

// pct is the partial completion time of task s on machine x, with r.ef
// holding the expected completion of every mapped task and r.a the
// machines' availability.
func (r *Remapper) pct(s, x int, now float64) float64 {
	st := max(r.a[x], now)
	for _, d := range r.p.preds[s] {
		st = max(st, r.ef[d.task]+r.v.comm(d.edge, r.cur.Machine[d.task], x))
	}
	return st + r.v.execTime(s, x)
}

// tail is max over successors of c_ij + rank(s_j), for s on machine x.
func (r *Remapper) tail(s, x int) float64 {
	t := 0.0
	for _, d := range r.p.succs[s] {
		t = max(t, r.v.comm(d.edge, x, r.init[d.task])+r.rank[d.task])
	}
	return t
}

// expect fills r.ef with the run-time or expected completion time of
// every task of the blocks mapped so far and r.free with the time each
// machine finishes its mapped work. Machine orders are block after block,
// so walking the blocks in order meets predecessors first.
func (r *Remapper) expect(obs *Observation) {
	p := r.p
	copy(r.free, p.avail)
	for x := range r.ptr {
		r.ptr[x] = 0
	}
	for b := 0; b < r.next; b++ {
		for x := 0; x < p.m; x++ {
			q := r.cur.Order[x]
			for r.ptr[x] < len(q) && p.block[q[r.ptr[x]]] == b {
				s := q[r.ptr[x]]
				r.ptr[x]++
				var f float64
				switch {
				case !math.IsNaN(obs.Finish[s]):
					f = obs.Finish[s]
				case !math.IsNaN(obs.Start[s]):
					f = max(obs.Now, obs.Start[s]+r.v.execTime(s, x))
				default:
					st := max(r.free[x], obs.Now)
					for _, d := range p.preds[s] {
						st = max(st, r.ef[d.task]+r.v.comm(d.edge, r.cur.Machine[d.task], x))
					}
					f = st + r.v.execTime(s, x)
				}
				r.ef[s] = f
				r.free[x] = f
			}
		}
	}
}

// clone returns an independent copy (for benchmarks).
func (r *Remapper) clone() *Remapper {
	c := *r
	c.init = append([]int(nil), r.init...)
	c.rank = append([]float64(nil), r.rank...)
	c.cur = r.cur.Clone()
	c.ef = append([]float64(nil), r.ef...)
	c.free = append([]float64(nil), r.free...)
	c.a = append([]float64(nil), r.a...)
	c.key = append([]float64(nil), r.key...)
	c.ptr = append([]int(nil), r.ptr...)
	if r.v.speed != nil {
		c.v.speed = append([]float64(nil), r.v.speed...)
	}
	return &c
}

// String describes the remapper's state.
func (r *Remapper) String() string {
	return fmt.Sprintf("taskmap: %s remapper, next block %d of %d", r.algo, r.next, len(r.p.blocks))
}
