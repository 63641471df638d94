package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExchangePlannerCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := exPaperCase(rng, 20)
	pl, err := NewExchangePlanner(Auto, Options{})
	require.NoError(t, err)
	p1, err := pl.Plan(c.m, c.x)
	require.NoError(t, err)
	want, err := PlanExchange(c.m, c.x, Auto, Options{})
	require.NoError(t, err)
	require.Equal(t, want, p1)
	// The same sizes in other slices: the cached plan itself.
	p2, err := pl.Plan(c.m.Clone(), &Exchange{Bytes: copySizes(c.x.Bytes)})
	require.NoError(t, err)
	require.Same(t, p1, p2)
	require.Equal(t, PlannerStats{Hits: 1, Plans: 1}, pl.Stats())

	// Another model, the same sizes: planned in full, never patched.
	m2 := c.m.Clone()
	m2.Latency[0][1] *= 2
	p3, err := pl.Plan(m2, c.x)
	require.NoError(t, err)
	want3, err := PlanExchange(m2, c.x, Auto, Options{})
	require.NoError(t, err)
	require.Equal(t, want3, p3)
	require.Equal(t, PlannerStats{Hits: 1, Plans: 2}, pl.Stats())
	// Both are cached.
	for _, m := range []*Model{c.m, m2} {
		_, err := pl.Plan(m, c.x)
		require.NoError(t, err)
	}
	require.Equal(t, PlannerStats{Hits: 3, Plans: 2}, pl.Stats())

	// Capacity 2: a third plan evicts the least recently used (c.m's).
	pl.Capacity = 2
	m3 := c.m.Clone()
	m3.Bandwidth[2][3] /= 2
	_, err = pl.Plan(m3, c.x)
	require.NoError(t, err)
	_, err = pl.Plan(c.m, c.x)
	require.NoError(t, err)
	require.Equal(t, PlannerStats{Hits: 3, Plans: 4}, pl.Stats())
}

func TestExchangePlannerPatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 60; trial++ {
		c := exPaperCase(rng, 13+rng.IntN(30))
		if trial%3 == 0 {
			c = exRandomCase(rng, 2+rng.IntN(20))
		}
		n := c.x.Size()
		pl, err := NewExchangePlanner([]Algorithm{Auto, OpenShop, Greedy}[trial%3], Options{})
		require.NoError(t, err)
		pl.PatchSlack, pl.PatchFraction = 10, 1 // patch always, to check the patch
		first, err := pl.Plan(c.m, c.x)
		require.NoError(t, err)
		// A few sizes change: some grow or shrink, some messages go,
		// some come.
		y := &Exchange{Bytes: copySizes(c.x.Bytes)}
		for k := 0; k < 1+n*(n-1)/20; k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			switch rng.IntN(3) {
			case 0:
				y.Bytes[i][j] = 0
			default:
				y.Bytes[i][j] = 1 + rng.Int64N(1<<20)
			}
		}
		p, err := pl.Plan(c.m, y)
		require.NoError(t, err)
		name := fmt.Sprintf("%s/trial %d", c.name, trial)
		if sameSizes(c.x.Bytes, y.Bytes) {
			require.Same(t, first, p, name)
			continue
		}
		require.Equal(t, 1, pl.Stats().Patches, name)
		require.Equal(t, first.Algorithm, p.Algorithm, name)
		checkExchangePlan(t, exCase{name, c.m, y}, Auto, p) // a patch need not keep a planner's bounds
		// A kept message keeps its place among the kept ones.
		before := map[[2]int]int{}
		for _, tr := range first.Transfers {
			before[[2]int{tr.Src, tr.Dst}] = tr.SendSeq
		}
		for r := 0; r < n; r++ {
			last := -1
			for _, k := range p.SendOrder(r) {
				tr := p.Transfers[k]
				if s, ok := before[[2]int{tr.Src, tr.Dst}]; ok && c.x.Bytes[tr.Src][tr.Dst] > 0 {
					require.Greater(t, s, last, name)
					last = s
				}
			}
		}
	}
}

func TestExchangePlannerPatchLimits(t *testing.T) {
	c := exPaperCase(rand.New(rand.NewPCG(11, 12)), 16)
	y := &Exchange{Bytes: copySizes(c.x.Bytes)}
	y.Bytes[1][2] *= 3
	// Too many changes for the fraction: planned in full.
	pl, err := NewExchangePlanner(OpenShop, Options{})
	require.NoError(t, err)
	pl.PatchFraction = 1e-9
	_, err = pl.Plan(c.m, c.x)
	require.NoError(t, err)
	p, err := pl.Plan(c.m, y)
	require.NoError(t, err)
	want, err := PlanExchange(c.m, y, OpenShop, Options{})
	require.NoError(t, err)
	require.Equal(t, want, p)
	require.Equal(t, PlannerStats{Plans: 2}, pl.Stats())
	// A patch worse than the slack allows: planned in full.
	pl, err = NewExchangePlanner(OpenShop, Options{})
	require.NoError(t, err)
	pl.PatchSlack = -1 // no patch is ever good enough
	_, err = pl.Plan(c.m, c.x)
	require.NoError(t, err)
	p, err = pl.Plan(c.m, y)
	require.NoError(t, err)
	require.Equal(t, want, p)
	require.Equal(t, PlannerStats{Plans: 2}, pl.Stats())
	// Unknown algorithms are refused up front.
	_, err = NewExchangePlanner(FEF, Options{})
	require.Error(t, err)
}

// changeSizes returns a copy of x with k off-diagonal sizes changed
// (grown or shrunk; never to 0).
func changeSizes(rng *rand.Rand, x *Exchange, k int) *Exchange {
	y := &Exchange{Bytes: copySizes(x.Bytes)}
	n := x.Size()
	for changed := 0; changed < k; {
		i, j := rng.IntN(n), rng.IntN(n)
		if i != j {
			y.Bytes[i][j] = 1 + rng.Int64N(512<<10)
			changed++
		}
	}
	return y
}

// PlanOn caches and patches what PlanExchangeOn plans: a call is a hit
// only when the model (its rails and segments included), the fabric, the
// flow options and the sizes all repeat, a patch only follows a one-port
// plan of the same model, fabric and options, and everything else is
// planned in full, as PlanExchangeOn plans it.
func TestExchangePlannerOnCounts(t *testing.T) {
	m, x := exNICCase(20, 1) // Auto without pacing: a one-port plan
	nopace := FlowOptions{NoPacing: true}
	rng := rand.New(rand.NewPCG(5, 6))
	few := changeSizes(rng, x, 3)
	many := changeSizes(rng, x, 20*19/2)
	segmented := m.Clone()
	segmented.Segments = []Segment{{Name: "uplink", A: []int{0, 1, 2}, B: []int{3, 4, 5}, AB: 1e7, BA: 1e7}}
	railed := m.Clone()
	railed.Rails = []Rail{{Name: "a", Latency: m.Latency, Bandwidth: m.Bandwidth}, {Name: "b", Latency: m.Latency, Bandwidth: m.Bandwidth}}
	fab := FabricFromModel(segmented)
	type call struct {
		plan bool // Plan (one-port) instead of PlanOn
		m    *Model
		f    *Fabric
		x    *Exchange
		fo   FlowOptions
	}
	for _, tc := range []struct {
		name  string
		calls []call
		want  PlannerStats
		algo  Algorithm // of the last plan; "" for any one-port planner
	}{
		{"a repeat is a hit", []call{{m: m, x: x, fo: nopace}, {m: m.Clone(), x: &Exchange{Bytes: copySizes(x.Bytes)}, fo: nopace}}, PlannerStats{Hits: 1, Plans: 1}, ""},
		{"other flow options", []call{{m: m, x: x, fo: nopace}, {m: m, x: x}}, PlannerStats{Plans: 2}, Paced},
		{"a fabric given", []call{{m: m, x: x, fo: nopace}, {m: m, f: fab, x: x, fo: nopace}, {m: m, f: fab.clone(), x: x, fo: nopace}}, PlannerStats{Hits: 1, Plans: 2}, ""},
		{"a segment in the model", []call{{m: m, x: x, fo: nopace}, {m: segmented, x: x, fo: nopace}}, PlannerStats{Plans: 2}, ""},
		{"rails in the model", []call{{m: m, x: x, fo: nopace}, {m: railed, x: x, fo: nopace}}, PlannerStats{Plans: 2}, ""},
		{"Plan is another method", []call{{m: m, x: x, fo: nopace}, {plan: true, m: m, x: x}}, PlannerStats{Plans: 2}, ""},
		{"a few sizes change", []call{{m: m, x: x, fo: nopace}, {m: m, x: few, fo: nopace}, {m: m, x: few, fo: nopace}, {m: m, x: x, fo: nopace}}, PlannerStats{Hits: 2, Patches: 1, Plans: 1}, ""},
		{"many sizes change", []call{{m: m, x: x, fo: nopace}, {m: m, x: many, fo: nopace}}, PlannerStats{Plans: 2}, ""},
		{"a few change after a flow plan", []call{{m: m, x: x}, {m: m, x: few}}, PlannerStats{Plans: 2}, Paced},
		{"a few change under other options", []call{{m: m, x: x, fo: nopace}, {m: m, x: few}}, PlannerStats{Plans: 2}, Paced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := NewExchangePlanner(Auto, Options{Seed: 1})
			require.NoError(t, err)
			pl.PatchSlack = 1 // this test counts; the next ones check the slack
			var p *Plan
			for k, c := range tc.calls {
				before := pl.Stats()
				if c.plan {
					p, err = pl.Plan(c.m, c.x)
				} else {
					p, err = pl.PlanOn(c.m, c.f, c.x, c.fo)
				}
				require.NoError(t, err, "call %d", k)
				require.NoError(t, ValidateExchange(c.x, p), "call %d", k)
				if after := pl.Stats(); after.Plans > before.Plans && !c.plan {
					want, err := PlanExchangeOn(c.m, c.f, c.x, Auto, Options{Seed: 1}, c.fo)
					require.NoError(t, err)
					require.Equal(t, want, p, "call %d: planned in full as PlanExchangeOn plans", k)
				}
			}
			require.Equal(t, tc.want, pl.Stats())
			if tc.algo != "" {
				require.Equal(t, tc.algo, p.Algorithm)
			} else {
				require.False(t, IsFlowPlan(p.Algorithm), p.Algorithm)
			}
		})
	}
}

// A patch PlanOn keeps is a valid plan of the new sizes, evaluated on the
// fabric as PlanExchangeOn evaluates one-port plans (replayed up to
// OnePortSimLimit ranks, estimated above), within PatchSlack of the plan
// in full it comes from, and, under Auto, predicted to end before the
// flow plan Auto would choose. Its messages keep their places.
func TestExchangePlannerOnPatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	nopace := FlowOptions{NoPacing: true}
	for _, tc := range []struct {
		n    int
		algo Algorithm
	}{
		{6, OpenShop}, {12, Greedy}, {20, Auto}, {24, OpenShop}, {OnePortSimLimit + 8, Auto}, {OnePortSimLimit + 8, Caterpillar},
	} {
		t.Run(fmt.Sprintf("ranks=%d/%s", tc.n, tc.algo), func(t *testing.T) {
			m, x := exNICCase(tc.n, uint64(tc.n))
			for k := range 3 {
				x.Bytes[k][k+1] = 0 // messages to come
			}
			f := FabricFromModel(m)
			pl, err := NewExchangePlanner(tc.algo, Options{Seed: 1})
			require.NoError(t, err)
			first, err := pl.PlanOn(m, nil, x, nopace)
			require.NoError(t, err)
			require.False(t, IsFlowPlan(first.Algorithm), first.Algorithm)
			patches := 0
			for trial := 0; trial < 5; trial++ {
				// From the first plan each time: a repeat of x is a hit
				// that makes it the last plan again.
				_, err := pl.PlanOn(m, nil, x, nopace)
				require.NoError(t, err)
				y := changeSizes(rng, x, 1+rng.IntN(max(1, tc.n*(tc.n-1)/40)))
				k := rng.IntN(3)
				y.Bytes[k][k+1] = 1 + rng.Int64N(1<<20) // a message comes
				y.Bytes[tc.n-1][rng.IntN(tc.n-1)] = 0   // one goes
				before := pl.Stats()
				p, err := pl.PlanOn(m, nil, y, nopace)
				require.NoError(t, err)
				require.NoError(t, ValidateExchange(y, p))
				if pl.Stats().Patches == before.Patches {
					want, err := PlanExchangeOn(m, nil, y, tc.algo, Options{Seed: 1}, nopace)
					require.NoError(t, err)
					require.Equal(t, want, p, "refused: planned in full")
					continue
				}
				patches++
				require.Equal(t, first.Algorithm, p.Algorithm)
				require.LessOrEqual(t, ratioToBound(p), ratioToBound(first)*(1+pl.PatchSlack))
				// Evaluated on the fabric as PlanExchangeOn evaluates.
				onePort, err := SimulateExchange(m, p)
				require.NoError(t, err)
				want, err := f.evalOnePort(onePort, y)
				require.NoError(t, err)
				require.Equal(t, want.Predicted, p.Predicted)
				require.Equal(t, want.LowerBound, p.LowerBound)
				if tc.algo == Auto {
					_, score, err := autoFlows(f, y, nopace)
					require.NoError(t, err)
					require.Less(t, p.Predicted, score, "a flow plan would win")
				}
				// The messages kept keep their order, the new ones come
				// after them.
				for r := 0; r < tc.n; r++ {
					var was, kept []int
					for _, k := range first.SendOrder(r) {
						if d := first.Transfers[k].Dst; y.Bytes[r][d] > 0 {
							was = append(was, d)
						}
					}
					for _, k := range p.SendOrder(r) {
						if d := p.Transfers[k].Dst; x.Bytes[r][d] > 0 {
							kept = append(kept, d)
						} else {
							require.Equal(t, len(was), len(kept), "rank %d: a new message before a kept one", r)
						}
					}
					require.Equal(t, was, kept, "rank %d", r)
				}
			}
			require.Positive(t, patches, "some patch was kept")
		})
	}
}

// Under Auto, a patch of a one-port plan that posting everything at once
// would now beat is refused, whatever the slack, and the exchange is
// planned in full: here the fastest rank starts sending large messages
// to the ranks at least four times slower (up to ten), which a one-port
// order sends one after another and a flow plan all at once.
func TestExchangePlannerOnAutoSwitchesToFlows(t *testing.T) {
	nopace := FlowOptions{NoPacing: true}
	for _, n := range []int{20, OnePortSimLimit + 8} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			m, x := exNICCase(n, 1)
			pl, err := NewExchangePlanner(Auto, Options{Seed: 1})
			require.NoError(t, err)
			pl.PatchSlack = 1e9
			first, err := pl.PlanOn(m, nil, x, nopace)
			require.NoError(t, err)
			require.False(t, IsFlowPlan(first.Algorithm), first.Algorithm)
			fast := 0
			for r := range n {
				if m.Bandwidth[r][(r+1)%n] > m.Bandwidth[fast][(fast+1)%n] {
					fast = r
				}
			}
			y := &Exchange{Bytes: copySizes(x.Bytes)}
			slow := 0
			for r := 0; r < n && slow < 10; r++ {
				if r != fast && m.Bandwidth[fast][r] < m.Bandwidth[fast][(fast+1)%n]/4 {
					y.Bytes[fast][r] = 64 << 20
					slow++
				}
			}
			require.GreaterOrEqual(t, slow, 4)
			p, err := pl.PlanOn(m, nil, y, nopace)
			require.NoError(t, err)
			want, err := PlanExchangeOn(m, nil, y, Auto, Options{Seed: 1}, nopace)
			require.NoError(t, err)
			require.Equal(t, want, p)
			require.True(t, IsFlowPlan(p.Algorithm), p.Algorithm)
			require.Equal(t, PlannerStats{Plans: 2}, pl.Stats())
		})
	}
}

// Property: on small random instances, a fresh planner's PlanOn is
// PlanExchangeOn's plan (the same algorithm, Predicted and everything
// else), for every algorithm, with and without pacing, on the fabric the
// model implies or on one given; the same call again is a hit.
func TestExchangePlannerOnMatchesPlanExchangeOn(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	algos := []Algorithm{Auto, Naive, Paced, OpenShop, Greedy, Caterpillar, MaxMatch}
	for trial := 0; trial < 40; trial++ {
		c := exPaperCase(rng, 2+rng.IntN(11))
		if trial%2 == 1 {
			m, x := exNICCase(2+rng.IntN(11), uint64(trial))
			c = exCase{name: "nic", m: m, x: x}
		}
		n := c.x.Size()
		var f *Fabric
		if trial%3 == 0 && n >= 2 {
			f = FabricFromModel(c.m)
			f.Segments = []Segment{{Name: "bb", A: []int{0}, B: []int{n - 1}, AB: 1e5, BA: 2e5}}
		}
		algo := algos[rng.IntN(len(algos))]
		fo := FlowOptions{NoPacing: rng.IntN(2) == 0}
		name := fmt.Sprintf("#%d %s/n=%d/%s/%+v/fabric=%v", trial, c.name, n, algo, fo, f != nil)
		want, err := PlanExchangeOn(c.m, f, c.x, algo, Options{Seed: 1}, fo)
		require.NoError(t, err, name)
		pl, err := NewExchangePlanner(algo, Options{Seed: 1})
		require.NoError(t, err, name)
		got, err := pl.PlanOn(c.m, f, c.x, fo)
		require.NoError(t, err, name)
		require.Equal(t, want.Algorithm, got.Algorithm, name)
		require.Equal(t, want.Predicted, got.Predicted, name)
		require.Equal(t, want, got, name)
		again, err := pl.PlanOn(c.m.Clone(), f.clone(), &Exchange{Bytes: copySizes(c.x.Bytes)}, fo)
		require.NoError(t, err, name)
		require.Same(t, got, again, name)
		require.Equal(t, PlannerStats{Hits: 1, Plans: 1}, pl.Stats(), name)
	}
	// Flow algorithms are for PlanOn only.
	pl, err := NewExchangePlanner(Paced, Options{})
	require.NoError(t, err)
	m, x := exNICCase(4, 1)
	_, err = pl.Plan(m, x)
	require.ErrorContains(t, err, "PlanOn")
}

// BenchmarkExchangePlanner compares, at 256 and 1,024 ranks, a plan in
// full (auto), a cache hit, and a patch after ten sizes changed.
func BenchmarkExchangePlanner(b *testing.B) {
	for _, n := range []int{256, 1024} {
		m, x := exNICCase(n, 1)
		rng := rand.New(rand.NewPCG(3, 4))
		y := &Exchange{Bytes: copySizes(x.Bytes)}
		for k := 0; k < 10; k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			if i != j {
				y.Bytes[i][j] = 1 + rng.Int64N(512<<10)
			}
		}
		b.Run(fmt.Sprintf("ranks=%d/full", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := PlanExchange(m, x, Auto, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("ranks=%d/hit", n), func(b *testing.B) {
			pl, _ := NewExchangePlanner(Auto, Options{})
			if _, err := pl.Plan(m, x); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := pl.Plan(m, x); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("ranks=%d/patch", n), func(b *testing.B) {
			pl, _ := NewExchangePlanner(Auto, Options{})
			pl.Capacity = 0 // no cache: every call patches the last plan
			full, err := pl.Plan(m, x)
			if err != nil {
				b.Fatal(err)
			}
			var p *Plan
			for b.Loop() {
				if p, err = pl.Plan(m, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(pl.Stats().Patches)/float64(b.N), "patched/op")
			b.ReportMetric(ratioToBound(full), "full/t_lb")
			b.ReportMetric(ratioToBound(p), "patch/t_lb")
		})
	}
}

// BenchmarkExchangePlannerOn measures PlanOn at 256 and 1,024 ranks as
// comm's Alltoallv calls it (Auto, on the fabric the model implies),
// without pacing, so that Auto keeps a one-port plan, the kind a patch
// starts from: a plan in full (a fresh planner), a cache hit, and a patch
// after ten sizes changed (no cache: every call patches the last plan,
// the sizes alternating). Besides the time it reports the process's CPU
// time per call (cpu-ms/op), which other work on a shared machine
// inflates less.
func BenchmarkExchangePlannerOn(b *testing.B) {
	fo := FlowOptions{NoPacing: true}
	for _, n := range []int{256, 1024} {
		m, x := exNICCase(n, 1)
		y := changeSizes(rand.New(rand.NewPCG(3, 4)), x, 10)
		for _, tc := range []struct {
			name     string
			capacity int
			first    bool                  // plan x before the loop
			next     func(k int) *Exchange // the sizes of call k
			fresh    bool                  // a new planner for every call
		}{
			{"full", 8, false, func(int) *Exchange { return x }, true},
			{"hit", 8, true, func(int) *Exchange { return x }, false},
			{"patch", 0, true, func(k int) *Exchange { return []*Exchange{y, x}[k%2] }, false},
		} {
			b.Run(fmt.Sprintf("ranks=%d/%s", n, tc.name), func(b *testing.B) {
				pl, _ := NewExchangePlanner(Auto, Options{Seed: 1})
				pl.Capacity = tc.capacity
				if tc.first {
					if _, err := pl.PlanOn(m, nil, x, fo); err != nil {
						b.Fatal(err)
					}
				}
				before := pl.Stats()
				var p *Plan
				calls := 0
				c0 := cpuTime()
				for b.Loop() {
					if tc.fresh {
						pl, _ = NewExchangePlanner(Auto, Options{Seed: 1})
					}
					var err error
					if p, err = pl.PlanOn(m, nil, tc.next(calls), fo); err != nil {
						b.Fatal(err)
					}
					calls++
				}
				b.ReportMetric((cpuTime()-c0).Seconds()*1e3/float64(calls), "cpu-ms/op")
				b.ReportMetric(ratioToBound(p), "plan/t_lb")
				if tc.name == "patch" {
					b.ReportMetric(float64(pl.Stats().Patches-before.Patches)/float64(calls), "patched/op")
				}
			})
		}
	}
}
