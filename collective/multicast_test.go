package collective

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// mcRandomModel returns a random model of n nodes in one of several styles:
// small integers (many exact ties, the hardest case for tie-breaking), the
// paper's section 7 ranges, all zero, a latency + bandwidth model, and
// unstructured continuous values.
func mcRandomModel(rng *rand.Rand, n int) *Model {
	m := &Model{}
	ov := func(c, p func() float64) []Overhead {
		o := make([]Overhead, n)
		for i := range o {
			o[i] = Overhead{Const: c(), PerByte: p()}
		}
		return o
	}
	mat := func(f func() float64) [][]float64 {
		a := Matrix(n, 0)
		for i := range a {
			for j := range a[i] {
				if i != j {
					a[i][j] = f()
				}
			}
		}
		return a
	}
	small := func(k int) func() float64 { return func() float64 { return float64(rng.IntN(k)) } }
	switch rng.IntN(5) {
	case 0:
		m.PerByte = mat(func() float64 { return float64(rng.IntN(3)) / 2 })
		m.SendOverhead, m.RecvOverhead = ov(small(4), small(2)), ov(small(7), small(2))
	case 1:
		bw := [2]float64{155e6 / 8, 1e9 / 8}
		m.Bandwidth = Matrix(n, 1e9/8)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				b := bw[rng.IntN(2)]
				m.Bandwidth[i][j], m.Bandwidth[j][i] = b, b
			}
		}
		u := func(lo, hi float64) func() float64 { return func() float64 { return lo + (hi-lo)*rng.Float64() } }
		m.SendOverhead, m.RecvOverhead = ov(u(80e-6, 400e-6), u(1e-10, 1e-8)), ov(u(80e-6, 400e-6), u(1e-10, 1e-8))
	case 2:
		m.PerByte = Matrix(n, 0)
	case 3:
		m.Latency = mat(small(3))
		m.Bandwidth = mat(func() float64 { return float64(1 + rng.IntN(3)) })
		m.SendOverhead, m.RecvOverhead = ov(small(3), small(1)), ov(small(5), small(1))
	default:
		m.PerByte = mat(rng.Float64)
		m.SendOverhead, m.RecvOverhead = ov(rng.Float64, rng.Float64), ov(rng.Float64, rng.Float64)
	}
	return m
}

// mcRandomPattern returns a random multiple multicast on n nodes: general
// (random sources, sizes and destination sets, some empty), a single
// broadcast, an all-to-all broadcast, or several messages per source.
func mcRandomPattern(rng *rand.Rand, n int, big bool) *Multicast {
	size := func() int64 {
		if !big {
			return int64(rng.IntN(4))
		}
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return 1 + int64(rng.IntN(1024))
		case 2:
			return 1 << 20
		default:
			return 3 << 19
		}
	}
	dests := func(src int, p float64) []int {
		d := []int{}
		for _, v := range rng.Perm(n) {
			if v != src && rng.Float64() < p {
				d = append(d, v)
			}
		}
		return d
	}
	mc := &Multicast{}
	switch rng.IntN(5) {
	case 0: // single broadcast
		src := rng.IntN(n)
		mc.Messages = append(mc.Messages, Message{Source: src, Bytes: size(), Dests: dests(src, 1)})
	case 1: // all-to-all broadcast, one size
		l := size()
		for src := 0; src < n; src++ {
			mc.Messages = append(mc.Messages, Message{Source: src, Bytes: l, Dests: dests(src, 1)})
		}
	case 2: // several messages per source
		for src := 0; src < n; src++ {
			for range rng.IntN(3) {
				mc.Messages = append(mc.Messages, Message{Source: src, Bytes: size(), Dests: dests(src, rng.Float64())})
			}
		}
	default: // general
		p := rng.Float64()
		for range rng.IntN(2*n + 1) {
			src := rng.IntN(n)
			mc.Messages = append(mc.Messages, Message{Source: src, Bytes: size(), Dests: dests(src, p)})
		}
	}
	return mc
}

// mcCheckPlan asserts the properties every multicast plan must have.
func mcCheckPlan(t *testing.T, m *Model, mc *Multicast, p *Plan, algo Algorithm) {
	t.Helper()
	require.Equal(t, KindMulticast, p.Kind)
	require.Equal(t, m.Size(), p.Ranks)
	require.NoError(t, ValidateMulticast(mc, p), "%s", algo)
	sim, err := SimulateMulticast(m, p)
	require.NoError(t, err, "%s", algo)
	require.Equal(t, p, sim, "%s: the simulator must reproduce the planner's times exactly", algo)
	require.LessOrEqual(t, p.LowerBound, p.Predicted, "%s: lower bound above the completion time", algo)
	deliveries := 0
	for _, msg := range mc.Messages {
		deliveries += len(msg.Dests)
	}
	require.Len(t, p.Tasks, deliveries, "one task per delivery")
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var q Plan
	require.NoError(t, json.Unmarshal(b, &q))
	require.Equal(t, *p, q, "%s: JSON round trip", algo)
}

func TestMulticastRandomProperties(t *testing.T) {
	instances := 3000
	if testing.Short() || mcRace {
		instances = 400
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for x := range instances {
		n := 1 + rng.IntN(8)
		m := mcRandomModel(rng, n)
		mc := mcRandomPattern(rng, n, m.Bandwidth != nil && m.Latency == nil)
		seed := rng.Int64()
		lb, err := MulticastLowerBound(m, mc)
		require.NoError(t, err)
		for _, algo := range Algorithms(KindMulticast) {
			p, err := PlanMulticast(m, mc, algo, Options{Seed: seed})
			require.NoError(t, err, "instance %d %s", x, algo)
			require.Equal(t, lb, p.LowerBound)
			mcCheckPlan(t, m, mc, p, algo)
			// The incremental planners equal the brute-force reading.
			ref := mcReferencePlan(m, mc, algo, seed)
			ref.LowerBound = lb
			if !mcPlansEqual(p, ref) {
				b, _ := json.Marshal(struct {
					M  *Model
					MC *Multicast
				}{m, mc})
				t.Fatalf("instance %d, %s (seed %d) differs from the reference:\nplanner   %s\nreference %s\nproblem %s", x, algo, seed, mcSeq(p), mcSeq(ref), b)
			}
		}
	}
}

func mcPlansEqual(a, b *Plan) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestMulticastLargerAgainstReference checks bigger instances (where the
// pruning and caches of the planners have more to skip) against the
// reference, with the paper's cost ranges and sizes.
func TestMulticastLargerAgainstReference(t *testing.T) {
	if testing.Short() {
		t.Skip("slow reference")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	instances := 40
	if mcRace {
		instances = 8
	}
	for x := range instances {
		n := 10 + rng.IntN(12)
		m := mcRandomModel(rng, n)
		mc := mcRandomPattern(rng, n, rng.IntN(2) == 0)
		for _, algo := range Algorithms(KindMulticast) {
			p, err := PlanMulticast(m, mc, algo, Options{Seed: int64(x)})
			require.NoError(t, err)
			mcCheckPlan(t, m, mc, p, algo)
			ref := mcReferencePlan(m, mc, algo, int64(x))
			ref.LowerBound = p.LowerBound
			require.True(t, mcPlansEqual(p, ref), "instance %d, %s differs from the reference", x, algo)
		}
	}
}

func TestMulticastDegenerate(t *testing.T) {
	uniform := func(n int) *Model {
		m := &Model{PerByte: Matrix(n, 1e-9), SendOverhead: make([]Overhead, n), RecvOverhead: make([]Overhead, n)}
		for i := 0; i < n; i++ {
			m.SendOverhead[i] = Overhead{Const: 1e-4 * float64(1+i%3), PerByte: 1e-9}
			m.RecvOverhead[i] = Overhead{Const: 2e-4 * float64(1+i%2), PerByte: 2e-9}
		}
		return m
	}
	all := func(n, src int) []int {
		d := []int{}
		for v := 0; v < n; v++ {
			if v != src {
				d = append(d, v)
			}
		}
		return d
	}
	a2a := func(n int, l int64) *Multicast {
		mc := &Multicast{}
		for s := 0; s < n; s++ {
			mc.Messages = append(mc.Messages, Message{Source: s, Bytes: l, Dests: all(n, s)})
		}
		return mc
	}
	cases := []struct {
		name  string
		m     *Model
		mc    *Multicast
		tasks int
	}{
		{"one node, nothing", uniform(1), &Multicast{}, 0},
		{"one node, empty destination set", uniform(1), &Multicast{Messages: []Message{{Source: 0, Bytes: 5, Dests: []int{}}}}, 0},
		{"no messages", uniform(3), &Multicast{}, 0},
		{"only empty destination sets", uniform(3), &Multicast{Messages: []Message{{Source: 1, Bytes: 9}, {Source: 2, Bytes: 0, Dests: []int{}}}}, 0},
		{"zero-byte message", uniform(3), &Multicast{Messages: []Message{{Source: 0, Bytes: 0, Dests: []int{1, 2}}}}, 2},
		{"zero costs", &Model{PerByte: Matrix(4, 0)}, a2a(4, 10), 12},
		{"single broadcast", uniform(6), &Multicast{Messages: []Message{{Source: 3, Bytes: 1000, Dests: all(6, 3)}}}, 5},
		{"all-to-all broadcast", uniform(5), a2a(5, 1<<20), 20},
		{"source and destination of other messages", uniform(4), &Multicast{Messages: []Message{
			{Source: 0, Bytes: 10, Dests: []int{1, 2}}, {Source: 1, Bytes: 20, Dests: []int{0, 3}}, {Source: 3, Bytes: 0, Dests: []int{0, 1, 2}}}}, 7},
		{"several messages from one source", uniform(4), &Multicast{Messages: []Message{
			{Source: 2, Bytes: 10, Dests: []int{0, 1}}, {Source: 2, Bytes: 10, Dests: []int{1, 3}}, {Source: 2, Bytes: 1, Dests: []int{0}}}}, 5},
		{"latency model", &Model{Latency: Matrix(3, 1e-3), Bandwidth: Matrix(3, 1e8)}, a2a(3, 1000), 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, algo := range append(Algorithms(KindMulticast), Auto) {
				p, err := PlanMulticast(c.m, c.mc, algo, Options{Seed: 7})
				require.NoError(t, err, algo)
				require.Len(t, p.Tasks, c.tasks)
				mcCheckPlan(t, c.m, c.mc, p, algo)
				if c.tasks == 0 {
					require.Zero(t, p.Predicted)
					require.Zero(t, p.LowerBound)
				}
			}
		})
	}
}

func TestMulticastAuto(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 30 {
		n := 2 + rng.IntN(10)
		m := mcRandomModel(rng, n)
		mc := mcRandomPattern(rng, n, false)
		best, err := PlanMulticast(m, mc, Auto, Options{Seed: 3})
		require.NoError(t, err)
		mcCheckPlan(t, m, mc, best, Auto)
		require.NotEqual(t, Auto, best.Algorithm, "auto reports the planner it chose")
		for _, a := range Algorithms(KindMulticast) {
			p, err := PlanMulticast(m, mc, a, Options{Seed: 3})
			require.NoError(t, err)
			require.LessOrEqual(t, best.Predicted, p.Predicted, "auto is no worse than %s", a)
		}
	}
	// Through the problem decoder as well.
	m, mc := mcExample()
	pr := &Problem{Kind: KindMulticast, Ranks: 4, PerByte: m.PerByte, SendOverhead: m.SendOverhead, RecvOverhead: m.RecvOverhead, Messages: mc.Messages}
	p, err := Solve(pr, Auto, Options{})
	require.NoError(t, err)
	require.NoError(t, ValidatePlan(pr, p))
	sim, err := SimulatePlan(pr, p)
	require.NoError(t, err)
	require.Equal(t, p, sim)
	require.Equal(t, 14.0, p.Predicted, "the best planner of the example completes at 14")
	require.Equal(t, RRP, p.Algorithm, "RRP is the first planner (in Auto's preference order) to reach 14")
}

func TestMulticastLowerBoundAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for x := range 2000 {
		n := 1 + rng.IntN(7)
		m := mcRandomModel(rng, n)
		mc := mcRandomPattern(rng, n, m.Bandwidth != nil && m.Latency == nil)
		// Keep the per-node permutations small.
		for k := range mc.Messages {
			if k >= 6 {
				mc.Messages[k].Dests = nil
			}
		}
		lb, err := MulticastLowerBound(m, mc)
		require.NoError(t, err)
		ref := mcReferenceLowerBound(m, mc)
		if lb != ref {
			// Equal arrivals may be summed in another order: allow a few ulps.
			require.InEpsilon(t, ref, lb, 1e-12, "instance %d", x)
		}
	}
}

func TestMulticastLowerBound(t *testing.T) {
	// A relay is faster than the direct slow link: 0 -> 1 -> 2.
	m := &Model{
		PerByte:      [][]float64{{0, 1, 10}, {1, 0, 1}, {10, 1, 0}},
		SendOverhead: []Overhead{{Const: 1}, {Const: 1}, {Const: 1}},
		RecvOverhead: []Overhead{{Const: 2}, {Const: 2}, {Const: 2}},
	}
	mc := &Multicast{Messages: []Message{{Source: 0, Bytes: 1, Dests: []int{1, 2}}}}
	lb, err := MulticastLowerBound(m, mc)
	require.NoError(t, err)
	require.Equal(t, 8.0, lb, "0->1 completes at 1+1+2 = 4, then 1->2 at 4+1+1+2 = 8 (direct: 1+10+2 = 13)")
	// Without node 1 among the destinations the path through it is not
	// allowed (relays are destinations).
	mc2 := &Multicast{Messages: []Message{{Source: 0, Bytes: 1, Dests: []int{2}}}}
	lb, err = MulticastLowerBound(m, mc2)
	require.NoError(t, err)
	require.Equal(t, 13.0, lb)

	// Equation 4: one node receives three messages that all reach it at
	// 1+0+2 = 3 (arrival 1): 3, then 5, then 7.
	m3 := &Model{PerByte: Matrix(4, 0), SendOverhead: []Overhead{{Const: 1}, {Const: 1}, {Const: 1}, {Const: 1}},
		RecvOverhead: []Overhead{{Const: 2}, {Const: 2}, {Const: 2}, {Const: 2}}}
	mc3 := &Multicast{Messages: []Message{{Source: 0, Bytes: 1, Dests: []int{3}}, {Source: 1, Bytes: 1, Dests: []int{3}}, {Source: 2, Bytes: 1, Dests: []int{3}}}}
	lb, err = MulticastLowerBound(m3, mc3)
	require.NoError(t, err)
	require.Equal(t, 7.0, lb)

	// Mixed sizes: ordering by earliest reach time L would give 12 here,
	// above the true optimum 11 (receive the big message first, arriving
	// at 0, then the small one, arriving at 1); ordering by arrival gives
	// the optimum of the relaxation.
	m4 := &Model{PerByte: Matrix(3, 0), SendOverhead: []Overhead{{}, {Const: 1}, {}},
		RecvOverhead: []Overhead{{}, {}, {Const: 1, PerByte: 1}}}
	mc4 := &Multicast{Messages: []Message{{Source: 0, Bytes: 9, Dests: []int{2}}, {Source: 1, Bytes: 0, Dests: []int{2}}}}
	lb, err = MulticastLowerBound(m4, mc4)
	require.NoError(t, err)
	require.Equal(t, 11.0, lb)
	hand := &Plan{Kind: KindMulticast, Ranks: 3, Tasks: []Task{
		{Message: 0, Src: 0, Dst: 2, Bytes: 9, SendSeq: 0, RecvSeq: 0},
		{Message: 1, Src: 1, Dst: 2, Bytes: 0, SendSeq: 0, RecvSeq: 1},
	}}
	sim, err := SimulateMulticast(m4, hand)
	require.NoError(t, err)
	require.Equal(t, 11.0, sim.Predicted, "a schedule achieves 11, so a bound of 12 would be wrong")

	_, err = MulticastLowerBound(nil, mc)
	require.Error(t, err)
}

func TestPlanMulticastRejects(t *testing.T) {
	m, mc := mcExample()
	cases := map[string]struct {
		m    *Model
		mc   *Multicast
		algo Algorithm
		want string
	}{
		"nil model":                 {nil, mc, WRP, "nil model"},
		"invalid model":             {&Model{PerByte: [][]float64{{0, -1}, {0, 0}}}, mc, WRP, "per_byte[0][1]"},
		"nil pattern":               {m, nil, WRP, "nil multicast"},
		"node outside the model":    {m, &Multicast{Messages: []Message{{Source: 0, Dests: []int{4}}}}, WRP, "out of range"},
		"destination is source":     {m, &Multicast{Messages: []Message{{Source: 1, Dests: []int{1}}}}, WRP, "equals its source"},
		"negative size":             {m, &Multicast{Messages: []Message{{Source: 1, Bytes: -1, Dests: []int{2}}}}, WRP, "negative size"},
		"unknown algorithm":         {m, mc, "fastest", "unknown algorithm"},
		"algorithm of another kind": {m, mc, OpenShop, "plans alltoall"},
		"no algorithm":              {m, mc, "", "unknown algorithm"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := PlanMulticast(c.m, c.mc, c.algo, Options{})
			require.Nil(t, p)
			require.ErrorContains(t, err, c.want)
			require.Regexp(t, "^collective: ", err.Error())
		})
	}
}

// mcExamplePlan returns the ECF plan of the example, a valid plan to break.
func mcExamplePlan(t *testing.T) (*Model, *Multicast, *Plan) {
	m, mc := mcExample()
	p, err := PlanMulticast(m, mc, ECF, Options{})
	require.NoError(t, err)
	return m, mc, p
}

func mcClone(p *Plan) *Plan {
	q := *p
	q.Tasks = append([]Task(nil), p.Tasks...)
	return &q
}

func TestValidateMulticastRejects(t *testing.T) {
	_, mc, good := mcExamplePlan(t)
	require.NoError(t, ValidateMulticast(mc, good))
	// ECF's tasks: 0 (0,1,0) 1 (2,0,2) 2 (2,1,2) 3 (0,2,0) 4 (0,3,2) 5 (1,2,1) 6 (1,3,1).
	cases := map[string]struct {
		edit func(p *Plan)
		want string
	}{
		"missing delivery": {func(p *Plan) {
			p.Tasks = p.Tasks[:6]
		}, "message 1 (source 1) never reaches destination 3"},
		"duplicate delivery": {func(p *Plan) {
			p.Tasks = append(p.Tasks, Task{Message: 0, Src: 0, Dst: 1, Bytes: 1, SendSeq: 4, RecvSeq: 4})
		}, "message 0 is delivered to node 1 twice (tasks 0 and 7)"},
		"receiver not a destination": {func(p *Plan) {
			p.Tasks[6].Message = 0
		}, "delivers message 0 to node 3, which is not one of its destinations"},
		"relay not a destination": {func(p *Plan) {
			p.Tasks[4].Message = 1 // node 0 would relay message 1, which it never gets
		}, "node 0 relays message 1 but is neither its source (1) nor a destination"},
		"relay before holding": {func(p *Plan) {
			// Node 0 forwards message 2 (task 4) at position 0 of its list,
			// before its receive of message 2 (task 1, position 1).
			p.Tasks[4].SendSeq, p.Tasks[0].SendSeq, p.Tasks[1].RecvSeq, p.Tasks[3].SendSeq = 0, 1, 2, 3
		}, "node 0 forwards message 2 to node 3 (task 4, position 0 of its list) before it receives it (task 1, position 2)"},
		"overlapping tasks": {func(p *Plan) {
			p.Tasks[3].SendStart, p.Tasks[3].SendEnd = 4, 5 // node 0's receive (task 1) ends at 5
		}, "node 0: task 3 (send of message 0 to node 2) starts at 4, before its previous task 1 ends at 5"},
		"receive ends before the previous task": {func(p *Plan) {
			p.Tasks[5].RecvEnd = 11.5 // node 2's previous receive ends at 12
		}, "node 2: task 5 (receive of message 1 from node 1) ends at 11.5, before its previous task 3 ends at 12"},
		"duplicate position": {func(p *Plan) {
			p.Tasks[3].SendSeq = 0
		}, "node 0: tasks 0 and 3 are both at position 0"},
		"position out of range": {func(p *Plan) {
			p.Tasks[6].RecvSeq = 2
		}, "task 6: recv_seq 2 out of range: node 3 has 2 tasks"},
		"message out of range": {func(p *Plan) {
			p.Tasks[2].Message = 3
		}, "task 2: message 3 out of range [0,3)"},
		"node out of range": {func(p *Plan) {
			p.Tasks[2].Dst = 4
		}, "task 2: nodes 2->4 out of range [0,4)"},
		"wrong size": {func(p *Plan) {
			p.Tasks[2].Bytes = 2
		}, "task 2 carries 2 bytes of message 2, which has 1"},
		"receive before arrival": {func(p *Plan) {
			p.Tasks[2].Arrival = 8
		}, "task 2 is received at 7 before it arrives at 8"},
		"negative time": {func(p *Plan) {
			p.Tasks[0].SendStart = -1
		}, "task 0: send_start = -1"},
		"not finite": {func(p *Plan) {
			p.Tasks[0].RecvEnd = math.NaN()
		}, "task 0: recv_end = NaN"},
		"predicted too early": {func(p *Plan) {
			p.Predicted = 18
		}, "predicted completion 18 is before the last receive ends at 19"},
		"wrong kind": {func(p *Plan) {
			p.Kind = KindAlltoall
		}, "plan kind is \"alltoall\""},
		"no ranks": {func(p *Plan) {
			p.Ranks = 0
		}, "0 ranks (want 1..4096)"},
		"pattern larger than the plan": {func(p *Plan) {
			p.Ranks = 3
		}, "out of range [0,3)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := mcClone(good)
			c.edit(p)
			err := ValidateMulticast(mc, p)
			require.ErrorContains(t, err, c.want)
			require.Regexp(t, "^collective: ", err.Error())
		})
	}
	require.ErrorContains(t, ValidateMulticast(mc, nil), "nil plan")
	require.ErrorContains(t, ValidateMulticast(nil, good), "nil multicast")
}

func TestSimulateMulticastDeadlock(t *testing.T) {
	m, mc := mcExample()
	// Node 0 first waits for message 2 from node 2, node 2 first waits for
	// message 0 from node 0: neither reaches its send.
	p := &Plan{Kind: KindMulticast, Ranks: 4, Tasks: []Task{
		{Message: 0, Src: 0, Dst: 2, Bytes: 1, SendSeq: 1, RecvSeq: 0},
		{Message: 2, Src: 2, Dst: 0, Bytes: 1, SendSeq: 1, RecvSeq: 0},
	}}
	_, err := SimulateMulticast(m, p)
	var dl *MulticastDeadlockError
	require.ErrorAs(t, err, &dl)
	require.ElementsMatch(t, []int{0, 2}, dl.Nodes)
	require.ElementsMatch(t, []int{0, 1}, dl.Tasks)
	require.Contains(t, err.Error(), "collective: deadlock")
	require.Contains(t, err.Error(), "node 0 waits at position 0 to receive message 2 from node 2 (task 1), which node 2 sends at position 1")
	// The validator accepts the lists' shape but not the pattern: the
	// plan misses deliveries.
	require.Error(t, ValidateMulticast(mc, p))

	// A three-node cycle behind a node that is merely blocked on it.
	p = &Plan{Kind: KindMulticast, Ranks: 4, Tasks: []Task{
		{Message: 0, Src: 0, Dst: 1, Bytes: 1, SendSeq: 1, RecvSeq: 0}, // 1 waits for 0
		{Message: 1, Src: 1, Dst: 2, Bytes: 1, SendSeq: 1, RecvSeq: 0}, // 2 waits for 1
		{Message: 2, Src: 2, Dst: 0, Bytes: 1, SendSeq: 1, RecvSeq: 0}, // 0 waits for 2
		{Message: 1, Src: 1, Dst: 3, Bytes: 1, SendSeq: 2, RecvSeq: 0}, // 3 waits for 1
	}}
	_, err = SimulateMulticast(m, p)
	require.ErrorAs(t, err, &dl)
	require.ElementsMatch(t, []int{0, 1, 2}, dl.Nodes)
}

// TestValidateMulticastDeadlock: with zero costs, cyclic lists can carry
// consistent (all zero) times; the validator still rejects them.
func TestValidateMulticastDeadlock(t *testing.T) {
	mc := &Multicast{Messages: []Message{{Source: 0, Bytes: 1, Dests: []int{1}}, {Source: 1, Bytes: 1, Dests: []int{0}}}}
	p := &Plan{Kind: KindMulticast, Ranks: 2, Tasks: []Task{
		{Message: 0, Src: 0, Dst: 1, Bytes: 1, SendSeq: 1, RecvSeq: 0},
		{Message: 1, Src: 1, Dst: 0, Bytes: 1, SendSeq: 1, RecvSeq: 0},
	}}
	err := ValidateMulticast(mc, p)
	var dl *MulticastDeadlockError
	require.ErrorAs(t, err, &dl)
	require.ElementsMatch(t, []int{0, 1}, dl.Nodes)
	// The same lists in a workable order pass.
	for x := range p.Tasks {
		p.Tasks[x].SendSeq, p.Tasks[x].RecvSeq = 0, 1 // each node sends, then receives
	}
	require.NoError(t, ValidateMulticast(mc, p))

	p.Ranks = MaxProblemRanks + 1
	require.ErrorContains(t, ValidateMulticast(mc, p), "ranks (want 1..4096)")
}

// FuzzMulticastPlan feeds arbitrary plan JSON to the validator and the
// simulator of the worked example: neither may panic, and a plan the
// validator accepts must run without deadlock and still validate with the
// simulated times.
func FuzzMulticastPlan(f *testing.F) {
	m, mc := mcExample()
	for _, algo := range Algorithms(KindMulticast) {
		p, err := PlanMulticast(m, mc, algo, Options{Seed: mcExampleSeed})
		require.NoError(f, err)
		b, err := json.Marshal(p)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"multicast","ranks":4,"ops":[{"message":0,"src":0,"dst":1,"send_seq":1,"recv_seq":0}]}`))
	f.Add([]byte(`{"kind":"multicast","ranks":1000000000,"ops":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if json.Unmarshal(data, &p) != nil {
			return
		}
		if err := ValidateMulticast(mc, &p); err != nil {
			return
		}
		if p.Ranks != m.Size() {
			return
		}
		sim, err := SimulateMulticast(m, &p)
		if err != nil {
			t.Fatalf("a validated plan does not simulate: %v", err)
		}
		if err := ValidateMulticast(mc, sim); err != nil {
			t.Fatalf("the simulated plan is invalid: %v", err)
		}
	})
}

func TestSimulateMulticastRejects(t *testing.T) {
	m, _, good := mcExamplePlan(t)
	cases := map[string]struct {
		m    *Model
		edit func(p *Plan)
		want string
	}{
		"nil model":      {nil, func(*Plan) {}, "nil model"},
		"wrong kind":     {m, func(p *Plan) { p.Kind = KindRedistribute }, "plan kind"},
		"ranks mismatch": {m, func(p *Plan) { p.Ranks = 5 }, "5 ranks but the model describes 4"},
		"self send":      {m, func(p *Plan) { p.Tasks[0].Dst = 0 }, "node 0 sends to itself"},
		"out of range":   {m, func(p *Plan) { p.Tasks[0].Src = -1 }, "src -1 out of range"},
		"negative size":  {m, func(p *Plan) { p.Tasks[0].Bytes = -1 }, "negative size"},
		"bad position":   {m, func(p *Plan) { p.Tasks[0].SendSeq = 9 }, "send_seq 9 out of range"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := mcClone(good)
			c.edit(p)
			_, err := SimulateMulticast(c.m, p)
			require.ErrorContains(t, err, c.want)
		})
	}
	_, err := SimulateMulticast(m, nil)
	require.ErrorContains(t, err, "nil plan")
	// The simulator recomputes whatever times the plan carries.
	p := mcClone(good)
	for x := range p.Tasks {
		p.Tasks[x].SendStart, p.Tasks[x].SendEnd, p.Tasks[x].Arrival, p.Tasks[x].RecvEnd = 0, 0, 0, 0
	}
	p.Predicted = 0
	sim, err := SimulateMulticast(m, p)
	require.NoError(t, err)
	require.Equal(t, good, sim)
	require.Zero(t, p.Predicted, "the input plan is not modified")
}

// TestMulticastGolden pins the example's plans (and their JSON form) in
// testdata/multicast/; run with -update to rewrite them.
func TestMulticastGolden(t *testing.T) {
	m, mc := mcExample()
	for _, algo := range Algorithms(KindMulticast) {
		t.Run(string(algo), func(t *testing.T) {
			p, err := PlanMulticast(m, mc, algo, Options{Seed: mcExampleSeed})
			require.NoError(t, err)
			q := goldenPlan(t, p, filepath.Join("testdata", "multicast", fmt.Sprintf("example_%s.json", algo)))
			require.NoError(t, ValidateMulticast(mc, q))
		})
	}
}
