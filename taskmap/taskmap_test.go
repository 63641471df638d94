package taskmap

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

func chain(n, m int) *Graph {
	g := &Graph{}
	for i := 0; i < n; i++ {
		e := make([]float64, m)
		for j := range e {
			e[j] = float64(1 + i + j)
		}
		g.Tasks = append(g.Tasks, Task{Exec: e})
		if i > 0 {
			g.Items = append(g.Items, Item{Size: 10, Producer: i - 1, Consumers: []int{i}})
		}
	}
	return g
}

func TestGraphValidateRejects(t *testing.T) {
	ok := func() *Graph { return chain(3, 2) }
	cases := map[string]func(g *Graph){
		"no tasks":            func(g *Graph) { g.Tasks = nil },
		"no machines":         func(g *Graph) { g.Tasks[0].Exec = nil },
		"ragged exec":         func(g *Graph) { g.Tasks[1].Exec = []float64{1} },
		"negative exec":       func(g *Graph) { g.Tasks[2].Exec[1] = -1 },
		"NaN exec":            func(g *Graph) { g.Tasks[2].Exec[0] = math.NaN() },
		"infinite exec":       func(g *Graph) { g.Tasks[2].Exec[0] = math.Inf(1) },
		"negative size":       func(g *Graph) { g.Items[0].Size = -5 },
		"unknown producer":    func(g *Graph) { g.Items[0].Producer = 7 },
		"negative producer":   func(g *Graph) { g.Items[0].Producer = -1 },
		"unknown consumer":    func(g *Graph) { g.Items[1].Consumers = []int{3} },
		"self consumer":       func(g *Graph) { g.Items[1].Consumers = []int{1} },
		"duplicate consumer":  func(g *Graph) { g.Items[0].Consumers = []int{1, 1} },
		"cycle":               func(g *Graph) { g.Items = append(g.Items, Item{Producer: 2, Consumers: []int{0}}) },
		"two-task cycle":      func(g *Graph) { g.Items = append(g.Items, Item{Producer: 1, Consumers: []int{0}}) },
		"consumer before nil": func(g *Graph) { g.Items[0].Consumers = []int{-2} },
	}
	require.NoError(t, ok().Validate())
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			g := ok()
			mutate(g)
			err := g.Validate()
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), "taskmap: ")
			_, err = NewProblem(g, nil, nil)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
	g := ok()
	g.Items = append(g.Items, Item{Producer: 2, Consumers: []int{0}})
	require.ErrorIs(t, g.Validate(), ErrCycle)
	var nilGraph *Graph
	require.ErrorIs(t, nilGraph.Validate(), ErrInvalid)
}

func TestNewProblemRejects(t *testing.T) {
	g := chain(3, 2)
	_, err := NewProblem(g, collective.NewUniformModel(3, 1e-3, 1e6), nil)
	require.ErrorIs(t, err, ErrInvalid, "model of the wrong size")
	_, err = NewProblem(g, &collective.Model{Latency: [][]float64{{0, 1}, {1, 0}}}, nil)
	require.ErrorIs(t, err, ErrInvalid, "model without bandwidth")
	_, err = NewProblem(g, nil, []float64{0})
	require.ErrorIs(t, err, ErrInvalid, "availability of the wrong size")
	_, err = NewProblem(g, nil, []float64{0, -1})
	require.ErrorIs(t, err, ErrInvalid, "negative availability")
	p, err := NewProblem(g, collective.NewUniformModel(2, 1e-3, 1e6), []float64{0, 5})
	require.NoError(t, err)
	require.Equal(t, 5.0, p.Avail(1))
	// The graph was copied.
	g.Tasks[0].Exec[0] = 100
	require.Equal(t, 1.0, p.Exec(0, 0))
}

func TestProblemCommCostMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, m := range []*collective.Model{
		collective.NewUniformModel(3, 1e-3, 1e6),
		{Bandwidth: [][]float64{{0, 1e5, 2e5}, {3e5, 0, 4e5}, {5e5, 6e5, 0}}},
		{Latency: [][]float64{{0, 1, 2}, {3, 0, 4}, {5, 6, 0}}, PerByte: [][]float64{{0, 1e-6, 2e-6}, {0, 0, 3e-6}, {1e-7, 0, 0}}},
	} {
		p, err := NewProblem(chain(2, 3), m, nil)
		require.NoError(t, err)
		for x := 0; x < 3; x++ {
			for y := 0; y < 3; y++ {
				b := rng.Int64N(1 << 20)
				require.InDelta(t, m.Cost(x, y, b), p.CommCost(x, y, b), 1e-12)
			}
		}
	}
}

// TestBlocksAndDescendants uses a seven-node DAG like the paper's Figure
// 1(a): a sink in an early block stays there, the exit node is in no
// block.
func TestBlocksAndDescendants(t *testing.T) {
	g := &Graph{}
	for i := 0; i < 7; i++ {
		g.Tasks = append(g.Tasks, Task{Exec: []float64{1}})
	}
	for _, e := range [][2]int{{0, 2}, {0, 3}, {1, 3}, {1, 4}, {2, 5}, {3, 5}, {3, 6}, {0, 6}} {
		g.Items = append(g.Items, Item{Producer: e[0], Consumers: []int{e[1]}})
	}
	p, err := NewProblem(g, nil, nil)
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1}, {2, 3, 4}, {5, 6}}, p.Blocks())
	require.Equal(t, []int{4, 4, 1, 2, 0, 0, 0}, []int{p.Descendants(0), p.Descendants(1), p.Descendants(2), p.Descendants(3), p.Descendants(4), p.Descendants(5), p.Descendants(6)})
	require.Equal(t, []int{0, 1}, p.Preds(3))
	require.Equal(t, []int{5, 6}, p.Succs(3))
	require.Equal(t, []int{0, 1, 3, 2, 4, 5, 6}, BaselineOrder(p))
	// Two items between the same pair make one dependency whose transfer
	// time is that of the larger.
	g.Items = append(g.Items, Item{Size: 1000, Producer: 0, Consumers: []int{2}})
	g.Tasks[0].Exec = []float64{1, 1}
	for i := 1; i < 7; i++ {
		g.Tasks[i].Exec = []float64{1, 1}
	}
	p, err = NewProblem(g, &collective.Model{Latency: [][]float64{{0, 1}, {1, 0}}, PerByte: [][]float64{{0, 0.01}, {0.01, 0}}}, nil)
	require.NoError(t, err)
	e := p.preds[2][0].edge
	require.Equal(t, int64(1000), p.edges[e].bytes)
	require.Equal(t, 11.0, p.edgeCost(e, 0, 1))
}

// bruteForce returns the least completion time over every assignment of
// tasks to machines and every topological list order (machines run their
// tasks in list order): the optimum among the non-preemptive, in-order
// schedules the algorithms produce.
func bruteForce(t *testing.T, p *Problem, rt *RunTimes) float64 {
	n, m := p.Tasks(), p.Machines()
	best := math.Inf(1)
	perm := make([]int, 0, n)
	used := make([]bool, n)
	var orders [][]int
	var gen func()
	gen = func() {
		if len(perm) == n {
			orders = append(orders, append([]int(nil), perm...))
			return
		}
		for i := 0; i < n; i++ {
			if used[i] {
				continue
			}
			ok := true
			for _, q := range p.Preds(i) {
				if !used[q] {
					ok = false
				}
			}
			if !ok {
				continue
			}
			used[i] = true
			perm = append(perm, i)
			gen()
			perm = perm[:len(perm)-1]
			used[i] = false
		}
	}
	gen()
	assign := make([]int, n)
	total := int(math.Pow(float64(m), float64(n)))
	for code := 0; code < total; code++ {
		c := code
		for i := range assign {
			assign[i] = c % m
			c /= m
		}
		for _, ord := range orders {
			mp := &Mapping{Machine: append([]int(nil), assign...), Order: make([][]int, m)}
			for _, i := range ord {
				mp.Order[assign[i]] = append(mp.Order[assign[i]], i)
			}
			s, err := Simulate(p, rt, Static, SimOptions{Initial: mp})
			require.NoError(t, err)
			best = min(best, s.Makespan)
		}
	}
	return best
}

func randomProblem(t testing.TB, rng *rand.Rand, cfg RandomConfig) *Problem {
	g, m, err := Random(cfg, rng)
	require.NoError(t, err)
	var avail []float64
	if rng.IntN(3) == 0 {
		avail = make([]float64, cfg.Machines)
		for j := range avail {
			avail[j] = 20 * rng.Float64()
		}
	}
	p, err := NewProblem(g, m, avail)
	require.NoError(t, err)
	return p
}

var testDists = []Distribution{{}, {Kind: Uniform, Neg: 30}, {Kind: Skewed, Neg: 25, Pos: 50}}

// TestPropertiesAgainstBruteForce: on small random problems every
// algorithm's simulated schedule is valid and lies between the exhaustive
// optimum and the lower bound.
func TestPropertiesAgainstBruteForce(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	rng := rand.New(rand.NewPCG(42, 1))
	for trial := 0; trial < trials; trial++ {
		cfg := RandomConfig{Tasks: 2 + rng.IntN(4), Machines: 1 + rng.IntN(2), PerBlock: 1 + 2*rng.Float64(), RatioMin: 0.5, RatioMax: 20}
		p := randomProblem(t, rng, cfg)
		rt, err := Draw(p, testDists[trial%len(testDists)], rng)
		require.NoError(t, err)
		opt := bruteForce(t, p, rt)
		lb, err := LowerBound(p, rt)
		require.NoError(t, err)
		require.LessOrEqual(t, lb, opt+1e-9, "trial %d", trial)
		for _, a := range Algorithms() {
			s, err := Simulate(p, rt, a, SimOptions{})
			require.NoError(t, err, "trial %d %s", trial, a)
			require.NoError(t, CheckSchedule(p, rt, s, 1e-9), "trial %d %s", trial, a)
			require.GreaterOrEqual(t, s.Makespan, opt-1e-9, "trial %d %s", trial, a)
		}
	}
}

// TestPropertiesRandom: larger random problems, every algorithm, every
// distribution: valid schedules, never below the lower bound; the static
// baseline run with exact values is its own prediction, and so is the
// ideal; simulations are deterministic.
func TestPropertiesRandom(t *testing.T) {
	sizes := []int{1, 2, 10, 40, 120}
	if testing.Short() {
		sizes = []int{1, 10, 40}
	}
	rng := rand.New(rand.NewPCG(42, 2))
	for _, n := range sizes {
		for _, m := range []int{1, 3, 8} {
			for di, d := range testDists {
				t.Run(fmt.Sprintf("n=%d/m=%d/%s", n, m, d), func(t *testing.T) {
					cfg := RandomConfig{Tasks: n, Machines: m, PerBlock: float64(1 + rng.IntN(8)), ExtraInputs: float64(rng.IntN(3)), RatioMin: 1, RatioMax: 200}
					p := randomProblem(t, rng, cfg)
					rt, err := Draw(p, d, rng)
					require.NoError(t, err)
					lb, err := LowerBound(p, rt)
					require.NoError(t, err)
					for _, a := range Algorithms() {
						s, err := Simulate(p, rt, a, SimOptions{})
						require.NoError(t, err, a)
						require.NoError(t, CheckSchedule(p, rt, s, 1e-6), a)
						require.GreaterOrEqual(t, s.Makespan, lb-1e-6, a)
						if a.IsHybrid() {
							require.Equal(t, len(p.Blocks())-1, s.Remaps)
						}
						again, err := Simulate(p, rt, a, SimOptions{})
						require.NoError(t, err)
						require.Equal(t, s, again, "deterministic")
					}
					base := Baseline(p)
					require.NoError(t, base.Validate(p))
					exact, err := Simulate(p, Expected(p), Static, SimOptions{})
					require.NoError(t, err)
					require.InDelta(t, base.Makespan, exact.Makespan, 1e-9)
					require.InDelta(t, base.Finish[0], exact.Finish[0], 1e-9)
					ideal, err := IdealMapping(p, rt)
					require.NoError(t, err)
					sIdeal, err := Simulate(p, rt, Ideal, SimOptions{})
					require.NoError(t, err)
					require.InDelta(t, ideal.Makespan, sIdeal.Makespan, 1e-9)
					if di == 0 {
						// The hybrid remapper keeps an initial mapping given
						// to it for block 0.
						s, err := Simulate(p, rt, CD, SimOptions{Initial: base})
						require.NoError(t, err)
						for _, i := range p.Blocks()[0] {
							require.Equal(t, base.Machine[i], s.Machine[i])
						}
					}
				})
			}
		}
	}
}

func TestSimulateRejects(t *testing.T) {
	p, err := NewProblem(chain(3, 2), nil, nil)
	require.NoError(t, err)
	rt := Expected(p)
	_, err = Simulate(p, rt, "fastest", SimOptions{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Simulate(p, &RunTimes{Exec: rt.Exec[:2]}, Static, SimOptions{})
	require.ErrorIs(t, err, ErrInvalid)
	bad := Expected(p)
	bad.Exec[1][0] = -3
	_, err = Simulate(p, bad, Static, SimOptions{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Simulate(p, &RunTimes{Exec: rt.Exec, Comm: []float64{1}}, Static, SimOptions{})
	require.ErrorIs(t, err, ErrInvalid)

	// A mapping that does not cover the graph, and one whose orders
	// deadlock (task 2 before task 1 on one machine, 1 after 2's input).
	_, err = Simulate(p, rt, Static, SimOptions{Initial: &Mapping{Machine: []int{0, 0, 0}, Order: [][]int{{0, 1}, nil}}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Simulate(p, rt, Static, SimOptions{Initial: &Mapping{Machine: []int{0, 0, 0}, Order: [][]int{{0, 2, 1}, nil}}})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "deadlocks")
	_, err = Simulate(p, rt, CD, SimOptions{Initial: &Mapping{Machine: []int{0, 5, 0}, Order: [][]int{{0, 2}, {1}}}})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestRemapperAPI(t *testing.T) {
	p := fig3Problem(t)
	_, err := NewRemapper(p, nil, GS)
	require.ErrorIs(t, err, ErrInvalid)
	r, err := NewRemapper(p, nil, CD)
	require.NoError(t, err)
	require.Equal(t, 1, r.NextBlock())
	require.False(t, r.Done())
	obs := NewObservation(p.Tasks())
	_, err = r.Remap(2, obs)
	require.ErrorIs(t, err, ErrInvalid, "out of order")
	_, err = r.Remap(1, &Observation{Start: obs.Start})
	require.ErrorIs(t, err, ErrInvalid, "short observation")
	bad := NewObservation(p.Tasks())
	bad.Now = math.NaN()
	_, err = r.Remap(1, bad)
	require.ErrorIs(t, err, ErrInvalid)
	for k := 1; k < len(p.Blocks()); k++ {
		_, err := r.Remap(k, obs)
		require.NoError(t, err)
	}
	require.True(t, r.Done())
	_, err = r.Remap(1, obs)
	require.ErrorIs(t, err, ErrInvalid, "already mapped")
	require.NoError(t, r.Mapping().Validate(p))
	require.ErrorIs(t, r.SetSpeed(5, 1), ErrInvalid)
	require.ErrorIs(t, r.SetSpeed(0, 0), ErrInvalid)
	require.ErrorIs(t, r.SetSpeed(0, math.Inf(1)), ErrInvalid)
	require.Contains(t, r.String(), "cd remapper")
}

// TestRemapperSpeed: a machine declared slower gets no more work in the
// next block when the other one is free.
func TestRemapperSpeed(t *testing.T) {
	g := &Graph{Tasks: []Task{{Exec: []float64{1, 1}}}}
	for i := 0; i < 8; i++ {
		g.Tasks = append(g.Tasks, Task{Exec: []float64{10, 10}})
		g.Items = append(g.Items, Item{Producer: 0, Consumers: []int{i + 1}})
	}
	p, err := NewProblem(g, nil, nil)
	require.NoError(t, err)
	count := func(slow float64) int {
		r, err := NewRemapper(p, nil, CD)
		require.NoError(t, err)
		require.NoError(t, r.SetSpeed(1, slow))
		obs := NewObservation(p.Tasks())
		obs.Start[0] = 0
		_, err = r.Remap(1, obs)
		require.NoError(t, err)
		return len(r.Mapping().Order[1])
	}
	require.Equal(t, 4, count(1))
	require.Equal(t, 2, count(3)) // 2 tasks: 61 on m1 against 71 for a 7th on m0
}

func TestGSMap(t *testing.T) {
	p := fig3Problem(t)
	obs := NewObservation(p.Tasks())
	obs.Now = 30
	obs.Start[0], obs.Finish[0] = 0, 30
	machine := []int{1, -1, -1, -1, -1, -1, -1}
	free := []float64{35, 30}
	// s2 (pred s0 on m1): m0 max(35, 32)+10 = 45, m1 30+15 = 45: tie, m0.
	out, err := GSMap(p, []int{2}, free, machine, obs, nil)
	require.NoError(t, err)
	require.Equal(t, []int{0}, out)
	require.Equal(t, []float64{45, 30}, free)
	_, err = GSMap(p, []int{3}, free, machine, obs, nil)
	require.ErrorIs(t, err, ErrInvalid, "s3 is not ready")
	_, err = GSMap(p, []int{9}, free, machine, obs, nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = GSMap(p, []int{2}, free[:1], machine, obs, nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = GSMap(p, []int{2}, []float64{35, 30}, machine, obs, []float64{1, 0})
	require.ErrorIs(t, err, ErrInvalid)
	// m0 three times slower: s2 goes to m1 (30+15 = 45 against 35+30).
	out, err = GSMap(p, []int{2}, []float64{35, 30}, machine, obs, []float64{3, 1})
	require.NoError(t, err)
	require.Equal(t, []int{1}, out)
}

func TestDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n = 200000
	for _, c := range []struct {
		d        Distribution
		lo, hi   float64
		mean, sd float64
	}{
		{Distribution{}, 0, math.Inf(1), 10, 10 / math.Sqrt2},
		{Distribution{Kind: Erlang2}, 0, math.Inf(1), 10, 10 / math.Sqrt2},
		{Distribution{Kind: Uniform, Neg: 40}, 6, 14, 10, 8 / math.Sqrt(12)},
		{Distribution{Kind: Skewed, Neg: 20, Pos: 40}, 8, 14, 11, 6 / math.Sqrt(12)},
	} {
		require.NoError(t, c.d.Validate())
		sum, sq := 0.0, 0.0
		for i := 0; i < n; i++ {
			v := c.d.Sample(rng, 10)
			require.True(t, v >= c.lo && v <= c.hi, "%s: %v", c.d, v)
			sum += v
			sq += v * v
		}
		mean := sum / n
		sd := math.Sqrt(sq/n - mean*mean)
		require.InDelta(t, c.mean, mean, 0.05, c.d.String())
		require.InDelta(t, c.sd, sd, 0.05, c.d.String())
	}
	for _, d := range []Distribution{{Kind: "normal"}, {Kind: Uniform, Neg: 120}, {Kind: Uniform, Neg: 10, Pos: 20}, {Kind: Skewed, Neg: -1}, {Kind: Erlang2, Pos: 3}} {
		require.ErrorIs(t, d.Validate(), ErrInvalid, d.String())
	}
}

func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, c := range []RandomConfig{
		{Tasks: 100, Machines: 10},
		{Tasks: 100, Machines: 10, PerBlock: 20},
		{Tasks: 500, Machines: 50, PerBlock: 5, ExtraInputs: -1},
		{Tasks: 1, Machines: 1},
		{Tasks: 30, Machines: 4, ItemMin: 0, ItemMax: 0, ExecMin: 5, ExecMax: 5, RatioMin: 1, RatioMax: 1},
	} {
		g, m, err := Random(c, rng)
		require.NoError(t, err)
		require.NoError(t, g.Validate())
		p, err := NewProblem(g, m, nil)
		require.NoError(t, err)
		cc, _ := c.withDefaults()
		require.Equal(t, min(max(int(math.Round(float64(c.Tasks)/cc.PerBlock)), 1), c.Tasks), len(p.Blocks()), "%+v", c)
		for _, tk := range g.Tasks {
			for _, e := range tk.Exec {
				require.True(t, e >= cc.ExecMin && e <= cc.ExecMax)
			}
		}
	}
	for _, c := range []RandomConfig{{}, {Tasks: 3, Machines: 1, PerBlock: 0.5}, {Tasks: 3, Machines: 1, ExecMin: 5, ExecMax: 1}, {Tasks: 3, Machines: 1, RatioMin: -1, RatioMax: 2}, {Tasks: 3, Machines: 1, ItemMin: 9, ItemMax: 1}, {Tasks: 3, Machines: 1, MaxOutDegree: -1}} {
		_, _, err := Random(c, rng)
		require.ErrorIs(t, err, ErrInvalid, "%+v", c)
	}
}

func TestCheckScheduleCatches(t *testing.T) {
	p := fig3Problem(t)
	rt := Expected(p)
	s, err := Simulate(p, rt, CD, SimOptions{})
	require.NoError(t, err)
	require.NoError(t, CheckSchedule(p, rt, s, 0))
	clone := func() *Schedule {
		c := *s
		c.Machine = append([]int(nil), s.Machine...)
		c.Start = append([]float64(nil), s.Start...)
		c.Finish = append([]float64(nil), s.Finish...)
		c.Order = [][]int{append([]int(nil), s.Order[0]...), append([]int(nil), s.Order[1]...)}
		return &c
	}
	bad := clone()
	bad.Start[6] -= 5 // s6 starts before its input arrives (and runs too long)
	require.Error(t, CheckSchedule(p, rt, bad, 0))
	bad = clone()
	bad.Order[0] = append(bad.Order[0], bad.Order[1][0])
	require.Error(t, CheckSchedule(p, rt, bad, 0))
	bad = clone()
	bad.Makespan++
	require.Error(t, CheckSchedule(p, rt, bad, 0))
	// Overlap on one machine: shift a task earlier by exactly its slack
	// plus one while keeping its duration.
	bad = clone()
	x := 0
	second := bad.Order[x][1]
	bad.Start[second] -= 1
	bad.Finish[second] -= 1
	require.Error(t, CheckSchedule(p, rt, bad, 0))
	require.True(t, errors.Is(CheckSchedule(p, rt, nil, 0), ErrInvalid))
}

// BenchmarkRemap times one block remapping with CD (the paper's Figure
// 9; its remapper took hundreds of milliseconds for 50 machines and 500
// subtasks on a 165 MHz UltraSPARC). block=500 remaps a single block of
// 500 subtasks; the others remap a typical block of a random graph.
func BenchmarkRemap(b *testing.B) {
	type bc struct {
		name            string
		tasks, machines int
		single          bool
		variant         Algorithm
	}
	cases := []bc{
		{"tasks=500/machines=50/block=500/cd", 501, 50, true, CD},
		{"tasks=500/machines=50/block=500/ps", 501, 50, true, PS},
		{"tasks=500/machines=50/random/cd", 500, 50, false, CD},
		{"tasks=200/machines=10/random/cd", 200, 10, false, CD},
		{"tasks=200/machines=50/random/cd", 200, 50, false, CD},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(9, 9))
			var g *Graph
			var m *collective.Model
			var err error
			if c.single {
				// One source feeding 500 subtasks (block 1), which feed 25
				// sinks (block 2).
				g, m, err = Random(RandomConfig{Tasks: c.tasks + 25, Machines: c.machines, PerBlock: 1}, rng)
				require.NoError(b, err)
				g.Items = []Item{{Size: 1 << 16, Producer: 0}}
				for i := 1; i < c.tasks; i++ {
					g.Items[0].Consumers = append(g.Items[0].Consumers, i)
					g.Items = append(g.Items, Item{Size: 1 << 16, Producer: i, Consumers: []int{c.tasks + (i-1)%25}})
				}
			} else {
				g, m, err = Random(RandomConfig{Tasks: c.tasks, Machines: c.machines}, rng)
				require.NoError(b, err)
			}
			p, err := NewProblem(g, m, nil)
			require.NoError(b, err)
			rt, err := Draw(p, Distribution{}, rng)
			require.NoError(b, err)
			// Record the observation at every remapping of a simulated
			// run, then time the remapping of the largest block.
			k := 1
			for i, blk := range p.Blocks() {
				if i > 0 && len(blk) > len(p.Blocks()[k]) {
					k = i
				}
			}
			var obs *Observation
			var before *Remapper
			_, err = Simulate(p, rt, c.variant, SimOptions{trace: func(block int, o *Observation, r *Remapper) {
				if block == k {
					obs = &Observation{Now: o.Now, Start: append([]float64(nil), o.Start...), Finish: append([]float64(nil), o.Finish...)}
					before = r.clone()
				}
			}})
			require.NoError(b, err)
			for b.Loop() {
				r := before.clone()
				if _, err := r.Remap(k, obs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.Blocks()[k])), "subtasks/block")
		})
	}
}
