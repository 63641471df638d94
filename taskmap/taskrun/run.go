package taskrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
)

// Config configures Run. The zero value runs the CD hybrid remapper on
// rank 0 with expected times from the built-in speed probe. Every rank
// must pass the same configuration.
type Config struct {
	// Root is the rank that runs the mapper (concurrently with its own
	// share of the tasks). Zero means rank 0.
	Root int
	// Algorithm is taskmap.Static (the baseline mapping, sent at once),
	// taskmap.PS, taskmap.CS, taskmap.CD (the hybrid remapper: block k is
	// remapped when the first task of block k-1 starts) or taskmap.GS
	// (generational scheduling: the ready tasks are mapped again at every
	// start and completion). "" means taskmap.CD.
	Algorithm taskmap.Algorithm
	// SecondsPerUnit[r] is the expected time per unit of Task.Work on
	// rank r. nil means: measure it with Probe on every rank.
	SecondsPerUnit []float64
	// Probe measures this rank's seconds per unit of work. nil means a
	// built-in loop of multiply-adds (so a unit is one multiply-add).
	Probe func(ctx context.Context) (float64, error)
	// Profile gives seconds per unit of work per task kind and rank from
	// an earlier run (Result.Profile); where it has a value it takes
	// precedence over SecondsPerUnit and Probe. nil means none.
	Profile *Profile
	// Adapt rescales a rank's expected execution times by how much
	// slower or faster than expected its recent tasks ran (a running
	// average of measured / expected) before every remapping. The paper's
	// remapper does not; it only uses completion times. false means off.
	Adapt bool
	// Model is the communication model between the ranks. nil means the
	// communicator's (from netprobe) when it has one, else a uniform
	// 50 us + 1 GB/s.
	Model *collective.Model
	// Collect lists items that the root receives at the end
	// (Result.Items).
	Collect []ItemID
}

// DefaultConfig returns the zero Config with its defaults spelled out:
// CD on rank 0, expected times from DefaultProbe, no adaptation, the
// communicator's model.
func DefaultConfig() Config {
	return Config{Root: 0, Algorithm: taskmap.CD, Probe: DefaultProbe}
}

// Default communication model when neither Config nor the communicator
// has one.
const (
	DefaultLatency   = 50e-6
	DefaultBandwidth = 1e9
)

// Result is what an execution measured. Times are seconds since the
// start of the execution (a barrier after planning).
type Result struct {
	Algorithm taskmap.Algorithm
	// Makespan is the completion time of the last task.
	Makespan float64
	// Predicted is the baseline's predicted completion time from the
	// expected times (what the static mapping promised).
	Predicted float64
	// TasksPerRank and BusyPerRank are how many tasks each rank ran and
	// for how long in total.
	TasksPerRank []int
	BusyPerRank  []float64
	// Remaps is the number of remapping events and RemapSeconds the time
	// the root spent in them.
	Remaps       int
	RemapSeconds float64

	// Root only.
	Schedule *taskmap.Schedule // where and when every task ran
	Expected [][]float64       // the e_ij the mapper used
	Items    map[ItemID][]byte // the Config.Collect items
	Profile  *Profile          // measured seconds per unit of work
}

// Profile records measured speeds: for every task kind, the seconds per
// unit of work on every rank (0 where unknown). It is plain data; save it
// as JSON and pass it to the next run.
type Profile struct {
	SecondsPerUnit map[string][]float64 `json:"seconds_per_unit"`
}

func (c Config) normalize(size int) (Config, error) {
	if c.Algorithm == "" {
		c.Algorithm = taskmap.CD
	}
	switch c.Algorithm {
	case taskmap.Static, taskmap.PS, taskmap.CS, taskmap.CD, taskmap.GS:
	default:
		return c, invalid("algorithm %q: want static, ps, cs, cd or gs", c.Algorithm)
	}
	if c.Root < 0 || c.Root >= size {
		return c, invalid("root %d out of range [0,%d)", c.Root, size)
	}
	if c.SecondsPerUnit != nil {
		if len(c.SecondsPerUnit) != size {
			return c, invalid("%d seconds-per-unit values for %d ranks", len(c.SecondsPerUnit), size)
		}
		for r, v := range c.SecondsPerUnit {
			if !(v > 0) || math.IsInf(v, 0) {
				return c, invalid("seconds per unit of rank %d is %v: must be positive", r, v)
			}
		}
	}
	if c.Profile != nil {
		for k, v := range c.Profile.SecondsPerUnit {
			if len(v) != size {
				return c, invalid("profile of kind %q has %d ranks, the communicator %d", k, len(v), size)
			}
			for r, x := range v {
				if !(x >= 0) || math.IsInf(x, 0) {
					return c, invalid("profile of kind %q, rank %d: %v", k, r, x)
				}
			}
		}
	}
	if c.Model != nil {
		if err := c.Model.Validate(); err != nil {
			return c, invalid("model: %v", err)
		}
		if c.Model.Size() != size {
			return c, invalid("model of %d ranks for %d", c.Model.Size(), size)
		}
	}
	return c, nil
}

// Run executes the graph on the communicator's ranks and returns what it
// measured. It is collective: every rank calls it with the same graph and
// configuration. The root maps the tasks with the configured algorithm
// while they run and sends each rank its tasks; each rank runs its tasks
// in the order it received them, each as soon as its inputs are there;
// every output goes straight from its producer's rank to the ranks of its
// consumers. A task that fails aborts the execution on every rank.
func Run(ctx context.Context, c *comm.Comm, g *Graph, cfg *Config) (*Result, error) {
	if c == nil || g == nil {
		return nil, invalid("nil communicator or graph")
	}
	var conf Config
	if cfg != nil {
		conf = *cfg
	}
	size := c.Size()
	conf, localErr := checkLocal(conf, g, size)
	sub, err := c.Split(ctx, 0, c.Rank())
	if err != nil {
		return nil, fmt.Errorf("taskrun: %w", err)
	}
	defer sub.Close()
	if err := agree(ctx, sub, g, conf, localErr); err != nil {
		return nil, err
	}

	spu, err := speeds(ctx, sub, conf, size)
	if err != nil {
		return nil, err
	}
	tg, p, err := newProblem(c, g, conf, spu, size)
	if err != nil {
		return nil, err
	}
	prod, _ := g.producers()

	if err := sub.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("taskrun: %w", err)
	}
	ex := newExec(ctx, sub, g, conf.Root, time.Now())
	defer ex.cancel(nil)
	co, err := runTasks(ex, p, conf, prod)
	if err != nil {
		return nil, err
	}

	res := &Result{Algorithm: conf.Algorithm, Predicted: taskmap.Baseline(p).Makespan}
	if err := collectItems(ctx, ex, co, conf, prod, res); err != nil {
		return nil, err
	}
	if err := shareSummary(ctx, sub, conf.Root, co, g, tg, res); err != nil {
		return nil, err
	}
	return res, nil
}

// checkLocal normalizes the configuration and checks it, the graph, the
// collected items and the tasks' expected times on this rank alone, in
// that order. It returns the normalized configuration and the first check
// that failed, if any (for the items and the expected times, naming the
// last offender), which Run reports only once every rank has heard of it
// (see agree).
func checkLocal(conf Config, g *Graph, size int) (Config, error) {
	conf, localErr := conf.normalize(size)
	if localErr == nil {
		localErr = g.Validate()
	}
	if localErr == nil {
		for _, d := range conf.Collect {
			if int(d) < 0 || int(d) >= len(g.items) {
				localErr = invalid("collect: %s was not declared", g.itemName(d))
			}
		}
	}
	if localErr == nil {
		for i, t := range g.tasks {
			if t.Expected != nil && len(t.Expected) != size {
				localErr = invalid("%s has %d expected times for %d ranks", g.taskName(i), len(t.Expected), size)
			}
		}
	}
	return conf, localErr
}

// agree makes every rank of sub learn whether all of them have a valid
// graph and configuration (localErr is this rank's problem, if any) and
// the same ones (by fingerprint). It returns this rank's own problem
// first, else the first rank that differs.
func agree(ctx context.Context, sub *comm.Comm, g *Graph, conf Config, localErr error) error {
	ok := uint64(1)
	if localErr != nil {
		ok = 0
	}
	fp := g.fingerprint() ^ conf.fingerprint()
	all, err := comm.AllgathervSlice(ctx, sub, []uint64{ok, fp})
	if err != nil {
		return fmt.Errorf("taskrun: %w", err)
	}
	if localErr != nil {
		return localErr
	}
	for r, v := range all {
		if len(v) != 2 || v[0] != 1 {
			return invalid("rank %d declared an invalid graph or configuration", r)
		}
		if v[1] != fp {
			return invalid("rank %d declared another graph or configuration than rank %d", r, sub.Rank())
		}
	}
	return nil
}

// speeds returns every rank's seconds per unit of work: the configured
// ones, or, without them, what each rank's probe measured, gathered on
// every rank. A failed probe fails Run on every rank.
func speeds(ctx context.Context, sub *comm.Comm, conf Config, size int) ([]float64, error) {
	if conf.SecondsPerUnit != nil {
		return conf.SecondsPerUnit, nil
	}
	probe := conf.Probe
	if probe == nil {
		probe = DefaultProbe
	}
	v, perr := probe(ctx)
	if perr == nil && (!(v > 0) || math.IsInf(v, 0)) {
		perr = fmt.Errorf("probe measured %v seconds per unit", v)
	}
	if perr != nil {
		v = math.NaN()
	}
	got, err := comm.AllgathervSlice(ctx, sub, []float64{v})
	if err != nil {
		return nil, fmt.Errorf("taskrun: %w", err)
	}
	if perr != nil {
		return nil, fmt.Errorf("taskrun: rank %d: speed probe: %w", sub.Rank(), perr)
	}
	spu := make([]float64, size)
	for r, x := range got {
		if len(x) != 1 || math.IsNaN(x[0]) {
			return nil, fmt.Errorf("taskrun: rank %d's speed probe failed", r)
		}
		spu[r] = x[0]
	}
	return spu, nil
}

// newProblem builds the mapping problem: the task graph with every
// task's expected time on every rank (Task.Expected, else its work times
// the profiled speed of its kind, else times spu) and the communication
// model (the configured one, else c's restricted to its ranks).
func newProblem(c *comm.Comm, g *Graph, conf Config, spu []float64, size int) (*taskmap.Graph, *taskmap.Problem, error) {
	exp := func(i, r int) float64 {
		t := &g.tasks[i]
		if t.Expected != nil {
			return t.Expected[r]
		}
		if conf.Profile != nil {
			if v := conf.Profile.SecondsPerUnit[t.kind()]; v != nil && v[r] > 0 {
				return t.Work * v[r]
			}
		}
		return t.Work * spu[r]
	}
	tg, err := g.taskmapGraph(exp, size)
	if err != nil {
		return nil, nil, err
	}
	model := conf.Model
	if model == nil {
		model = subModel(c)
	}
	p, err := taskmap.NewProblem(tg, model, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("taskrun: %w", err)
	}
	return tg, p, nil
}

// runTasks runs this rank's share of the execution until every task has
// finished or one has failed: the control and work loops, and on the
// root the coordinator (returned; nil elsewhere). After a failure it
// cancels the execution; either way it waits for the sends and receives
// in flight. The error is the most telling of the three loops' (see
// firstErr).
func runTasks(ex *exec, p *taskmap.Problem, conf Config, prod []int) (*coord, error) {
	var co *coord
	var wg sync.WaitGroup
	var ctlErr, workErr, coErr error
	wg.Add(2)
	go func() { defer wg.Done(); ctlErr = ex.control() }()
	go func() { defer wg.Done(); workErr = ex.work() }()
	if ex.c.Rank() == conf.Root {
		co = newCoord(ex, p, conf.Algorithm, conf.Adapt, conf.Collect, prod)
		wg.Add(1)
		go func() { defer wg.Done(); coErr = co.run() }()
	}
	wg.Wait()
	if ctlErr == nil && workErr == nil && coErr == nil {
		// Every task finished, so every item sent was received; wait for
		// the sends to complete.
		ex.io.Wait()
	} else {
		ex.cancel(errors.Join(ctlErr, workErr, coErr))
		ex.io.Wait()
	}
	return co, firstErr(workErr, coErr, ctlErr)
}

// collectItems gathers the Config.Collect items into res.Items at the
// root (co, the coordinator, is non-nil there), each from the rank that
// produced it; every other rank sends the items the root's stop message
// asked it for (ex.stopItems).
func collectItems(ctx context.Context, ex *exec, co *coord, conf Config, prod []int, res *Result) error {
	sub, g := ex.c, ex.g // the execution's private communicator and the graph
	if sub.Rank() == conf.Root {
		res.Items = map[ItemID][]byte{}
		for _, d := range conf.Collect {
			owner := co.machine[prod[d]]
			if owner == conf.Root {
				ex.mu.Lock()
				res.Items[d] = ex.slots[int(d)].data
				ex.mu.Unlock()
				continue
			}
			b, _, err := sub.Recv(ctx, owner, collectTag(int(d)))
			if err != nil {
				return fmt.Errorf("taskrun: collecting %s from rank %d: %w", g.itemName(d), owner, err)
			}
			res.Items[d] = b
		}
		return nil
	}
	for _, d := range ex.stopItems {
		ex.mu.Lock()
		s := ex.slots[d]
		ex.mu.Unlock()
		if s == nil || !s.have {
			return fmt.Errorf("taskrun: internal error: rank %d was asked for %s, which it does not hold", sub.Rank(), g.itemName(ItemID(d)))
		}
		if err := sub.Send(ctx, conf.Root, collectTag(d), s.data); err != nil {
			return fmt.Errorf("taskrun: sending %s to the root: %w", g.itemName(ItemID(d)), err)
		}
	}
	return nil
}

// shareSummary fills res with the execution's summary, which the root
// (where co, the coordinator, is non-nil) computes from its schedule and
// broadcasts: the makespan, the remappings, and every rank's task count
// and busy time. The root also fills in the schedule, the expected times
// of tg and the measured profile.
func shareSummary(ctx context.Context, sub *comm.Comm, root int, co *coord, g *Graph, tg *taskmap.Graph, res *Result) error {
	size := sub.Size()
	var summary []float64
	if co != nil {
		s := co.schedule()
		res.Schedule, res.Remaps, res.RemapSeconds = s, co.remaps, co.remapTotal.Seconds()
		res.Expected = make([][]float64, len(tg.Tasks))
		for i := range tg.Tasks {
			res.Expected[i] = tg.Tasks[i].Exec
		}
		res.Profile = profileOf(g, s, size)
		summary = append(summary, s.Makespan, float64(res.Remaps), res.RemapSeconds)
		ran := make([]float64, size)
		busy := make([]float64, size)
		for i, x := range s.Machine {
			ran[x]++
			busy[x] += s.Finish[i] - s.Start[i]
		}
		summary = append(append(summary, ran...), busy...)
	}
	summary, err := comm.BcastSlice(ctx, sub, root, summary)
	if err != nil {
		return fmt.Errorf("taskrun: %w", err)
	}
	if len(summary) != 3+2*size {
		return fmt.Errorf("taskrun: malformed summary from the root")
	}
	res.Makespan, res.Remaps, res.RemapSeconds = summary[0], int(summary[1]), summary[2]
	res.TasksPerRank = make([]int, size)
	res.BusyPerRank = make([]float64, size)
	for r := 0; r < size; r++ {
		res.TasksPerRank[r] = int(summary[3+r])
		res.BusyPerRank[r] = summary[3+size+r]
	}
	return nil
}

func firstErr(errs ...error) error {
	// A TaskError says most; an AbortError is what others saw.
	for _, e := range errs {
		var te *TaskError
		if errors.As(e, &te) {
			return e
		}
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (c Config) fingerprint() uint64 {
	var h uint64 = 14695981039346656037
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	mix(fmt.Sprintf("%s|%d|%v|%v|%v", c.Algorithm, c.Root, c.Adapt, c.SecondsPerUnit, c.Collect))
	if c.Profile != nil {
		kinds := make([]string, 0, len(c.Profile.SecondsPerUnit))
		for k := range c.Profile.SecondsPerUnit {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			mix(fmt.Sprintf("%q%v", k, c.Profile.SecondsPerUnit[k]))
		}
	}
	return h
}

// subModel returns the communicator's model restricted to its ranks, or
// the default uniform model.
func subModel(c *comm.Comm) *collective.Model {
	n := c.Size()
	w := c.Model()
	if w == nil || w.Latency == nil || w.Bandwidth == nil {
		return collective.NewUniformModel(n, DefaultLatency, DefaultBandwidth)
	}
	m := &collective.Model{Latency: collective.Matrix(n, 0), Bandwidth: collective.Matrix(n, 0)}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			gi, gj := c.WorldRank(i), c.WorldRank(j)
			m.Latency[i][j] = w.Latency[gi][gj]
			m.Bandwidth[i][j] = w.Bandwidth[gi][gj]
		}
	}
	if m.Validate() != nil {
		return collective.NewUniformModel(n, DefaultLatency, DefaultBandwidth)
	}
	return m
}

// profileOf measures seconds per unit of work per kind and rank.
func profileOf(g *Graph, s *taskmap.Schedule, size int) *Profile {
	type acc struct{ d, w []float64 }
	kinds := map[string]*acc{}
	for i, x := range s.Machine {
		t := &g.tasks[i]
		if t.Work <= 0 {
			continue
		}
		a := kinds[t.kind()]
		if a == nil {
			a = &acc{d: make([]float64, size), w: make([]float64, size)}
			kinds[t.kind()] = a
		}
		a.d[x] += s.Finish[i] - s.Start[i]
		a.w[x] += t.Work
	}
	p := &Profile{SecondsPerUnit: map[string][]float64{}}
	for k, a := range kinds {
		v := make([]float64, size)
		for r := range v {
			if a.w[r] > 0 {
				v[r] = a.d[r] / a.w[r]
			}
		}
		p.SecondsPerUnit[k] = v
	}
	return p
}

// DefaultProbe measures this rank's seconds per multiply-add with a
// dependent chain over a small array (the best of three runs of about a
// millisecond each).
func DefaultProbe(ctx context.Context) (float64, error) {
	const n = 1 << 10
	const rounds = 256
	var a [n]float64
	for i := range a {
		a[i] = 1 + float64(i)*1e-6
	}
	best := math.Inf(1)
	sink := 0.0
	for rep := 0; rep < 3; rep++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		x := 0.5
		for r := 0; r < rounds; r++ {
			for i := range a {
				x = x*a[i] + 1e-9
			}
			x *= 1e-3
		}
		sink += x
		best = min(best, time.Since(t0).Seconds())
	}
	if sink == 42 { // keep the loop
		best++
	}
	return best / float64(n*rounds), nil
}
