package collective

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// switchFabric is n ranks on one switch with the given NIC rates (one
// rail, the same both ways) and no start-up time.
func switchFabric(nic ...float64) *Fabric {
	f := &Fabric{}
	for _, r := range nic {
		f.Egress = append(f.Egress, []float64{r})
		f.Ingress = append(f.Ingress, []float64{r})
	}
	return f
}

func TestFabricValidate(t *testing.T) {
	good := func() *Fabric {
		f := switchFabric(10, 10, 10, 10)
		f.Segments = []Segment{{Name: "bb", A: []int{0, 1}, B: []int{2, 3}, AB: 5, BA: 5}}
		return f
	}
	require.NoError(t, good().Validate())
	for name, tc := range map[string]struct {
		edit func(f *Fabric)
		want string
	}{
		"no ranks":         {func(f *Fabric) { f.Egress, f.Ingress = nil, nil }, "no ranks"},
		"ingress count":    {func(f *Fabric) { f.Ingress = f.Ingress[:3] }, "egress for 4 ranks and ingress for 3"},
		"no rail":          {func(f *Fabric) { f.Egress[2] = nil }, "egress[2] lists no rail"},
		"zero capacity":    {func(f *Fabric) { f.Ingress[1][0] = 0 }, "ingress[1][0] = 0"},
		"infinite":         {func(f *Fabric) { f.Egress[0][0] = math.Inf(1) }, "egress[0][0] = +Inf"},
		"latency shape":    {func(f *Fabric) { f.Latency = Matrix(3, 0) }, "latency has 3 rows"},
		"negative latency": {func(f *Fabric) { f.Latency = Matrix(4, 0); f.Latency[1][2] = -1 }, "latency[1][2] = -1"},
		"empty side":       {func(f *Fabric) { f.Segments[0].B = nil }, `segment 0 ("bb"): a side has no rank`},
		"rank twice":       {func(f *Fabric) { f.Segments[0].B = []int{1, 2} }, "rank 1 listed twice"},
		"rank range":       {func(f *Fabric) { f.Segments[0].A = []int{0, 7} }, "rank 7 out of range"},
		"segment capacity": {func(f *Fabric) { f.Segments[0].BA = math.NaN() }, "ba = NaN"},
	} {
		t.Run(name, func(t *testing.T) {
			f := good()
			tc.edit(f)
			require.ErrorContains(t, f.Validate(), tc.want)
		})
	}
}

func TestFabricFromModel(t *testing.T) {
	nic := []float64{100, 50, 10}
	m := &Model{Latency: Matrix(3, 1e-3), Bandwidth: Matrix(3, 0)}
	for i := range nic {
		for j := range nic {
			m.Bandwidth[i][j] = min(nic[i], nic[j])
		}
	}
	f := FabricFromModel(m)
	require.NoError(t, f.Validate())
	require.Equal(t, [][]float64{{50}, {50}, {10}}, f.Egress, "a NIC faster than every peer shows as its fastest peer")
	require.Equal(t, [][]float64{{50}, {50}, {10}}, f.Ingress)
	require.Equal(t, 1e-3, f.StartUp(0, 2))
	require.Zero(t, f.StartUp(1, 1))

	m.Rails = []Rail{
		{Name: "slow", Latency: Matrix(3, 0), Bandwidth: Matrix(3, 5)},
		{Name: "fast", Latency: Matrix(3, 0), Bandwidth: Matrix(3, 20)},
	}
	f = FabricFromModel(m)
	require.Equal(t, []float64{5, 20}, f.Egress[1], "one NIC per rail")
	require.Equal(t, 25.0, f.Out(1), "a rank's rails count together")

	lone := FabricFromModel(NewUniformModel(1, 0, 1e9))
	require.NoError(t, lone.Validate())
}

// TestModelSegments: a model's measured segments reach the fabric, are
// renumbered by Sub (and dropped when a side empties), are checked by
// Validate and change the digest.
func TestModelSegments(t *testing.T) {
	m := NewUniformModel(4, 1e-4, 100)
	m.Segments = []Segment{{Name: "backbone", A: []int{0, 1}, B: []int{2, 3}, AB: 40, BA: 30}}
	require.NoError(t, m.Validate())
	f := FabricFromModel(m)
	require.Equal(t, m.Segments, f.Segments)
	f.Segments[0].A[0] = 3
	require.Equal(t, 0, m.Segments[0].A[0], "the fabric has its own copy")

	sub := m.Sub([]int{3, 1, 2})
	require.Equal(t, []Segment{{Name: "backbone", A: []int{1}, B: []int{0, 2}, AB: 40, BA: 30}}, sub.Segments)
	require.Empty(t, m.Sub([]int{2, 3}).Segments, "a side with no member left drops the segment")
	require.Equal(t, m, m.Sub([]int{0, 1, 2, 3}))

	plain := NewUniformModel(4, 1e-4, 100)
	require.NotEqual(t, plain.Digest(), m.Digest(), "the planners see the segment, so the digest does")
	other := *m
	other.Segments = []Segment{{Name: "backbone", A: []int{0, 1}, B: []int{2, 3}, AB: 40, BA: 31}}
	require.NotEqual(t, other.Digest(), m.Digest())

	for _, bad := range []Segment{
		{A: []int{0}, B: []int{0}, AB: 1, BA: 1},
		{A: []int{0}, B: []int{4}, AB: 1, BA: 1},
		{A: []int{0}, B: []int{1}, AB: 0, BA: 1},
		{A: []int{0}, AB: 1, BA: 1},
	} {
		m.Segments = []Segment{bad}
		require.ErrorContains(t, m.Validate(), "segments[0]", "%+v", bad)
	}
}

// threeFlowFabric: rank 0's egress (10) and rank 2's ingress (6) are the
// only constraints; flows 0->1 (A), 0->2 (B) and 3->2 (C).
func threeFlowFabric() *Fabric { return switchFabric(10, 100, 6, 100) }

func TestFabricBound(t *testing.T) {
	f := threeFlowFabric()
	x := &Exchange{Bytes: [][]int64{{0, 70, 30, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 30, 0}}}
	b, err := f.Bound(x)
	require.NoError(t, err)
	require.Equal(t, 10.0, b.Seconds, "rank 0 sends 100 bytes at 10 B/s")
	require.Equal(t, "rank 0 egress", b.Resource)

	// A backbone between {0,1} and {2,3} at 4 B/s: 30 bytes cross it.
	f.Segments = []Segment{{Name: "bb", A: []int{0, 1}, B: []int{2, 3}, AB: 2, BA: 100}}
	b, err = f.Bound(x)
	require.NoError(t, err)
	require.Equal(t, 15.0, b.Seconds)
	require.Equal(t, "segment bb a->b", b.Resource)

	// Start-up: the last byte through a resource still has to arrive.
	f.Latency = Matrix(4, 0.5)
	b, err = f.Bound(x)
	require.NoError(t, err)
	require.Equal(t, 15.5, b.Seconds)
	require.Equal(t, 15.0, b.Bandwidth)

	_, err = f.Bound(&Exchange{Bytes: [][]int64{{0}}})
	require.ErrorContains(t, err, "4 ranks but the exchange pattern has 1")
	nothing, err := f.Bound(&Exchange{Bytes: [][]int64{{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}})
	require.NoError(t, err)
	require.Equal(t, FabricBound{}, nothing)
}

func TestSimulateFlowsMaxMin(t *testing.T) {
	f := threeFlowFabric()
	// Progressive filling: rank 2's ingress fills first at 3 B/s each (B
	// and C); A then takes the 7 B/s rank 0's egress has left.
	flows := []Flow{{Src: 0, Dst: 1, Bytes: 70}, {Src: 0, Dst: 2, Bytes: 30}, {Src: 3, Dst: 2, Bytes: 30}}
	times, err := f.SimulateFlows(flows)
	require.NoError(t, err)
	for k, tm := range times {
		require.InDelta(t, 0, tm.Start, 1e-12)
		require.InDelta(t, 10, tm.End, 1e-9, "flow %d", k)
	}
	// When B ends early, A and C speed up.
	flows[1].Bytes = 6 // B ends at 2 s; then A alone on egress 0, C alone on ingress 2
	times, err = f.SimulateFlows(flows)
	require.NoError(t, err)
	require.InDelta(t, 2, times[1].End, 1e-9)
	require.InDelta(t, 2+(70-14)/10.0, times[0].End, 1e-9)
	require.InDelta(t, 2+(30-6)/6.0, times[2].End, 1e-9)
}

func TestSimulateFlowsCapsStartsAndOrder(t *testing.T) {
	f := switchFabric(10, 10, 10)
	f.Latency = Matrix(3, 0.25)
	flows := []Flow{
		{Src: 0, Dst: 1, Bytes: 20, Rate: 2},           // capped: 10 s
		{Src: 0, Dst: 2, Bytes: 40},                    // takes the rest of rank 0's egress: 8 B/s
		{Src: 1, Dst: 2, Bytes: 0, Start: 1},           // nothing to send: start-up only
		{Src: 2, Dst: 0, Bytes: 10, After: []int{0}},   // waits for the capped flow
		{Src: 1, Dst: 0, Bytes: 10, Start: 3, Rate: 5}, // starts late
	}
	times, err := f.SimulateFlows(flows)
	require.NoError(t, err)
	want := []FlowTimes{
		{0, 0.25 + 10},
		{0, 0.25 + 40.0/8},
		{1, 1.25},
		{10.25, 10.25 + 0.25 + 1},
		{3, 3.25 + 2},
	}
	for k := range want {
		require.InDelta(t, want[k].Start, times[k].Start, 1e-9, "flow %d start", k)
		require.InDelta(t, want[k].End, times[k].End, 1e-9, "flow %d end", k)
	}
}

func TestSimulateFlowsErrors(t *testing.T) {
	f := switchFabric(1, 1)
	for name, tc := range map[string]struct {
		flows []Flow
		want  string
	}{
		"rank range": {[]Flow{{Src: 0, Dst: 2, Bytes: 1}}, "flow 0 (0->2): rank out of range [0,2)"},
		"to itself":  {[]Flow{{Src: 1, Dst: 1, Bytes: 1}}, "goes to its own source"},
		"negative":   {[]Flow{{Src: 0, Dst: 1, Bytes: -1}}, "negative size -1"},
		"bad start":  {[]Flow{{Src: 0, Dst: 1, Start: math.NaN()}}, "start NaN"},
		"bad rate":   {[]Flow{{Src: 0, Dst: 1, Rate: -2}}, "rate -2"},
		"dep range":  {[]Flow{{Src: 0, Dst: 1, After: []int{3}}}, "waits for flow 3"},
		"cycle": {[]Flow{{Src: 0, Dst: 1, Bytes: 1, After: []int{1}}, {Src: 1, Dst: 0, Bytes: 1, After: []int{0}}},
			"2 flows wait for each other in a cycle"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.SimulateFlows(tc.flows)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// referenceMaxMin is the textbook progressive filling: raise every
// unfrozen flow's rate by the largest step that fills no resource beyond
// its capacity and takes no flow beyond its cap, freeze what is full,
// repeat.
func referenceMaxMin(f *Fabric, flows []Flow) []float64 {
	res := f.fabricResources()
	idx := f.segmentIndex()
	rate := make([]float64, len(flows))
	frozen := make([]bool, len(flows))
	routes := make([][]int32, len(flows))
	for k, fl := range flows {
		routes[k] = f.route(nil, idx, fl.Src, fl.Dst)
	}
	for {
		used := make([]float64, len(res))
		count := make([]int, len(res))
		for k := range flows {
			for _, r := range routes[k] {
				used[r] += rate[k]
				if !frozen[k] {
					count[r]++
				}
			}
		}
		step := math.Inf(1)
		for r := range res {
			if count[r] > 0 {
				step = min(step, (res[r].cap-used[r])/float64(count[r]))
			}
		}
		for k, fl := range flows {
			if !frozen[k] && fl.Rate > 0 {
				step = min(step, fl.Rate-rate[k])
			}
		}
		if math.IsInf(step, 1) {
			return rate
		}
		for k := range flows {
			if !frozen[k] {
				rate[k] += step
			}
		}
		for r := range res {
			used[r] = 0
		}
		for k := range flows {
			for _, r := range routes[k] {
				used[r] += rate[k]
			}
		}
		for k, fl := range flows {
			if frozen[k] {
				continue
			}
			if fl.Rate > 0 && rate[k] >= fl.Rate*(1-1e-12) {
				frozen[k] = true
			}
			for _, r := range routes[k] {
				if used[r] >= res[r].cap*(1-1e-12) {
					frozen[k] = true
				}
			}
		}
	}
}

// TestShareAgainstReference: the heap-based progressive filling gives
// every flow the rate of the textbook one, on random fabrics with
// segments and random caps.
func TestShareAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.IntN(6)
		f := &Fabric{}
		for r := 0; r < n; r++ {
			f.Egress = append(f.Egress, []float64{1 + float64(rng.IntN(20))})
			f.Ingress = append(f.Ingress, []float64{1 + float64(rng.IntN(20))})
		}
		if n >= 4 && rng.IntN(2) == 0 {
			cut := 1 + rng.IntN(n-1)
			var a, b []int
			for r := 0; r < n; r++ {
				if r < cut {
					a = append(a, r)
				} else {
					b = append(b, r)
				}
			}
			f.Segments = []Segment{{Name: "bb", A: a, B: b, AB: 1 + float64(rng.IntN(10)), BA: 1 + float64(rng.IntN(10))}}
		}
		var flows []Flow
		for k := 0; k < 1+rng.IntN(12); k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			if i == j {
				continue
			}
			fl := Flow{Src: i, Dst: j, Bytes: 100}
			if rng.IntN(3) == 0 {
				fl.Rate = 0.5 + float64(rng.IntN(8))
			}
			flows = append(flows, fl)
		}
		s, err := newFlowSim(f, flows)
		require.NoError(t, err)
		for k := range flows {
			s.active = append(s.active, k)
		}
		s.share()
		want := referenceMaxMin(f, flows)
		for k := range flows {
			require.InDelta(t, want[k], s.rate[k], 1e-9*max(1, want[k]), "trial %d flow %d (%d->%d cap %v)", trial, k, flows[k].Src, flows[k].Dst, flows[k].Rate)
		}
	}
}

// pacingExample is a fabric on which fair sharing idles the critical NIC:
// rank 2's ingress must carry A (0->2) and C (1->2), 100 bytes each, but
// while rank 0 and rank 1 also send four short flows each to ranks 3-6,
// fair sharing of their egress gives A and C 2 B/s each, and rank 2's
// ingress runs at 4 of its 10 B/s.
func pacingExample() (*Fabric, *Exchange) { return scaledPacingExample(1, 100, 10) }

// scaledPacingExample is pacingExample with NICs of nic times 10 B/s
// (100 for ranks 3-6), large messages of big bytes and small ones of
// small bytes.
func scaledPacingExample(nic float64, big, small int64) (*Fabric, *Exchange) {
	f := switchFabric(10*nic, 10*nic, 10*nic, 100*nic, 100*nic, 100*nic, 100*nic)
	x := &Exchange{Bytes: make([][]int64, 7)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, 7)
	}
	x.Bytes[0][2], x.Bytes[1][2] = big, big
	for d := 3; d < 7; d++ {
		x.Bytes[0][d], x.Bytes[1][d] = small, small
	}
	return f, x
}

func TestPlanFlowsPacedReachesTheBound(t *testing.T) {
	f, x := pacingExample()
	b, err := f.Bound(x)
	require.NoError(t, err)
	require.Equal(t, 20.0, b.Seconds)
	require.Equal(t, "rank 2 ingress", b.Resource)

	naive, err := PlanFlows(f, x, Naive, FlowOptions{})
	require.NoError(t, err)
	require.NoError(t, ValidateExchange(x, naive))
	// Fair sharing: 5 s at 2 B/s for A and C, then 5 B/s each for 90 bytes.
	require.InDelta(t, 23, naive.Predicted, 1e-9)
	require.Equal(t, 20.0, naive.LowerBound)

	paced, err := PlanFlows(f, x, Paced, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	require.NoError(t, ValidateExchange(x, paced))
	require.InDelta(t, 20, paced.Predicted, 1e-9, "every paced flow ends at the bound")
	for _, tr := range paced.Transfers {
		require.InDelta(t, float64(tr.Bytes)/20, tr.Rate, 1e-12, "%d->%d", tr.Src, tr.Dst)
		require.InDelta(t, 20, tr.End, 1e-9, "%d->%d", tr.Src, tr.Dst)
	}

	// With the default small-message rule, messages of 64 KiB go unpaced
	// and first. While they run they take their fair share of rank 0's
	// and rank 1's egress, so the paced ones end later than the bound by
	// at most the time the small ones need there: 4 x 64 KiB at 10 MB/s.
	mf, mx := scaledPacingExample(1e6, 100e6, 64<<10)
	mixed, err := PlanFlows(mf, mx, Paced, FlowOptions{})
	require.NoError(t, err)
	require.NoError(t, ValidateExchange(mx, mixed))
	require.GreaterOrEqual(t, mixed.Predicted, 20.0)
	require.LessOrEqual(t, mixed.Predicted, 20+4*65536/10e6)
	for _, tr := range mixed.Transfers {
		if tr.Bytes == 64<<10 {
			require.Zero(t, tr.Rate, "%d->%d", tr.Src, tr.Dst)
			require.Less(t, tr.SendSeq, 4, "small messages are posted first")
			require.Less(t, tr.End, 1.0)
		} else {
			require.Equal(t, 5e6, tr.Rate)
			require.Equal(t, 4, tr.SendSeq, "%d->%d", tr.Src, tr.Dst)
		}
	}

	_, err = PlanFlows(f, x, OpenShop, FlowOptions{})
	require.ErrorContains(t, err, "not a flow-level plan")
}

func TestPlanExchangeOnAuto(t *testing.T) {
	f, x := pacingExample()
	m := &Model{Latency: Matrix(7, 0), Bandwidth: Matrix(7, 0)}
	for i := range m.Bandwidth {
		for j := range m.Bandwidth {
			m.Bandwidth[i][j] = min(f.Out(i), f.In(j))
		}
	}
	p, err := PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	require.Equal(t, Paced, p.Algorithm)
	require.InDelta(t, 20, p.Predicted, 1e-9)
	require.NoError(t, ValidateExchange(x, p))

	// An executor that cannot pace: auto picks among the others.
	np, err := PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{SmallBytes: -1, NoPacing: true})
	require.NoError(t, err)
	require.NotEqual(t, Paced, np.Algorithm)
	require.InDelta(t, 20, np.Predicted, 1e-9, "a one-port plan serialises rank 2's two large receives")

	// On a plain switch, naive and paced are predicted to tie at the
	// bound; auto paces (naive must win by unpacedMargin), unless the
	// links cannot.
	sw := switchFabric(100, 100, 100, 100)
	ux := &Exchange{Bytes: [][]int64{{0, 50, 50, 50}, {50, 0, 50, 50}, {50, 50, 0, 50}, {50, 50, 50, 0}}}
	um := NewUniformModel(4, 0, 100)
	tie, err := PlanExchangeOn(um, sw, ux, Auto, Options{Seed: 1}, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	require.Equal(t, Paced, tie.Algorithm)
	nv, err := PlanExchangeOn(um, sw, ux, Naive, Options{Seed: 1}, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	require.InDelta(t, nv.Predicted, tie.Predicted, 1e-9)
	tie, err = PlanExchangeOn(um, sw, ux, Auto, Options{Seed: 1}, FlowOptions{SmallBytes: -1, NoPacing: true})
	require.NoError(t, err)
	require.Equal(t, Naive, tie.Algorithm)
	// An exchange shorter than pacedMinSpan: posting everything at once.
	fast := switchFabric(1e9, 1e9, 1e9, 1e9)
	tie, err = PlanExchangeOn(NewUniformModel(4, 0, 1e9), fast, ux, Auto, Options{Seed: 1}, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	require.Less(t, tie.Predicted, pacedMinSpan)
	require.NotEqual(t, Paced, tie.Algorithm)

	// A one-port planner by name: its plan, replayed on the fabric.
	os, err := PlanExchangeOn(m, f, x, OpenShop, Options{Seed: 1}, FlowOptions{})
	require.NoError(t, err)
	require.Equal(t, OpenShop, os.Algorithm)
	require.NoError(t, ValidateExchange(x, os))
	require.GreaterOrEqual(t, os.Predicted, p.Predicted)

	_, err = PlanExchangeOn(m, f, x, FEF, Options{}, FlowOptions{})
	require.ErrorContains(t, err, "plans multicast")
}

// TestFabricReplayMatchesOnePort: on a fabric whose pair rates are the
// slower NIC of each pair, a one-port plan runs one message per NIC at a
// time, so replaying it on the fabric gives the pairwise model's times.
func TestFabricReplayMatchesOnePort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 40; trial++ {
		n := 2 + rng.IntN(7)
		nic := make([]float64, n)
		for r := range nic {
			nic[r] = float64(1+rng.IntN(9)) * 1e6
		}
		m := &Model{Latency: Matrix(n, 0), Bandwidth: Matrix(n, 0)}
		x := &Exchange{Bytes: make([][]int64, n)}
		for i := 0; i < n; i++ {
			x.Bytes[i] = make([]int64, n)
			for j := 0; j < n; j++ {
				if i != j {
					m.Latency[i][j] = float64(rng.IntN(100)) * 1e-6
					m.Bandwidth[i][j] = min(nic[i], nic[j])
					x.Bytes[i][j] = int64(rng.IntN(1 << 20))
				}
			}
		}
		f := FabricFromModel(m)
		for _, algo := range Algorithms(KindAlltoall) {
			p, err := PlanExchange(m, x, algo, Options{Seed: 1})
			require.NoError(t, err)
			r, err := f.SimulateExchange(p)
			require.NoError(t, err)
			require.InDelta(t, p.Predicted, r.Predicted, 1e-9*p.Predicted+1e-12, "trial %d %s", trial, algo)
			require.NoError(t, ValidateExchange(x, r))
		}
	}
}

func TestFlowPlanJSONAndValidation(t *testing.T) {
	f, x := pacingExample()
	p, err := PlanFlows(f, x, Paced, FlowOptions{SmallBytes: -1})
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"rate":5`)
	var q Plan
	require.NoError(t, json.Unmarshal(b, &q))
	require.Equal(t, p.Transfers, q.Transfers)

	bad := *p
	bad.Transfers = append([]Transfer(nil), p.Transfers...)
	bad.Algorithm = Naive
	require.ErrorContains(t, ValidateExchange(x, &bad), "only a paced plan paces")
	bad.Algorithm = Paced
	bad.Transfers[0].Rate = math.Inf(1)
	require.ErrorContains(t, ValidateExchange(x, &bad), "rate +Inf")
}

// TestPlanExchangeOnLarge: above FlowSimLimit ranks Auto estimates the
// flow plans from the bound, and a one-port plan still has to beat
// naive's estimate by its margin.
func TestPlanExchangeOnLarge(t *testing.T) {
	n := FlowSimLimit + 4
	nic := make([]float64, n)
	for r := range nic {
		nic[r] = 10e6
	}
	nic[0] = 100e6 // a fast rank feeds slow ones: one-port plans lose
	f := switchFabric(nic...)
	m := &Model{Latency: Matrix(n, 0), Bandwidth: Matrix(n, 0)}
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := 0; i < n; i++ {
		x.Bytes[i] = make([]int64, n)
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = min(nic[i], nic[j])
		}
	}
	for j := 1; j < n; j++ {
		x.Bytes[0][j] = 1e6
	}
	p, err := PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{NoPacing: true})
	require.NoError(t, err)
	require.Equal(t, Naive, p.Algorithm)
	b, err := f.Bound(x)
	require.NoError(t, err)
	require.InDelta(t, b.Seconds/naiveMargin, p.Predicted, 1e-12)
	require.NoError(t, ValidateExchange(x, p))

	// Uniform NICs, everyone to everyone: the one-port plans reach the
	// bound, which naive's estimate does not claim.
	for r := range nic {
		f.Egress[r][0], f.Ingress[r][0] = 10e6, 10e6
		for j := 0; j < n; j++ {
			m.Bandwidth[r][j] = 10e6
			if r != j {
				x.Bytes[r][j] = 1e6
			}
		}
	}
	p, err = PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{NoPacing: true})
	require.NoError(t, err)
	require.NotEqual(t, Naive, p.Algorithm)
}

// TestSimulateFlowsClockStep: a random instance (11 ranks, rates from
// 4.7 kB/s to 89 GB/s, 1 GiB messages) on which the simulator never
// ended: late in a simulation of days, a fast flow was left with a few
// bytes that take less than the clock's rounding step, so time stood
// still. Every flow now ends at the event its own end time set.
func TestSimulateFlowsClockStep(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "flowsim_clock_step.json"))
	require.NoError(t, err)
	var c struct {
		Exchange Exchange `json:"exchange"`
		Model    Model    `json:"model"`
	}
	require.NoError(t, json.Unmarshal(b, &c))
	for _, algo := range []Algorithm{Naive, Paced, Auto} {
		p, err := PlanExchangeOn(&c.Model, nil, &c.Exchange, algo, Options{Seed: 1}, FlowOptions{})
		require.NoError(t, err, algo)
		require.NoError(t, ValidateExchange(&c.Exchange, p), algo)
		require.Greater(t, p.Predicted, 0.0, algo)
	}
}
