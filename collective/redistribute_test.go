package collective

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// rdFigure2 is the graph of Figure 2 of Jeannot and Wagner as recovered
// from its caption: k = 3, beta = 1, a schedule of three steps costing
// (1+5) + (1+3) + (1+4) = 15 in which the edge of weight 8 is cut into two
// pieces of 4. The figure itself is not in the text; this graph is the
// one on which that schedule is exactly the caption's, every edge but the
// 8 is sent whole, and 15 is optimal because it meets the lower bound:
// beta*max(Delta=3, ceil(7/3)=3) + max(W=12, P/k=31/3) = 3 + 12 = 15.
// Senders a, b, c are rows; receivers x, y, z columns; rate 1 byte/s, so
// bytes are the paper's weights.
func rdFigure2() *Redistribution {
	return &Redistribution{Senders: 3, Receivers: 3, Rate: 1, K: 3, Setup: 1,
		Bytes: [][]int64{
			{8, 3, 0}, // a-x 8, a-y 3
			{0, 5, 3}, // b-y 5, b-z 3
			{3, 4, 5}, // c-x 3, c-y 4, c-z 5
		}}
}

// rdFigure2Plan is the caption's schedule.
func rdFigure2Plan() *Plan {
	return &Plan{Kind: KindRedistribute, Algorithm: OGGP, Ranks: 6, Predicted: 15, LowerBound: 15,
		Steps: []Step{
			{Duration: 1 + 5, Transfers: []StepTransfer{{Src: 0, Dst: 0, Bytes: 4}, {Src: 1, Dst: 1, Bytes: 5}, {Src: 2, Dst: 2, Bytes: 5}}},
			{Duration: 1 + 3, Transfers: []StepTransfer{{Src: 0, Dst: 1, Bytes: 3}, {Src: 1, Dst: 2, Bytes: 3}, {Src: 2, Dst: 0, Bytes: 3}}},
			{Duration: 1 + 4, Transfers: []StepTransfer{{Src: 0, Dst: 0, Bytes: 4}, {Src: 2, Dst: 1, Bytes: 4}}},
		}}
}

func rdPlan(t testing.TB, r *Redistribution, a Algorithm) *Plan {
	t.Helper()
	p, err := PlanRedistribution(r, a, Options{})
	require.NoError(t, err)
	require.NoError(t, ValidateRedistribution(r, p), "%s plan of %+v", a, r)
	return p
}

func TestRedistributionFigure2(t *testing.T) {
	r := rdFigure2()
	require.InDelta(t, 15, RedistributionLowerBound(r), 1e-12)

	hand := rdFigure2Plan()
	require.NoError(t, ValidateRedistribution(r, hand), "the caption's schedule is valid")
	sim, err := SimulateRedistribution(r, hand)
	require.NoError(t, err)
	require.Equal(t, 15.0, sim.Predicted)
	require.Equal(t, hand, sim)

	// OGGP, worked by hand: the weight-regular graph has degree
	// D = max(W=12, ceil(31/3)=11) = 12, a padding edge of 3*12-31 = 5 and
	// one added vertex a side. Its max-min perfect matching is unique,
	// {a-x, b-y, c-z} plus two added edges, cut to 5: step 1 costs 1+5.
	// Every max-min matching after that gives a step of 3 (1+3), one of 2
	// (1+2) and, as sender c still has two units to send and no edge of
	// weight 2 is left at sender a, two steps of 1 (2 x (1+1)): 17.
	o := rdPlan(t, r, OGGP)
	require.Equal(t, 17.0, o.Predicted)
	require.Len(t, o.Steps, 5)
	require.Equal(t, []StepTransfer{{Src: 0, Dst: 0, Bytes: 5}, {Src: 1, Dst: 1, Bytes: 5}, {Src: 2, Dst: 2, Bytes: 5}}, o.Steps[0].Transfers)
	require.Equal(t, 15.0, o.LowerBound)

	// GGP's matchings are arbitrary; it is a 2-approximation and here no
	// better than OGGP.
	g := rdPlan(t, r, GGP)
	require.GreaterOrEqual(t, g.Predicted, o.Predicted)
	require.LessOrEqual(t, g.Predicted, 2*g.LowerBound)
}

func TestRedistributionHandChecked(t *testing.T) {
	cases := []struct {
		name      string
		r         *Redistribution
		ggp, oggp float64 // -1: not determined by the algorithm, only checked against the bound
		steps     int     // OGGP's step count
		lb        float64
	}{
		{
			// One transfer: one step.
			name: "single", r: &Redistribution{Senders: 1, Receivers: 1, Rate: 1, K: 1, Setup: 1, Bytes: [][]int64{{5}}},
			ggp: 6, oggp: 6, steps: 1, lb: 6,
		},
		{
			// One sender, three receivers: D = 10, k' = 1, the added
			// vertices' edges are never lighter than the real edge they
			// are matched with, so every step sends one transfer whole:
			// 3 steps, 3 + 10.
			name: "one sender", r: &Redistribution{Senders: 1, Receivers: 3, Rate: 1, K: 3, Setup: 1, Bytes: [][]int64{{3, 5, 2}}},
			ggp: 13, oggp: 13, steps: 3, lb: 13,
		},
		{
			// k = 1 and two disjoint transfers of 3 and 5: two perfect
			// matchings exist, each with one real edge; both orders cost
			// (1+3) + (1+5).
			name: "k=1", r: &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 1, Setup: 1, Bytes: [][]int64{{3, 0}, {0, 5}}},
			ggp: 10, oggp: 10, steps: 2, lb: 10,
		},
		{
			// A 10-weight-regular graph: OGGP's max-min matching is the
			// diagonal (min 6), then the 2s form two derangements: three
			// steps, 3 + 10, the lower bound. GGP may start with a mixed
			// matching such as {6, 2, 2} and need a fourth step.
			name: "diagonal", r: &Redistribution{Senders: 3, Receivers: 3, Rate: 1, K: 3, Setup: 1, Bytes: [][]int64{{6, 2, 2}, {2, 6, 2}, {2, 2, 6}}},
			ggp: -1, oggp: 13, steps: 3, lb: 13,
		},
		{
			// beta = 0: the unit is one byte; D = 4 and peeling reaches
			// max(W, P/k) = 4 exactly, in two steps (3 then 1).
			name: "beta=0", r: &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 2, Setup: 0, Bytes: [][]int64{{3, 1}, {1, 3}}},
			ggp: 4, oggp: 4, steps: 2, lb: 4,
		},
		{
			// k = 10 > the 2 possible: k' = 2, D = max(7, 6) = 7 and a
			// padding edge of 2 between new vertices. The only two perfect
			// matchings send b-y in two pieces (5 with a-x, then 2): 6 + 3,
			// one more than the optimum 1 + 7 that sends both at once. The
			// paper's algorithms do not merge such steps.
			name: "k above edges", r: &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 10, Setup: 1, Bytes: [][]int64{{5, 0}, {0, 7}}},
			ggp: 9, oggp: 9, steps: 2, lb: 8,
		},
		{
			// Rate and setup in real units: 1 MB/s, 10 ms setup, so one
			// unit is 10 000 bytes; 25 000 bytes are 3 units. Two
			// transfers from one sender: two steps.
			name: "real units", r: &Redistribution{Senders: 1, Receivers: 2, Rate: 1e6, K: 4, Setup: 0.01, Bytes: [][]int64{{25000, 5000}}},
			ggp: 0.01 + 0.025 + 0.01 + 0.005, oggp: 0.05, steps: 2, lb: 0.02 + 0.03,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.InDelta(t, c.lb, RedistributionLowerBound(c.r), 1e-12)
			o := rdPlan(t, c.r, OGGP)
			require.InDelta(t, c.oggp, o.Predicted, 1e-12)
			require.Len(t, o.Steps, c.steps)
			g := rdPlan(t, c.r, GGP)
			if c.ggp >= 0 {
				require.InDelta(t, c.ggp, g.Predicted, 1e-12)
			}
			require.LessOrEqual(t, g.Predicted, 2*g.LowerBound)
		})
	}
}

// rdRandom draws a redistribution, including degenerate ones: one sender
// or one receiver, empty or full matrices, k = 1 or far above the node
// counts, beta = 0, and byte counts from 1 to near 2^62.
func rdRandom(rng *rand.Rand, maxNodes int) *Redistribution {
	n1, n2 := 1+rng.IntN(maxNodes), 1+rng.IntN(maxNodes)
	r := &Redistribution{Senders: n1, Receivers: n2}
	switch rng.IntN(6) {
	case 0:
		r.K = 1
	case 1:
		r.K = min(n1, n2)
	case 2:
		r.K = 1000
	default:
		r.K = 1 + rng.IntN(max(n1, n2)+2)
	}
	scale := []int64{3, 20, 10000, 1 << 30, 1 << 62}[rng.IntN(5)]
	dens := []float64{0, 0.1, 0.5, 1, rng.Float64()}[rng.IntN(5)]
	for i := 0; i < n1; i++ {
		row := make([]int64, n2)
		for j := range row {
			if rng.Float64() < dens {
				row[j] = 1 + rng.Int64N(scale)
			}
		}
		r.Bytes = append(r.Bytes, row)
	}
	r.Rate = []float64{1, 1e6, 3.7, 1e-3, 1.25e9}[rng.IntN(5)]
	r.Setup = []float64{0, 1, 0.01, 1e-9, 100, rng.Float64()}[rng.IntN(6)]
	return r
}

func TestRedistributionRandomValid(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(2, 7))
	for it := 0; it < n; it++ {
		r := rdRandom(rng, 9)
		for _, a := range []Algorithm{BruteForce, GGP, OGGP, Auto} {
			p, err := PlanRedistribution(r, a, Options{})
			require.NoError(t, err)
			if err := ValidateRedistribution(r, p); err != nil {
				t.Fatalf("instance %d, %s: %v\n%+v", it, a, err, r)
			}
			require.Equal(t, r.Senders+r.Receivers, p.Ranks)
			if p.Algorithm != BruteForce {
				require.GreaterOrEqual(t, p.Predicted, p.LowerBound*(1-1e-9), "instance %d %s below the lower bound", it, a)
			}
			if a == Auto {
				continue
			}
			s, err := SimulateRedistribution(r, p)
			require.NoError(t, err)
			require.Equal(t, p, s, "simulating a plan reproduces its prediction")
			b, err := json.Marshal(p)
			require.NoError(t, err)
			var back Plan
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, *p, back, "JSON round trip")
		}
	}
}

func TestRedistributionDegenerate(t *testing.T) {
	zero := &Redistribution{Senders: 3, Receivers: 2, Rate: 1, K: 2, Setup: 1, Bytes: [][]int64{{0, 0}, {0, 0}, {0, 0}}}
	for _, a := range Algorithms(KindRedistribute) {
		p := rdPlan(t, zero, a)
		require.Empty(t, p.Steps)
		require.Zero(t, p.Predicted)
		require.Zero(t, p.LowerBound)
	}
	huge := &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 2, Setup: 1,
		Bytes: [][]int64{{math.MaxInt64, math.MaxInt64 - 1}, {1, math.MaxInt64}}}
	tiny := &Redistribution{Senders: 2, Receivers: 3, Rate: 1e12, K: 5, Setup: 0, Bytes: [][]int64{{1, 1, 0}, {0, 1, 1}}}
	for _, r := range []*Redistribution{huge, tiny} {
		for _, a := range Algorithms(KindRedistribute) {
			rdPlan(t, r, a)
		}
	}
	// Brute force is for comparison only: Auto picks a schedule even when
	// the setup time dominates and brute force's fluid model predicts less.
	for _, setup := range []float64{100, 0.001} {
		r := &Redistribution{Senders: 4, Receivers: 4, Rate: 1, K: 2, Setup: setup, Bytes: rdFull(4, 4, 10)}
		p, err := PlanRedistribution(r, Auto, Options{})
		require.NoError(t, err)
		require.Contains(t, []Algorithm{GGP, OGGP}, p.Algorithm, "setup %v", setup)
	}
}

func rdFull(n1, n2 int, b int64) [][]int64 {
	m := make([][]int64, n1)
	for i := range m {
		m[i] = make([]int64, n2)
		for j := range m[i] {
			m[i][j] = b + int64(i+2*j)
		}
	}
	return m
}

// TestRedistributionApproximation checks Theorem 1 (GGP, hence OGGP, is a
// 2-approximation) against the lower bound on random instances of the
// paper's shape, and that OGGP is better than GGP on average.
func TestRedistributionApproximation(t *testing.T) {
	n := 4000
	if testing.Short() {
		n = 400
	}
	rng := rand.New(rand.NewPCG(3, 11))
	var sumG, sumO, worstG, worstO float64
	worse, better, used := 0, 0, 0
	for it := 0; it < n; it++ {
		var r *Redistribution
		if it%2 == 0 {
			r = rdRandom(rng, 12)
		} else {
			r = rdPaperInstance(rng, 20, []int64{20, 10000}[it/2%2])
		}
		if RedistributionLowerBound(r) == 0 {
			continue
		}
		used++
		g := rdPlan(t, r, GGP)
		o := rdPlan(t, r, OGGP)
		rg, ro := g.Predicted/g.LowerBound, o.Predicted/o.LowerBound
		require.LessOrEqual(t, rg, 2+1e-9, "GGP above twice the lower bound on %+v", r)
		require.LessOrEqual(t, ro, 2+1e-9, "OGGP above twice the lower bound on %+v", r)
		sumG += rg
		sumO += ro
		worstG, worstO = math.Max(worstG, rg), math.Max(worstO, ro)
		switch {
		case o.Predicted > g.Predicted*(1+1e-12):
			worse++
		case o.Predicted < g.Predicted*(1-1e-12):
			better++
		}
	}
	t.Logf("%d instances: mean ratio GGP %.4f OGGP %.4f, worst GGP %.4f OGGP %.4f; OGGP better on %d, worse on %d (%.1f%%)",
		used, sumG/float64(used), sumO/float64(used), worstG, worstO, better, worse, 100*float64(worse)/float64(used))
	require.LessOrEqual(t, sumO, sumG, "OGGP must not be worse than GGP on average")
	require.Greater(t, better, worse)
}

// rdPaperInstance draws an instance like those of section 5.1: up to
// 2*maxSide nodes, a random number of edges up to maxSide^2, weights
// uniform in 1..maxWeight, beta = 1, k random up to min(n1, n2).
func rdPaperInstance(rng *rand.Rand, maxSide int, maxWeight int64) *Redistribution {
	n1, n2 := 1+rng.IntN(maxSide), 1+rng.IntN(maxSide)
	r := &Redistribution{Senders: n1, Receivers: n2, Rate: 1, Setup: 1, K: 1 + rng.IntN(min(n1, n2))}
	r.Bytes = make([][]int64, n1)
	for i := range r.Bytes {
		r.Bytes[i] = make([]int64, n2)
	}
	m := 1 + rng.IntN(n1*n2)
	for _, c := range rng.Perm(n1 * n2)[:m] {
		r.Bytes[c/n2][c%n2] = 1 + rng.Int64N(maxWeight)
	}
	return r
}

func TestPlanRedistributionErrors(t *testing.T) {
	good := rdFigure2()
	_, err := PlanRedistribution(nil, GGP, Options{})
	require.ErrorContains(t, err, "collective: nil redistribution")
	_, err = PlanRedistribution(good, MaxMatch, Options{})
	require.ErrorContains(t, err, "plans alltoall")
	_, err = PlanRedistribution(good, "nope", Options{})
	require.ErrorContains(t, err, "unknown algorithm")
	bad := rdFigure2()
	bad.K = 0
	_, err = PlanRedistribution(bad, OGGP, Options{})
	require.ErrorContains(t, err, "k = 0")
	bad = rdFigure2()
	bad.Bytes = bad.Bytes[:2]
	_, err = PlanRedistribution(bad, OGGP, Options{})
	require.ErrorContains(t, err, "rows")
	bad = rdFigure2()
	bad.Bytes[1][1] = -1
	_, err = PlanRedistribution(bad, GGP, Options{})
	require.ErrorContains(t, err, "negative")
	require.True(t, math.IsNaN(RedistributionLowerBound(bad)))
	require.True(t, math.IsNaN(RedistributionLowerBound(nil)))
	_, err = SimulateRedistribution(bad, rdFigure2Plan())
	require.Error(t, err)
	_, err = SimulateRedistribution(good, nil)
	require.ErrorContains(t, err, "nil plan")
	require.Error(t, ValidateRedistribution(nil, rdFigure2Plan()))
}

func TestValidateRedistributionRejects(t *testing.T) {
	r := rdFigure2()
	bf := rdPlan(t, r, BruteForce)
	cases := []struct {
		name string
		edit func(p *Plan) *Plan
		r    func(r *Redistribution)
		want string
	}{
		{name: "nil plan", edit: func(*Plan) *Plan { return nil }, want: "nil plan"},
		{name: "wrong kind", edit: func(p *Plan) *Plan { p.Kind = KindAlltoall; return p }, want: `plan kind "alltoall"`},
		{name: "wrong algorithm", edit: func(p *Plan) *Plan { p.Algorithm = OpenShop; return p }, want: "not a redistribution planner"},
		{name: "wrong ranks", edit: func(p *Plan) *Plan { p.Ranks = 5; return p }, want: "5 ranks"},
		{name: "missing bytes", edit: func(p *Plan) *Plan { p.Steps[1].Transfers[0].Bytes--; return p }, want: "pair 0->1: plan delivers 2 of its 3 bytes (1 missing)"},
		{name: "missing transfer", edit: func(p *Plan) *Plan {
			p.Steps[2].Transfers = p.Steps[2].Transfers[1:]
			return p
		}, want: "pair 0->0: plan delivers 4 of its 8 bytes (4 missing)"},
		{name: "duplicated bytes", edit: func(p *Plan) *Plan { p.Steps[2].Transfers[0].Bytes++; return p }, want: "pair 0->0 receives 1 bytes more than the matrix's 8"},
		{name: "duplicated step", edit: func(p *Plan) *Plan {
			p.Steps = append(p.Steps, p.Steps[1])
			return p
		}, want: "step 3 transfer 0: pair 0->1 receives 3 bytes more"},
		{name: "extra piece", edit: func(p *Plan) *Plan {
			p.Steps[2].Transfers = append(p.Steps[2].Transfers, StepTransfer{Src: 1, Dst: 2, Bytes: 1})
			return p
		}, want: "step 2 transfer 2: pair 1->2 receives 1 bytes more than the matrix's 3"},
		{name: "unrequested pair", edit: func(p *Plan) *Plan {
			p.Steps = append(p.Steps, Step{Duration: 2, Transfers: []StepTransfer{{Src: 1, Dst: 0, Bytes: 1}}})
			p.Predicted += 2
			return p
		}, want: "step 3 transfer 0: pair 1->0 has no data in the matrix, plan sends 1 bytes"},
		{name: "more than k", edit: func(p *Plan) *Plan { return p }, r: func(r *Redistribution) { r.K = 2 }, want: "step 0 has 3 transfers, more than k = 2"},
		{name: "sender twice", edit: func(p *Plan) *Plan { p.Steps[2].Transfers[1].Src = 0; return p }, want: "step 2: sender 0 takes part in transfers 0 and 1"},
		{name: "receiver twice", edit: func(p *Plan) *Plan { p.Steps[0].Transfers[2].Dst = 1; return p }, want: "step 0: receiver 1 takes part in transfers 1 and 2"},
		{name: "sender out of range", edit: func(p *Plan) *Plan { p.Steps[0].Transfers[0].Src = 3; return p }, want: "sender 3 out of range [0,3)"},
		{name: "negative sender", edit: func(p *Plan) *Plan { p.Steps[0].Transfers[0].Src = -1; return p }, want: "sender -1 out of range"},
		{name: "receiver out of range", edit: func(p *Plan) *Plan { p.Steps[1].Transfers[2].Dst = 7; return p }, want: "step 1 transfer 2: receiver 7 out of range [0,3)"},
		{name: "zero bytes", edit: func(p *Plan) *Plan { p.Steps[0].Transfers[1].Bytes = 0; return p }, want: "step 0 transfer 1 (1->1): 0 bytes, must be positive"},
		{name: "negative bytes", edit: func(p *Plan) *Plan { p.Steps[0].Transfers[1].Bytes = -5; return p }, want: "-5 bytes, must be positive"},
		{name: "empty step", edit: func(p *Plan) *Plan { p.Steps = append(p.Steps, Step{}); return p }, want: "step 3 has no transfers"},
		{name: "short duration", edit: func(p *Plan) *Plan { p.Steps[0].Duration = 5; p.Predicted = 14; return p }, want: "step 0: duration 5 s inconsistent with its bytes"},
		{name: "NaN duration", edit: func(p *Plan) *Plan { p.Steps[1].Duration = math.NaN(); return p }, want: "step 1: duration NaN"},
		{name: "predicted", edit: func(p *Plan) *Plan { p.Predicted = 14; return p }, want: "predicted completion 14 s, but the steps add up to 15 s"},
		{name: "lower bound", edit: func(p *Plan) *Plan { p.LowerBound = 1; return p }, want: "lower bound 1 s, want 15 s"},
		{name: "brute force as a schedule", edit: func(*Plan) *Plan {
			q := *bf
			q.Algorithm = GGP
			return &q
		}, want: "step 0 has 7 transfers, more than k = 3"},
		{name: "brute force in two steps", edit: func(*Plan) *Plan {
			q := rdFigure2Plan()
			q.Algorithm = BruteForce
			return q
		}, want: "brute-force plan has 3 steps, want 1"},
		{name: "brute force with a wrong duration", edit: func(*Plan) *Plan {
			q := *bf
			q.Steps = []Step{{Duration: 13, Transfers: bf.Steps[0].Transfers}}
			q.Predicted = 13
			return &q
		}, want: "step 0: duration 13 s inconsistent"},
		{name: "brute force sending a pair twice", edit: func(*Plan) *Plan {
			q := *bf
			ts := append([]StepTransfer{{Src: 0, Dst: 0, Bytes: 4}}, bf.Steps[0].Transfers[1:]...)
			q.Steps = []Step{{Transfers: append(ts, StepTransfer{Src: 0, Dst: 0, Bytes: 4})}}
			return &q
		}, want: "brute-force plan sends pair 0->0 twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr := rdFigure2()
			if c.r != nil {
				c.r(rr)
			}
			err := ValidateRedistribution(rr, c.edit(rdFigure2Plan()))
			require.Error(t, err)
			require.ErrorContains(t, err, c.want)
			require.Contains(t, err.Error(), "collective: ")
		})
	}
	// The untouched plans pass.
	require.NoError(t, ValidateRedistribution(r, rdFigure2Plan()))
	require.NoError(t, ValidateRedistribution(r, bf))
	require.Len(t, bf.Steps, 1)
	require.Len(t, bf.Steps[0].Transfers, 7)
}

func TestSimulateRedistributionRecomputes(t *testing.T) {
	r := rdFigure2()
	p := rdFigure2Plan()
	p.Steps[0].Duration = 100
	p.Predicted = 0
	p.LowerBound = 0
	s, err := SimulateRedistribution(r, p)
	require.NoError(t, err)
	require.Equal(t, rdFigure2Plan(), s)
	require.Equal(t, 100.0, p.Steps[0].Duration, "the input plan is not modified")
	// A plan that breaks the one-port rule still simulates (the validator
	// is the one to reject it), but not one with an index out of range.
	p.Steps[0].Transfers[2].Dst = 1
	_, err = SimulateRedistribution(r, p)
	require.NoError(t, err)
	p.Steps[0].Transfers[2].Dst = 3
	_, err = SimulateRedistribution(r, p)
	require.ErrorContains(t, err, "receiver 3 out of range")
}

func TestRedistributionBruteForceModel(t *testing.T) {
	// One transfer: no contention, setup + bytes/rate.
	one := &Redistribution{Senders: 1, Receivers: 1, Rate: 10, K: 1, Setup: 0.5, Bytes: [][]int64{{100}}}
	require.InDelta(t, 10.5, rdPlan(t, one, BruteForce).Predicted, 1e-12)
	// Two senders into one receiver: its card is oversubscribed and
	// delivers BruteForceGoodput of its rate, shared equally.
	incast := &Redistribution{Senders: 2, Receivers: 1, Rate: 10, K: 2, Setup: 0, Bytes: [][]int64{{100}, {100}}}
	require.InDelta(t, 200/(10*BruteForceGoodput), rdPlan(t, incast, BruteForce).Predicted, 1e-9)
	// Disjoint pairs, k = 1: the backbone carries 2 transfers for 1 slot,
	// 0.9*rate shared; the shorter finishes first, then the longer runs
	// alone at full rate.
	bb := &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 1, Setup: 0, Bytes: [][]int64{{9, 0}, {0, 18}}}
	// Phase 1: both at 0.45 until the 9 finish: 20 s, 9 of 18 left.
	// Phase 2: the 18 alone at 1: 9 s.
	require.InDelta(t, 29, rdPlan(t, bb, BruteForce).Predicted, 1e-9)
	// Never below the bandwidth part of the lower bound.
	rng := rand.New(rand.NewPCG(5, 5))
	for it := 0; it < 300; it++ {
		r := rdRandom(rng, 8)
		r.Setup = 0
		p := rdPlan(t, r, BruteForce)
		require.GreaterOrEqual(t, p.Predicted, RedistributionLowerBound(r)*(1-1e-9))
	}
}

// rdMaxMinBrute returns the best smallest weight over the perfect
// matchings of g (-1 if none), by trying every permutation.
func rdMaxMinBrute(g *kpbsGraph) int64 {
	best := make([][]int64, g.n) // heaviest parallel edge per pair
	for u := range best {
		best[u] = make([]int64, g.n)
	}
	for u := 0; u < g.n; u++ {
		for _, e := range g.adj[u] {
			best[u][g.ev[e]] = max(best[u][g.ev[e]], g.ew[e])
		}
	}
	perm := make([]int, g.n)
	for i := range perm {
		perm[i] = i
	}
	res := int64(-1)
	var rec func(i int, lo int64)
	rec = func(i int, lo int64) {
		if i == g.n {
			res = max(res, lo)
			return
		}
		for j := i; j < g.n; j++ {
			perm[i], perm[j] = perm[j], perm[i]
			if w := best[i][perm[i]]; w > 0 {
				rec(i+1, min(lo, w))
			}
			perm[i], perm[j] = perm[j], perm[i]
		}
	}
	rec(0, math.MaxInt64)
	return res
}

func TestKPBSMaxMinAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for it := 0; it < 2000; it++ {
		n := 1 + rng.IntN(6)
		g := newKPBSGraph(n)
		// A hidden perfect matching plus random (parallel) edges.
		for u, v := range rng.Perm(n) {
			g.addEdge(u, v, 1+rng.Int64N(9), -1)
		}
		for e := rng.IntN(3 * n); e > 0; e-- {
			g.addEdge(rng.IntN(n), rng.IntN(n), 1+rng.Int64N(9), -1)
		}
		want := rdMaxMinBrute(g)
		require.Equal(t, n, g.maximize(1))
		g.maxMin()
		require.Equal(t, n, g.matched(), "still perfect")
		for u := 0; u < n; u++ {
			e := g.mateL[u]
			require.Equal(t, int32(u), g.eu[e])
			require.Equal(t, e, g.mateR[g.ev[e]])
		}
		require.Equal(t, want, g.minMatched(), "instance %d", it)
	}
}

// TestKPBSRegular checks the construction of section 4.2.2 on random
// instances: the graph is D-weight-regular with D = max(W, ceil(P/k')),
// and (Proposition 1) none of its perfect matchings holds more than k'
// original edges, checked exhaustively on small graphs.
func TestKPBSRegular(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	for it := 0; it < 1500; it++ {
		r := rdRandom(rng, 5)
		es := kpbsEdges(r, kpbsQuantum(r))
		if len(es) == 0 {
			continue
		}
		g, d := kpbsRegular(es, r.Senders, r.Receivers, r.K)
		wl, wr := make([]int64, g.n), make([]int64, g.n)
		for e := range g.eu {
			require.Positive(t, g.ew[e])
			wl[g.eu[e]] += g.ew[e]
			wr[g.ev[e]] += g.ew[e]
		}
		for i := 0; i < g.n; i++ {
			require.Equal(t, d, wl[i], "left %d", i)
			require.Equal(t, d, wr[i], "right %d", i)
		}
		act1, act2 := map[int]bool{}, map[int]bool{}
		var p, w int64
		ws, wd := map[int]int64{}, map[int]int64{}
		for _, e := range es {
			act1[e.src], act2[e.dst] = true, true
			p += e.units
			ws[e.src] += e.units
			wd[e.dst] += e.units
			w = max(w, ws[e.src], wd[e.dst])
		}
		kk := int64(min(r.K, len(act1), len(act2)))
		require.Equal(t, max(w, (p+kk-1)/kk), d)
		if g.n > 7 {
			continue
		}
		// Every perfect matching (as a choice of one edge per left
		// vertex, distinct right vertices) has at most k' real edges.
		used := make([]bool, g.n)
		var rec func(u, real int)
		rec = func(u, real int) {
			if u == g.n {
				require.LessOrEqual(t, int64(real), kk)
				return
			}
			for _, e := range g.adj[u] {
				if v := g.ev[e]; !used[v] {
					used[v] = true
					rr := real
					if g.orig[e] >= 0 {
						rr++
					}
					rec(u+1, rr)
					used[v] = false
				}
			}
		}
		rec(0, 0)
	}
}

func TestKPBSBytesExact(t *testing.T) {
	// An edge of 10 bytes and 4 units cut into pieces of 1, 2, 1 units:
	// floor(10*1/4)=2, floor(10*3/4)=7 → 2, 5, 3.
	es := []kpbsEdge{{src: 0, dst: 0, bytes: 10, units: 4}}
	got := kpbsBytes(es, [][]kpbsPiece{{{0, 1}}, {{0, 2}}, {{0, 1}}})
	require.Equal(t, [][]StepTransfer{{{Src: 0, Dst: 0, Bytes: 2}}, {{Src: 0, Dst: 0, Bytes: 5}}, {{Src: 0, Dst: 0, Bytes: 3}}}, got)
	// Near 2^63 bytes: no overflow in the products.
	big := int64(math.MaxInt64)
	es = []kpbsEdge{{bytes: big, units: 3}}
	got = kpbsBytes(es, [][]kpbsPiece{{{0, 1}}, {{0, 1}}, {{0, 1}}})
	require.Equal(t, big, got[0][0].Bytes+got[1][0].Bytes+got[2][0].Bytes)
	// The quantum: beta*rate bytes, at least 1, capped by the total.
	require.Equal(t, int64(1), kpbsQuantum(&Redistribution{Rate: 1e6, Setup: 0, Bytes: [][]int64{{5}}}))
	require.Equal(t, int64(10000), kpbsQuantum(&Redistribution{Rate: 1e6, Setup: 0.01, Bytes: [][]int64{{5}}}))
	require.Equal(t, int64(1), kpbsQuantum(&Redistribution{Rate: 1, Setup: 1e-9, Bytes: [][]int64{{5}}}))
	require.Equal(t, int64(kpbsMaxQuantum), kpbsQuantum(&Redistribution{Rate: 1e300, Setup: 1e300, Bytes: [][]int64{{5}}}))
	q := kpbsQuantum(&Redistribution{Rate: 1, Setup: 0, Bytes: [][]int64{{big, big}}})
	require.GreaterOrEqual(t, float64(q), 2*float64(big)/kpbsMaxUnits)
}

func FuzzPlanRedistribution(f *testing.F) {
	f.Add(uint8(3), uint8(3), uint8(3), uint8(1), []byte{8, 3, 0, 0, 5, 3, 3, 4, 5})
	f.Add(uint8(1), uint8(4), uint8(9), uint8(0), []byte{1, 2, 3, 4})
	f.Add(uint8(5), uint8(2), uint8(1), uint8(200), []byte{255, 0, 7})
	f.Fuzz(func(t *testing.T, n1, n2, k, beta uint8, data []byte) {
		r := &Redistribution{Senders: 1 + int(n1%8), Receivers: 1 + int(n2%8), K: 1 + int(k%10), Rate: 1, Setup: float64(beta) / 16}
		for i := 0; i < r.Senders; i++ {
			row := make([]int64, r.Receivers)
			for j := range row {
				if x := i*r.Receivers + j; x < len(data) {
					row[j] = int64(data[x]) * int64(data[x]) // some large, many zero
				}
			}
			r.Bytes = append(r.Bytes, row)
		}
		for _, a := range []Algorithm{BruteForce, GGP, OGGP} {
			p, err := PlanRedistribution(r, a, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateRedistribution(r, p); err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			if a != BruteForce && p.Predicted > 2*p.LowerBound*(1+1e-9) {
				t.Fatalf("%s: %v > 2 x %v", a, p.Predicted, p.LowerBound)
			}
		}
	})
}

func BenchmarkPlanRedistribution(b *testing.B) {
	for _, size := range []struct{ side, edges int }{{20, 400}, {20, 100}, {50, 2500}} {
		rng := rand.New(rand.NewPCG(1, uint64(size.edges)))
		r := &Redistribution{Senders: size.side, Receivers: size.side, Rate: 1, K: size.side / 2, Setup: 1}
		r.Bytes = make([][]int64, size.side)
		for i := range r.Bytes {
			r.Bytes[i] = make([]int64, size.side)
		}
		for _, c := range rng.Perm(size.side * size.side)[:size.edges] {
			r.Bytes[c/size.side][c%size.side] = 1 + rng.Int64N(10000)
		}
		for _, a := range Algorithms(KindRedistribute) {
			b.Run(fmt.Sprintf("algo=%s/nodes=%d/edges=%d", a, 2*size.side, size.edges), func(b *testing.B) {
				var p *Plan
				for b.Loop() {
					var err error
					if p, err = PlanRedistribution(r, a, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(p.Steps)), "steps")
				b.ReportMetric(p.Predicted/p.LowerBound, "ratio")
			})
		}
	}
}

// TestRedistributionPaced: every transfer at once in one step, each paced
// to its bytes over the bandwidth part of the K-PBS bound, so that all
// end together: the backbone's k bounds it here, then a node's bytes.
func TestRedistributionPaced(t *testing.T) {
	r := &Redistribution{Senders: 2, Receivers: 2, Rate: 1, K: 1, Setup: 0.5, Bytes: [][]int64{{4, 2}, {2, 2}}}
	p, err := PlanRedistribution(r, Paced, Options{})
	require.NoError(t, err)
	require.Equal(t, Paced, p.Algorithm)
	require.Len(t, p.Steps, 1)
	// total 10 bytes over k = 1 transfer at 1 B/s: 10 s.
	require.Equal(t, []StepTransfer{{Src: 0, Dst: 0, Bytes: 4, Rate: 0.4}, {Src: 0, Dst: 1, Bytes: 2, Rate: 0.2},
		{Src: 1, Dst: 0, Bytes: 2, Rate: 0.2}, {Src: 1, Dst: 1, Bytes: 2, Rate: 0.2}}, p.Steps[0].Transfers)
	require.InDelta(t, 10.5, p.Predicted, 1e-12)
	require.NoError(t, ValidateRedistribution(r, p))

	r.K = 3 // now sender 0's 6 bytes bound it: 6 s
	p, err = PlanRedistribution(r, Paced, Options{})
	require.NoError(t, err)
	require.InDelta(t, 4.0/6, p.Steps[0].Transfers[0].Rate, 1e-12)
	require.InDelta(t, 6.5, p.Predicted, 1e-12)
	require.NoError(t, ValidateRedistribution(r, p))
	sim, err := SimulateRedistribution(r, p)
	require.NoError(t, err)
	require.InDelta(t, p.Predicted, sim.Predicted, 1e-12)

	p.Steps[0].Transfers[1].Rate *= 2
	require.ErrorContains(t, ValidateRedistribution(r, p), "rate")
	o, err := PlanRedistribution(r, OGGP, Options{})
	require.NoError(t, err)
	o.Steps[0].Transfers[0].Rate = 1
	require.ErrorContains(t, ValidateRedistribution(r, o), "rate 1, want 0")
	require.NotEqual(t, Paced, mustAuto(t, r).Algorithm, "auto never paces: the executor may not")
}

func mustAuto(t *testing.T, r *Redistribution) *Plan {
	t.Helper()
	p, err := PlanRedistribution(r, Auto, Options{})
	require.NoError(t, err)
	return p
}
