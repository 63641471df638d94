package taskrun

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
)

// coord is the mapper, run by the root concurrently with its own worker:
// it sends every rank its tasks (in the rank's order) and tells producers
// where their outputs go, collects the ranks' start and completion
// reports, and remaps with them.
type coord struct {
	ex      *exec
	p       *taskmap.Problem
	algo    taskmap.Algorithm
	adapt   bool
	collect []ItemID

	prod     []int // producer of every item
	obs      *taskmap.Observation
	machine  []int
	fwd      map[[2]int]bool // (item, rank) already forwarded
	finished int

	rem *taskmap.Remapper

	// Generational scheduling.
	ready    []int // ready and not dispatched, first come first served
	waiting  []int // unfinished predecessors
	queued   []int // dispatched and not started, per rank
	running  []int // per rank, or -1
	isQueued []int // the dispatched, not started task of each rank, or -1

	speed      []float64 // measured / expected, per rank (Adapt)
	samples    []int
	remaps     int
	remapTotal time.Duration
}

func newCoord(ex *exec, p *taskmap.Problem, algo taskmap.Algorithm, adapt bool, collect []ItemID, prod []int) *coord {
	n, m := p.Tasks(), p.Machines()
	co := &coord{ex: ex, p: p, algo: algo, adapt: adapt, collect: collect, prod: prod,
		obs: taskmap.NewObservation(n), machine: make([]int, n), fwd: map[[2]int]bool{},
		speed: make([]float64, m), samples: make([]int, m)}
	for i := range co.machine {
		co.machine[i] = -1
	}
	for x := range co.speed {
		co.speed[x] = 1
	}
	return co
}

// abort tells every rank to stop (best effort) and returns err.
func (co *coord) abort(err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(co.ex.ctx), 5*time.Second)
	defer cancel()
	b := (&msg{kind: msgAbort, message: err.Error()}).encode()
	for r := 0; r < co.ex.size; r++ {
		co.ex.c.Send(ctx, r, tagCtl, b)
	}
	return err
}

func (co *coord) send(r int, m *msg) error {
	if err := co.ex.c.Send(co.ex.ctx, r, tagCtl, m.encode()); err != nil {
		return fmt.Errorf("taskrun: root: sending orders to rank %d: %w", r, err)
	}
	return nil
}

// assign sends task i to the end of rank r's queue, after telling the
// producers of its inputs to send them to r.
func (co *coord) assign(i, r int) error {
	co.machine[i] = r
	t := &co.ex.g.tasks[i]
	a := &msg{kind: msgAssign, task: i}
	for _, d := range t.In {
		src := co.machine[co.prod[d]]
		if src < 0 {
			return fmt.Errorf("taskrun: internal error: %s assigned before the producer of %s", co.ex.g.taskName(i), co.ex.g.itemName(d))
		}
		a.inputs = append(a.inputs, [2]int{int(d), src})
		if src != r && !co.fwd[[2]int{int(d), r}] {
			co.fwd[[2]int{int(d), r}] = true
			if err := co.send(src, &msg{kind: msgForward, item: int(d), rank: r}); err != nil {
				return err
			}
		}
	}
	return co.send(r, a)
}

func (co *coord) run() error {
	if err := co.loop(); err != nil {
		if co.ex.ctx.Err() == nil {
			return co.abort(err)
		}
		return err
	}
	return nil
}

func (co *coord) loop() error {
	p := co.p
	switch {
	case co.algo == taskmap.Static:
		// In the baseline's list order, so producers are placed before
		// their consumers (each rank's order is the same).
		mp := taskmap.Baseline(p)
		for _, i := range taskmap.BaselineOrder(p) {
			if err := co.assign(i, mp.Machine[i]); err != nil {
				return err
			}
		}
	case co.algo.IsHybrid():
		var err error
		if co.rem, err = taskmap.NewRemapper(p, nil, co.algo); err != nil {
			return err
		}
		for r, ord := range co.rem.Mapping().Order {
			for _, i := range ord {
				if err := co.assign(i, r); err != nil {
					return err
				}
			}
		}
	case co.algo == taskmap.GS:
		m := p.Machines()
		co.waiting = make([]int, p.Tasks())
		co.queued, co.running, co.isQueued = make([]int, m), make([]int, m), make([]int, m)
		for x := 0; x < m; x++ {
			co.running[x], co.isQueued[x] = -1, -1
		}
		for i := 0; i < p.Tasks(); i++ {
			co.waiting[i] = len(p.Preds(i))
			if co.waiting[i] == 0 {
				co.ready = append(co.ready, i)
			}
		}
		if err := co.generation(); err != nil {
			return err
		}
	}
	for co.finished < p.Tasks() {
		b, st, err := co.ex.c.Recv(co.ex.ctx, comm.AnySource, tagReport)
		if err != nil {
			return fmt.Errorf("taskrun: root: waiting for reports: %w", err)
		}
		m, err := decode(b)
		if err != nil {
			return fmt.Errorf("taskrun: root: from rank %d: %w", st.Source, err)
		}
		if m.task < 0 || m.task >= p.Tasks() || co.machine[m.task] != st.Source {
			return fmt.Errorf("taskrun: root: rank %d reports task %d, which it was not assigned", st.Source, m.task)
		}
		switch m.kind {
		case msgStarted:
			co.obs.Start[m.task] = m.t0
			if err := co.started(m.task, st.Source); err != nil {
				return err
			}
		case msgFinished:
			co.obs.Start[m.task], co.obs.Finish[m.task] = m.t0, m.t1
			co.finished++
			co.learn(m.task, st.Source, m.t1-m.t0)
			if err := co.completed(m.task, st.Source); err != nil {
				return err
			}
		case msgFailed:
			return co.abortWith(m.message)
		default:
			return fmt.Errorf("taskrun: root: unexpected message kind %d from rank %d", m.kind, st.Source)
		}
	}
	// Done: every rank sends the collected items it holds to the root.
	stop := make([][]int, co.ex.size)
	for _, d := range co.collect {
		if r := co.machine[co.prod[d]]; r != co.ex.root {
			stop[r] = append(stop[r], int(d))
		}
	}
	for r := 0; r < co.ex.size; r++ {
		if err := co.send(r, &msg{kind: msgStop, items: stop[r]}); err != nil {
			return err
		}
	}
	return nil
}

// abortWith aborts every rank because a task failed.
func (co *coord) abortWith(reason string) error {
	co.abort(fmt.Errorf("%s", reason))
	return &AbortError{Reason: reason}
}

// learn updates rank r's speed factor from a measured execution.
func (co *coord) learn(i, r int, d float64) {
	e := co.p.Exec(i, r)
	if !co.adapt || e <= 0 {
		return
	}
	ratio := d / e
	if co.samples[r] == 0 {
		co.speed[r] = ratio
	} else {
		co.speed[r] = 0.5*co.speed[r] + 0.5*ratio
	}
	co.samples[r]++
	co.speed[r] = min(max(co.speed[r], 1e-3), 1e3)
}

func (co *coord) now() float64 { return co.ex.now() }

func (co *coord) started(i, r int) error {
	switch {
	case co.rem != nil:
		// The first start in block b: remap block b+1 (and any block
		// before it that a delayed report left behind).
		b := co.p.Block(i)
		for !co.rem.Done() && co.rem.NextBlock() <= b+1 {
			if err := co.remap(co.rem.NextBlock()); err != nil {
				return err
			}
		}
	case co.algo == taskmap.GS:
		co.running[r] = i
		co.queued[r]--
		co.isQueued[r] = -1
		return co.generation()
	}
	return nil
}

func (co *coord) completed(i, r int) error {
	if co.algo != taskmap.GS {
		return nil
	}
	co.running[r] = -1
	for _, s := range co.p.Succs(i) {
		co.waiting[s]--
		if co.waiting[s] == 0 {
			co.ready = append(co.ready, s)
		}
	}
	return co.generation()
}

func (co *coord) remap(k int) error {
	if co.adapt {
		for x, f := range co.speed {
			if err := co.rem.SetSpeed(x, f); err != nil {
				return err
			}
		}
	}
	co.obs.Now = co.now()
	t0 := time.Now()
	order, err := co.rem.Remap(k, co.obs)
	co.remapTotal += time.Since(t0)
	co.remaps++
	if err != nil {
		return fmt.Errorf("taskrun: root: remapping block %d: %w", k, err)
	}
	mp := co.rem.Mapping()
	for _, s := range order {
		if err := co.assign(s, mp.Machine[s]); err != nil {
			return err
		}
	}
	return nil
}

// generation is a GS remapping event: the ready tasks not yet sent to a
// rank are mapped again, first come first served; every rank with
// nothing waiting in its queue then gets the first of the tasks mapped to
// it. A rank holds at most one task that has not started, so GS can move
// the others until the last moment.
func (co *coord) generation() error {
	if len(co.ready) == 0 {
		return nil
	}
	p := co.p
	now := co.now()
	var speed []float64
	if co.adapt {
		speed = co.speed
	}
	f := func(x int) float64 {
		if speed != nil {
			return speed[x]
		}
		return 1
	}
	free := make([]float64, p.Machines())
	for x := range free {
		free[x] = now
		if r := co.running[x]; r >= 0 {
			free[x] = max(now, co.obs.Start[r]+p.Exec(r, x)*f(x))
		}
		if q := co.isQueued[x]; q >= 0 {
			free[x] += p.Exec(q, x) * f(x)
		}
	}
	co.obs.Now = now
	t0 := time.Now()
	mach, err := taskmap.GSMap(p, co.ready, free, co.machine, co.obs, speed)
	co.remapTotal += time.Since(t0)
	co.remaps++
	if err != nil {
		return fmt.Errorf("taskrun: root: generational scheduling: %w", err)
	}
	var keep []int
	for k, i := range co.ready {
		x := mach[k]
		if co.queued[x] == 0 {
			co.queued[x]++
			co.isQueued[x] = i
			if err := co.assign(i, x); err != nil {
				return err
			}
			continue
		}
		keep = append(keep, i)
	}
	co.ready = keep
	return nil
}

// schedule returns what happened, for the root's Result.
func (co *coord) schedule() *taskmap.Schedule {
	s := &taskmap.Schedule{Algorithm: co.algo, Machine: co.machine, Order: make([][]int, co.p.Machines()),
		Start: co.obs.Start, Finish: co.obs.Finish, Remaps: co.remaps}
	for i, x := range co.machine {
		s.Order[x] = append(s.Order[x], i)
		s.Makespan = math.Max(s.Makespan, s.Finish[i])
	}
	for _, ord := range s.Order {
		sort.SliceStable(ord, func(a, b int) bool { return s.Start[ord[a]] < s.Start[ord[b]] })
	}
	return s
}
