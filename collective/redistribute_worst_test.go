package collective

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Jeannot and Wagner report OGGP's worst evaluation ratio (plan / K-PBS
// lower bound) as 1.15 with weights in 1..20 (Figure 7) and 1.00016 with
// weights up to 10000 (Figure 8); `hetbench sim redistribute` finds 1.50
// and 1.0019. The instances below are drawn by its generator (seed 1):
// Figure 7's worst case and the smallest graph of Figure 8 above 1.00016.
// On both the lower bound is the optimum (a one-step plan reaches it) and
// every run of GGP, whatever perfect matching it takes at each iteration,
// so OGGP under any tie rule, costs what our OGGP does: the gap is the
// published algorithm's, neither the bound's nor our implementation's.
//
// Why: section 4.2.2 pads the graph with edges joining new vertices until
// P(G') = k*D, D = max(W(G), P(G)/k), all of weight D but the last, and
// then makes it D-weight-regular. A pad of weight D has both ends
// saturated, so it is in every perfect matching; each perfect matching
// holds exactly k edges of G' (Proposition 1); and WRGP cuts every edge of
// a step to the same length, the steps' lengths adding up to exactly D.
// So transfers shorter than D that could run side by side in one step
// take turns in the slots the pads leave, each step paying beta.

// rdPeelMin returns the cheapest cost, in units (beta is one unit), of
// peeling the d-weight-regular graph g with WRGP over every choice of
// perfect matching at every iteration: each step costs 1 + the cut w,
// steps made only of added edges cost nothing (they are dropped).
func rdPeelMin(t *testing.T, g *kpbsGraph, d int64) int64 {
	t.Helper()
	w := append([]int64(nil), g.ew...)
	best := int64(math.MaxInt64)
	var peel func(d, cost int64)
	peel = func(d, cost int64) {
		if d == 0 {
			best = min(best, cost)
			return
		}
		if cost >= best {
			return
		}
		// Every perfect matching of the live edges, one left vertex at a
		// time; each is cut and peeled further.
		used := make([]bool, g.n)
		pick := make([]int, g.n)
		var match func(u int)
		match = func(u int) {
			if u < g.n {
				for e := range g.eu {
					if int(g.eu[e]) == u && w[e] > 0 && !used[g.ev[e]] {
						used[g.ev[e]] = true
						pick[u] = e
						match(u + 1)
						used[g.ev[e]] = false
					}
				}
				return
			}
			cut, real := int64(math.MaxInt64), false
			for _, e := range pick {
				cut = min(cut, w[e])
				real = real || g.orig[e] >= 0
			}
			for _, e := range pick {
				w[e] -= cut
			}
			step := int64(0)
			if real {
				step = 1 + cut
			}
			peel(d-cut, cost+step)
			for _, e := range pick {
				w[e] += cut
			}
		}
		match(0)
	}
	peel(d, 0)
	require.Less(t, best, int64(math.MaxInt64), "no perfect matching")
	return best
}

// rdSparse builds an n1 x n2 redistribution at 1 byte/s (bytes read as
// seconds), beta = 1, with the transfers listed as {src, dst, seconds}.
func rdSparse(n1, n2, k int, ts [][3]int64) *Redistribution {
	r := &Redistribution{Senders: n1, Receivers: n2, Rate: 1, K: k, Setup: 1, Bytes: make([][]int64, n1)}
	for i := range r.Bytes {
		r.Bytes[i] = make([]int64, n2)
	}
	for _, x := range ts {
		r.Bytes[x[0]][x[1]] = x[2]
	}
	return r
}

func TestRedistributionWorstCasesOfThePublishedAlgorithm(t *testing.T) {
	cases := []struct {
		name     string
		r        *Redistribution
		lb, oggp float64
		steps    int // OGGP's
	}{
		{
			// Figure 7's generator, k = 6, trial 2893: three disjoint
			// transfers of 1, 1 and 3 s. The optimum sends them in one
			// step, 1 + 3 = 4 = the bound beta*max(1, ceil(3/6)) +
			// max(W = 3, P/k = 5/6). GGP has k' = 3 (three active pairs),
			// D = 3 and pads of 3 and 1 (3*3 - 5 = 4); the 3-pad and the
			// 3-s transfer fill two of the three slots of every step, so
			// the two 1-s transfers and the 1-pad take turns in the last
			// one: three steps of 1 + 1. With the paper's k = 6 the pads
			// are 3, 3, 3, 3, 1 (6*3 - 5 = 13) and the same single slot is
			// left. Ratio 6/4 = 1.5.
			name: "fig7 k=6", r: rdSparse(16, 10, 6, [][3]int64{{4, 2, 1}, {5, 8, 1}, {11, 0, 3}}),
			lb: 4, oggp: 6, steps: 3,
		},
		{
			// Figure 8's generator, k = 18, trial 2931: two disjoint
			// transfers of 1818 and 111 s. One step, 1 + 1818, is optimal
			// and equals the bound. GGP has k' = 2, D = 1818 and a pad of
			// 2*1818 - 1929 = 1707 which shares the second slot with the
			// 111-s transfer: two steps, 1818 + 2. For any two disjoint
			// transfers w1 < w2 every GGP run costs w2 + 2*beta against an
			// optimum of w2 + beta, a ratio above 1.00016 whenever
			// w2 < 6249 beta. Ratio 1820/1819 = 1.00055.
			name: "fig8 k=18", r: rdSparse(19, 20, 18, [][3]int64{{11, 11, 1818}, {13, 13, 111}}),
			lb: 1819, oggp: 1820, steps: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			require.Equal(t, c.lb, RedistributionLowerBound(r))

			// The lower bound is reached: every transfer in one step.
			var all []StepTransfer
			longest := int64(0)
			for i, row := range r.Bytes {
				for j, b := range row {
					if b > 0 {
						all = append(all, StepTransfer{Src: i, Dst: j, Bytes: b})
						longest = max(longest, b)
					}
				}
			}
			one := &Plan{Kind: KindRedistribute, Algorithm: OGGP, Ranks: r.Senders + r.Receivers,
				Predicted: 1 + float64(longest), LowerBound: c.lb,
				Steps: []Step{{Duration: 1 + float64(longest), Transfers: all}}}
			require.NoError(t, ValidateRedistribution(r, one))
			require.Equal(t, c.lb, one.Predicted, "the optimum is the lower bound")

			o := rdPlan(t, r, OGGP)
			require.Equal(t, c.oggp, o.Predicted)
			require.Len(t, o.Steps, c.steps)
			g := rdPlan(t, r, GGP)
			require.Equal(t, c.oggp, g.Predicted)

			// No choice of matchings does better: the ratio is the
			// algorithm's, not a tie rule's.
			es := kpbsEdges(r, kpbsQuantum(r))
			gr, d := kpbsRegular(es, r.Senders, r.Receivers, r.K)
			require.Equal(t, int64(c.oggp), rdPeelMin(t, gr, d))
			t.Logf("OGGP %g, optimum = lower bound %g: ratio %.5f", c.oggp, c.lb, c.oggp/c.lb)
		})
	}
}

// TestRDPeelMin checks the exhaustive search against the planners on
// small random instances: the best run is never worse than OGGP's or
// GGP's, and never better than the lower bound.
func TestRDPeelMin(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for it := 0; it < 300; it++ {
		n1, n2 := 1+rng.IntN(3), 1+rng.IntN(3)
		r := &Redistribution{Senders: n1, Receivers: n2, Rate: 1, K: 1 + rng.IntN(3), Setup: 1, Bytes: make([][]int64, n1)}
		for i := range r.Bytes {
			r.Bytes[i] = make([]int64, n2)
			for j := range r.Bytes[i] {
				if rng.IntN(3) > 0 {
					r.Bytes[i][j] = 1 + rng.Int64N(6)
				}
			}
		}
		es := kpbsEdges(r, kpbsQuantum(r))
		if len(es) == 0 {
			continue
		}
		g, d := kpbsRegular(es, n1, n2, r.K)
		if g.n > 6 {
			continue
		}
		best := float64(rdPeelMin(t, g, d))
		require.LessOrEqual(t, best, rdPlan(t, r, OGGP).Predicted, "%+v", r)
		require.LessOrEqual(t, best, rdPlan(t, r, GGP).Predicted, "%+v", r)
		require.GreaterOrEqual(t, best, RedistributionLowerBound(r)-1e-9, "%+v", r)
	}
}
