package taskmap

import (
	"math"
	"sort"
)

// Mapping is a matching and scheduling of a problem's subtasks: the
// machine of every subtask and the order in which every machine runs its
// subtasks. A machine runs its list strictly in order, non-preemptively:
// a subtask starts when the previous one has finished and all its input
// items have arrived.
type Mapping struct {
	// Machine[i] is the machine of subtask i.
	Machine []int `json:"machine"`
	// Order[j] lists the subtasks of machine j in execution order.
	Order [][]int `json:"order"`
	// Start and Finish are the times the mapper predicted for every
	// subtask, from the values it planned with.
	Start  []float64 `json:"start"`
	Finish []float64 `json:"finish"`
	// Makespan is the predicted completion time of the application.
	Makespan float64 `json:"makespan"`
}

// Validate checks that the mapping covers the problem: one machine per
// subtask, in range, and every subtask exactly once in the order of its
// machine. Whether the orders can run without deadlock is checked by
// Simulate.
func (mp *Mapping) Validate(p *Problem) error {
	if mp == nil {
		return invalid("nil mapping")
	}
	if len(mp.Machine) != p.n {
		return invalid("mapping has %d machines for %d tasks", len(mp.Machine), p.n)
	}
	if len(mp.Order) != p.m {
		return invalid("mapping has %d machine orders for %d machines", len(mp.Order), p.m)
	}
	seen := make([]bool, p.n)
	for j, ord := range mp.Order {
		for _, i := range ord {
			if i < 0 || i >= p.n {
				return invalid("machine %d runs task %d, which does not exist", j, i)
			}
			if seen[i] {
				return invalid("%s is scheduled twice", p.g.taskName(i))
			}
			seen[i] = true
			if mp.Machine[i] != j {
				return invalid("%s is in machine %d's order but mapped to machine %d", p.g.taskName(i), j, mp.Machine[i])
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return invalid("%s is not scheduled", p.g.taskName(i))
		}
	}
	return nil
}

// values are the execution and communication times a planner or the
// simulator works with: the expected ones (exec == nil) or run-time ones.
type values struct {
	p         *Problem
	exec      [][]float64 // [task][machine]; nil: expected
	commScale []float64   // per item; nil: 1
	speed     []float64   // per machine multiplier of execution times; nil: 1
}

func (v *values) execTime(i, x int) float64 {
	var e float64
	if v.exec != nil {
		e = v.exec[i][x]
	} else {
		e = v.p.g.Tasks[i].Exec[x]
	}
	if v.speed != nil {
		e *= v.speed[x]
	}
	return e
}

// comm is the transfer time of edge e from machine x to machine y.
func (v *values) comm(e, x, y int) float64 {
	if x == y {
		return 0
	}
	if v.commScale == nil {
		return v.p.edgeCost(e, x, y)
	}
	t := 0.0
	for _, d := range v.p.edges[e].items {
		t = max(t, v.commScale[d]*v.p.CommCost(x, y, v.p.g.Items[d].Size))
	}
	return t
}

// Baseline returns the static baseline mapping of section 4.3 (Wang et
// al.'s baseline) computed from the expected values: the subtasks are
// listed block by block, within a block by decreasing number of
// descendants (ties by index), and each in turn goes to the machine on
// which it would complete soonest given the machines' availability and the
// arrival of its inputs (ties: the lowest machine).
func Baseline(p *Problem) *Mapping {
	return baseline(&values{p: p})
}

// IdealMapping returns the paper's "ideal" reference: the baseline computed from
// the run-time values instead of the expected ones. It cannot be built in
// practice (the values are only known afterwards) and is not optimal.
func IdealMapping(p *Problem, rt *RunTimes) (*Mapping, error) {
	if err := rt.Validate(p); err != nil {
		return nil, err
	}
	return baseline(rt.values(p)), nil
}

// BaselineOrder returns the list order of the baseline: by block, then
// by decreasing number of descendants, then by index.
func BaselineOrder(p *Problem) []int {
	order := make([]int, 0, p.n)
	for _, blk := range p.blocks {
		b := append([]int(nil), blk...)
		sort.SliceStable(b, func(x, y int) bool { return p.desc[b[x]] > p.desc[b[y]] })
		order = append(order, b...)
	}
	return order
}

func baseline(v *values) *Mapping {
	p := v.p
	mp := newMapping(p)
	free := append([]float64(nil), p.avail...)
	for _, i := range BaselineOrder(p) {
		best, bestX, bestStart := math.Inf(1), 0, 0.0
		for x := 0; x < p.m; x++ {
			st := free[x]
			for _, d := range p.preds[i] {
				st = max(st, mp.Finish[d.task]+v.comm(d.edge, mp.Machine[d.task], x))
			}
			if ct := st + v.execTime(i, x); ct < best {
				best, bestX, bestStart = ct, x, st
			}
		}
		mp.assign(i, bestX, bestStart, best)
		free[bestX] = best
	}
	return mp
}

func newMapping(p *Problem) *Mapping {
	mp := &Mapping{Machine: make([]int, p.n), Order: make([][]int, p.m), Start: make([]float64, p.n), Finish: make([]float64, p.n)}
	for i := range mp.Machine {
		mp.Machine[i] = -1
	}
	return mp
}

func (mp *Mapping) assign(i, x int, start, finish float64) {
	mp.Machine[i] = x
	mp.Order[x] = append(mp.Order[x], i)
	mp.Start[i], mp.Finish[i] = start, finish
	mp.Makespan = max(mp.Makespan, finish)
}

// Clone returns a deep copy.
func (mp *Mapping) Clone() *Mapping {
	c := &Mapping{Machine: append([]int(nil), mp.Machine...), Order: make([][]int, len(mp.Order)),
		Start: append([]float64(nil), mp.Start...), Finish: append([]float64(nil), mp.Finish...), Makespan: mp.Makespan}
	for j, o := range mp.Order {
		c.Order[j] = append([]int(nil), o...)
	}
	return c
}

// Ranks returns the rank of every subtask under a mapping (section 3.2):
// the length of the critical path from the subtask to the exit node,
//
//	rank(s_i) = e_ix + max over s_j in iss(s_i) of (c_ij + rank(s_j)),
//
// where x is the machine of s_i, c_ij the transfer time from s_i's
// machine to s_j's, and the maximum is 0 for a subtask without successors
// (its only successor is the exit node, with no data and no work).
// Expected values are used.
func Ranks(p *Problem, mp *Mapping) ([]float64, error) {
	if err := mp.Validate(p); err != nil {
		return nil, err
	}
	return ranks(&values{p: p}, mp.Machine), nil
}

func ranks(v *values, machine []int) []float64 {
	p := v.p
	r := make([]float64, p.n)
	for k := p.n - 1; k >= 0; k-- {
		i := p.order[k]
		x := machine[i]
		tail := 0.0
		for _, d := range p.succs[i] {
			tail = max(tail, v.comm(d.edge, x, machine[d.task])+r[d.task])
		}
		r[i] = v.execTime(i, x) + tail
	}
	return r
}
