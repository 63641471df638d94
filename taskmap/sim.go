package taskmap

import (
	"fmt"
	"math"
)

// Schedule is what an execution (simulated, or recorded by the run-time
// executor) did: where and when every subtask ran.
type Schedule struct {
	Algorithm Algorithm `json:"algorithm"`
	// Machine[i] is the machine subtask i ran on.
	Machine []int `json:"machine"`
	// Order[j] lists the subtasks machine j ran, in order.
	Order [][]int `json:"order"`
	// Start and Finish are the run-time start and completion of every
	// subtask.
	Start  []float64 `json:"start"`
	Finish []float64 `json:"finish"`
	// Makespan is the completion time of the application.
	Makespan float64 `json:"makespan"`
	// Remaps is the number of remapping events (blocks remapped by the
	// hybrid remapper, mapping generations of GS).
	Remaps int `json:"remaps"`
}

// SimOptions tune Simulate. The zero value simulates the algorithm with
// the baseline as initial mapping.
type SimOptions struct {
	// Initial is the initial mapping of Static and of the hybrid variants;
	// nil means Baseline(p).
	Initial *Mapping
	// Wrap, when set, is called around every remapping event with the
	// block being remapped (hybrid) or -1 (GS); it must call remap once.
	// It lets a caller time the remapper without the package reading a
	// clock.
	Wrap func(block int, remap func())

	// trace, for tests, sees every hybrid remapping just before it runs.
	trace func(block int, obs *Observation, r *Remapper)
}

// Simulate executes the problem with algorithm a under the run-time
// values rt and returns the schedule (section 4). Every machine runs the
// subtasks mapped to it in the mapping's order, non-preemptively; a
// subtask starts when its machine is free (and available, A[j]) and every
// input item has arrived; an item arrives at its consumer's machine the
// run-time transfer time after its producer completes, or, under GS,
// after the consumer was last mapped, if that is later.
//
// Static runs the initial mapping. PS, CS and CD run the initial mapping
// for block 0 and remap block k when the first subtask of block k-1
// starts (the remapping itself takes no simulated time: it overlaps with
// execution). GS maps the ready subtasks at time 0 and at every
// completion. Ideal runs IdealMapping. An initial mapping whose machine
// orders deadlock is reported as an error.
func Simulate(p *Problem, rt *RunTimes, a Algorithm, opt SimOptions) (*Schedule, error) {
	if err := rt.Validate(p); err != nil {
		return nil, err
	}
	init := opt.Initial
	switch a {
	case Static, PS, CS, CD:
		if init == nil {
			init = Baseline(p)
		} else if err := init.Validate(p); err != nil {
			return nil, err
		}
	case Ideal:
		init = baseline(rt.values(p))
	case GS:
	default:
		return nil, invalid("unknown algorithm %q", a)
	}
	s := newSim(p, rt, a, opt.Wrap)
	s.trace = opt.trace
	switch {
	case a == Static || a == Ideal:
		for x, ord := range init.Order {
			for _, i := range ord {
				s.place(i, x, 0)
			}
		}
	case a.IsHybrid():
		r, err := NewRemapper(p, init, a)
		if err != nil {
			return nil, err
		}
		s.remapper = r
		s.remapped = make([]bool, len(p.blocks))
		for x, ord := range r.Mapping().Order {
			for _, i := range ord {
				s.place(i, x, 0)
			}
		}
	case a == GS:
		s.gs = true
		for _, i := range p.order {
			if len(p.preds[i]) == 0 {
				s.ready = append(s.ready, i)
			}
		}
		s.generation()
	}
	return s.run()
}

// sim is one discrete-event simulation.
type sim struct {
	p    *Problem
	rt   *values
	algo Algorithm
	wrap func(int, func())

	now      float64
	machine  []int
	queue    [][]int
	head     []int
	running  []int     // task running on each machine, or -1
	freeAt   []float64 // when each machine finished its last task
	depart   []float64 // earliest departure of a task's inputs (GS)
	waiting  []int     // unfinished predecessors
	start    []float64
	finish   []float64
	done     int
	remaps   int
	events   minHeap[event] // ordered by eventLess
	obs      *Observation
	remapper *Remapper
	remapped []bool
	gs       bool
	ready    []int // GS: ready and not started, first come first served
	exp      values
	gsFree   []float64
	err      error
	trace    func(int, *Observation, *Remapper)
}

func newSim(p *Problem, rt *RunTimes, a Algorithm, wrap func(int, func())) *sim {
	s := &sim{p: p, rt: rt.values(p), algo: a, wrap: wrap, exp: values{p: p},
		machine: make([]int, p.n), queue: make([][]int, p.m), head: make([]int, p.m),
		running: make([]int, p.m), freeAt: append([]float64(nil), p.avail...),
		depart: make([]float64, p.n), waiting: make([]int, p.n), obs: NewObservation(p.n),
		events: minHeap[event]{less: eventLess}}
	s.start, s.finish = s.obs.Start, s.obs.Finish
	for i := range s.machine {
		s.machine[i] = -1
		s.waiting[i] = len(p.preds[i])
	}
	for x := range s.running {
		s.running[x] = -1
	}
	return s
}

// place appends task i to machine x's queue; its inputs may leave their
// producers from time dep on.
func (s *sim) place(i, x int, dep float64) {
	s.machine[i] = x
	s.depart[i] = dep
	s.queue[x] = append(s.queue[x], i)
}

const (
	evFinish = iota // a task completes
	evTry           // a machine may be able to start its next task
)

type event struct {
	t    float64
	kind int
	id   int // task (finish) or machine (try)
}

func (s *sim) run() (*Schedule, error) {
	for x := 0; x < s.p.m; x++ {
		s.try(x)
	}
	for s.events.len() > 0 {
		ev := s.events.pop()
		s.now = ev.t
		switch ev.kind {
		case evFinish:
			s.complete(ev.id)
		case evTry:
			s.try(ev.id)
		}
		if s.err != nil {
			return nil, s.err
		}
	}
	if s.done != s.p.n {
		for x := 0; x < s.p.m; x++ {
			if s.head[x] < len(s.queue[x]) {
				i := s.queue[x][s.head[x]]
				return nil, invalid("the mapping deadlocks: machine %d waits for %s, whose inputs never come (%d of %d tasks done)", x, s.p.g.taskName(i), s.done, s.p.n)
			}
		}
		return nil, fmt.Errorf("taskmap: internal error: %d of %d tasks done and no machine waits", s.done, s.p.n)
	}
	sch := &Schedule{Algorithm: s.algo, Machine: s.machine, Order: make([][]int, s.p.m), Start: s.start, Finish: s.finish, Remaps: s.remaps}
	for x := range sch.Order {
		sch.Order[x] = s.queue[x][:s.head[x]]
	}
	for _, f := range s.finish {
		sch.Makespan = max(sch.Makespan, f)
	}
	return sch, nil
}

// try starts the next task of machine x if it can start now, or
// schedules another try when it will be able to.
func (s *sim) try(x int) {
	if s.running[x] >= 0 || s.head[x] >= len(s.queue[x]) {
		return
	}
	i := s.queue[x][s.head[x]]
	if s.waiting[i] > 0 {
		return // tried again when its last predecessor completes
	}
	t := max(s.now, s.freeAt[x])
	for _, d := range s.p.preds[i] {
		from := s.machine[d.task]
		t = max(t, max(s.finish[d.task], s.depart[i])+s.rt.comm(d.edge, from, x))
	}
	if t > s.now {
		s.events.push(event{t: t, kind: evTry, id: x})
		return
	}
	s.head[x]++
	s.running[x] = i
	s.start[i] = s.now
	s.events.push(event{t: s.now + s.rt.execTime(i, x), kind: evFinish, id: i})
	if s.gs {
		s.unready(i)
	}
	if s.remapper != nil {
		s.onStart(i)
	}
}

func (s *sim) complete(i int) {
	x := s.machine[i]
	s.finish[i] = s.now
	s.running[x] = -1
	s.freeAt[x] = s.now
	s.done++
	for _, d := range s.p.succs[i] {
		s.waiting[d.task]--
		if s.gs && s.waiting[d.task] == 0 {
			s.ready = append(s.ready, d.task)
		}
	}
	if s.gs {
		s.generation()
	}
	for y := 0; y < s.p.m; y++ {
		s.try(y)
	}
}

// onStart remaps block b+1 when task i is the first of its block b to
// start.
func (s *sim) onStart(i int) {
	k := s.p.block[i] + 1
	if k >= len(s.p.blocks) || s.remapped[k] {
		return
	}
	s.remapped[k] = true
	s.obs.Now = s.now
	if s.trace != nil {
		s.trace(k, s.obs, s.remapper)
	}
	var tasks []int
	var err error
	remap := func() { tasks, err = s.remapper.Remap(k, s.obs) }
	if s.wrap != nil {
		s.wrap(k, remap)
	} else {
		remap()
	}
	if err != nil {
		// Blocks are remapped in order by construction (a block's first
		// start needs a finished task of the block before): this is a bug.
		s.err = fmt.Errorf("taskmap: internal error: %w", err)
		return
	}
	s.remaps++
	m := s.remapper.Mapping()
	for _, t := range tasks {
		s.place(t, m.Machine[t], 0)
	}
}

// unready removes a started task from the GS ready list.
func (s *sim) unready(i int) {
	for k, r := range s.ready {
		if r == i {
			s.ready = append(s.ready[:k], s.ready[k+1:]...)
			return
		}
	}
}

// generation is one GS remapping event: every ready task that has not
// started is taken off its machine and mapped again, first come first
// served, to the machine where it is expected to complete soonest.
func (s *sim) generation() {
	if len(s.ready) == 0 {
		return
	}
	gen := func() {
		p := s.p
		if s.gsFree == nil {
			s.gsFree = make([]float64, p.m)
		}
		for x := 0; x < p.m; x++ {
			// Drop the queued (not started) tasks: they are all ready
			// and are mapped again below.
			s.queue[x] = s.queue[x][:s.head[x]]
			f := max(s.now, s.freeAt[x])
			if r := s.running[x]; r >= 0 {
				f = max(f, s.start[r]+s.exp.execTime(r, x))
			}
			s.gsFree[x] = f
		}
		for _, i := range s.ready {
			old := s.machine[i]
			x := gsBest(&s.exp, i, s.gsFree, s.machine, s.finish, func(x int) float64 {
				if x == old {
					return s.depart[i]
				}
				return s.now
			})
			if x != old {
				s.place(i, x, s.now)
			} else {
				s.place(i, x, s.depart[i])
			}
		}
	}
	if s.wrap != nil {
		s.wrap(-1, gen)
	} else {
		gen()
	}
	s.remaps++
}

// gsBest picks the machine where ready task i completes soonest given the
// machines' free times (updated), the machines and completion times of
// its predecessors, and when its inputs may leave for machine x.
func gsBest(v *values, i int, free []float64, machine []int, finish []float64, depart func(x int) float64) int {
	p := v.p
	best, bestX := math.Inf(1), 0
	for x := 0; x < p.m; x++ {
		st := free[x]
		dep := depart(x)
		for _, d := range p.preds[i] {
			st = max(st, max(finish[d.task], dep)+v.comm(d.edge, machine[d.task], x))
		}
		if ct := st + v.execTime(i, x); ct < best {
			best, bestX = ct, x
		}
	}
	free[bestX] = best
	return bestX
}

// GSMap is Generational Scheduling's auxiliary scheduler for a live
// executor: it maps the ready subtasks, in the given (first come first
// served) order, each to the machine where it is expected to complete
// soonest, and returns their machines. free[x] is when machine x can start
// new work (it is updated); machine and obs give the machines and
// run-time completion times of the predecessors, all completed; inputs
// leave their producers at obs.Now at the earliest. speed, if not nil,
// multiplies the expected execution times on every machine (see
// Remapper.SetSpeed).
func GSMap(p *Problem, ready []int, free []float64, machine []int, obs *Observation, speed []float64) ([]int, error) {
	if err := obs.check(p); err != nil {
		return nil, err
	}
	if len(free) != p.m || len(machine) != p.n || (speed != nil && len(speed) != p.m) {
		return nil, invalid("GSMap: %d free times and %d speeds for %d machines, %d machines for %d tasks", len(free), len(speed), p.m, len(machine), p.n)
	}
	for x, f := range speed {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, invalid("GSMap: speed factor %v of machine %d", f, x)
		}
	}
	v := &values{p: p, speed: speed}
	out := make([]int, len(ready))
	for k, i := range ready {
		if i < 0 || i >= p.n {
			return nil, invalid("GSMap: task %d does not exist", i)
		}
		for _, d := range p.preds[i] {
			if math.IsNaN(obs.Finish[d.task]) || machine[d.task] < 0 || machine[d.task] >= p.m {
				return nil, invalid("GSMap: %s is not ready: %s has not completed on a known machine", p.g.taskName(i), p.g.taskName(d.task))
			}
		}
		out[k] = gsBest(v, i, free, machine, obs.Finish, func(int) float64 { return obs.Now })
	}
	return out, nil
}

// eventLess orders events by time, then completions before tries, then
// id, so simulations are deterministic.
func eventLess(x, y event) bool {
	if x.t != y.t {
		return x.t < y.t
	}
	if x.kind != y.kind {
		return x.kind < y.kind
	}
	return x.id < y.id
}
