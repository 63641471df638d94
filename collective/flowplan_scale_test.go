package collective

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// Above OnePortSimLimit ranks a one-port plan is not replayed on the
// fabric: its prediction is the later of its one-port completion and the
// fabric bound, and it keeps its one-port times, stretched to the bound
// when the uplink makes that later (and the plan still validates). At the
// limit it is still replayed, and the replay never ends before that
// estimate.
func TestPlanExchangeOnOnePortEstimate(t *testing.T) {
	for _, tc := range []struct {
		n      int
		uplink float64 // the uplink's share of its side's NICs
	}{
		{OnePortSimLimit, 1.0 / 4},
		{OnePortSimLimit + 1, 1.0 / 4},
		{OnePortSimLimit, 1.0 / 400},
		{OnePortSimLimit + 1, 1.0 / 400},
	} {
		n := tc.n
		rng := rand.New(rand.NewPCG(3, uint64(n)))
		nic := make([]float64, n)
		for r := range nic {
			nic[r] = []float64{2.5e6, 12.5e6, 50e6}[rng.IntN(3)]
		}
		m := &Model{Latency: Matrix(n, 1e-4), Bandwidth: Matrix(n, 0)}
		x := &Exchange{Bytes: make([][]int64, n)}
		for i := range n {
			x.Bytes[i] = make([]int64, n)
			for j := range n {
				if i != j {
					m.Bandwidth[i][j] = min(nic[i], nic[j])
					x.Bytes[i][j] = 1 + rng.Int64N(64<<10)
				}
			}
		}
		// Half the ranks behind an uplink of a share of their NICs.
		var a, b []int
		up := 0.0
		for r := range n {
			if r < n/2 {
				a, up = append(a, r), up+nic[r]
			} else {
				b = append(b, r)
			}
		}
		m.Segments = []Segment{{Name: "uplink", A: a, B: b, AB: up * tc.uplink, BA: up * tc.uplink}}
		f := FabricFromModel(m)
		bound, err := f.Bound(x)
		require.NoError(t, err)
		onePort, err := PlanExchange(m, x, OpenShop, Options{Seed: 1})
		require.NoError(t, err)
		p, err := PlanExchangeOn(m, f, x, OpenShop, Options{Seed: 1}, FlowOptions{})
		require.NoError(t, err)
		require.NoError(t, ValidateExchange(x, p))
		require.Equal(t, bound.Seconds, p.LowerBound)
		estimate := max(onePort.Predicted, bound.Seconds)
		switch {
		case n > OnePortSimLimit && bound.Seconds <= onePort.Predicted:
			require.Equal(t, estimate, p.Predicted, "%d ranks: estimated", n)
			require.Equal(t, onePort.Transfers, p.Transfers, "the one-port times are kept")
		case n > OnePortSimLimit:
			require.Equal(t, estimate, p.Predicted, "%d ranks: estimated", n)
			s := bound.Seconds / onePort.Predicted
			for k, tr := range p.Transfers {
				want := onePort.Transfers[k]
				want.Start, want.End = want.Start*s, want.End*s
				require.Equal(t, want, tr, "the one-port times, stretched to the bound")
			}
		default:
			require.GreaterOrEqual(t, p.Predicted, estimate*(1-1e-9), "%d ranks: the replay", n)
			require.NotEqual(t, onePort.Transfers, p.Transfers, "replayed on the fabric")
		}
	}
}

// route finds, through the segment index, exactly the segment directions
// a flow crosses, in the segments' order: checked against every segment's
// sides on random fabrics (ranks on side A, side B, or neither).
func TestRouteSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.IntN(12)
		f := &Fabric{}
		for range n {
			f.Egress, f.Ingress = append(f.Egress, []float64{1}), append(f.Ingress, []float64{1})
		}
		for s := range rng.IntN(6) {
			seg := Segment{Name: fmt.Sprint(s), AB: 1, BA: 1}
			for r := range n {
				switch rng.IntN(3) {
				case 0:
					seg.A = append(seg.A, r)
				case 1:
					seg.B = append(seg.B, r)
				}
			}
			f.Segments = append(f.Segments, seg)
		}
		sides := f.segmentSides()
		idx := f.segmentIndex()
		for i := range n {
			for j := range n {
				want := []int32{int32(i), int32(n + j)}
				for s := range f.Segments {
					switch {
					case sides[s][i] == 1 && sides[s][j] == 2:
						want = append(want, int32(2*n+2*s))
					case sides[s][i] == 2 && sides[s][j] == 1:
						want = append(want, int32(2*n+2*s+1))
					}
				}
				require.Equal(t, want, f.route(nil, idx, i, j), "trial %d, %d->%d", trial, i, j)
			}
		}
	}
}

// postingOrder numbers each rank's sends and receives as one stable sort
// of all the transfers would: unpaced first, then the larger, then the
// plan's order.
func TestPostingOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for trial := 0; trial < 20; trial++ {
		n := 2 + rng.IntN(10)
		p := &Plan{Ranks: n}
		for range rng.IntN(4 * n * n) {
			i, j := rng.IntN(n), rng.IntN(n)
			tr := Transfer{Src: i, Dst: j, Bytes: int64(rng.IntN(4))} // ties on purpose
			if rng.IntN(2) == 0 {
				tr.Rate = 1
			}
			p.Transfers = append(p.Transfers, tr)
		}
		postingOrder(p)
		idx := make([]int, len(p.Transfers))
		for k := range idx {
			idx[k] = k
		}
		ts := p.Transfers
		sort.SliceStable(idx, func(a, b int) bool {
			ta, tb := ts[idx[a]], ts[idx[b]]
			if (ta.Rate == 0) != (tb.Rate == 0) {
				return ta.Rate == 0
			}
			return ta.Bytes > tb.Bytes
		})
		sends, recvs := make([]int, n), make([]int, n)
		for _, k := range idx {
			require.Equal(t, sends[ts[k].Src], ts[k].SendSeq, "trial %d, transfer %d", trial, k)
			require.Equal(t, recvs[ts[k].Dst], ts[k].RecvSeq, "trial %d, transfer %d", trial, k)
			sends[ts[k].Src]++
			recvs[ts[k].Dst]++
		}
	}
}

// Above FlowSimLimit ranks Auto compares estimates without writing their
// transfers, then writes the chosen plan in full.
func TestEstimatedFlowPlansComeWhole(t *testing.T) {
	n := FlowSimLimit + 3
	m, x := exNICCase(n, 4)
	f := FabricFromModel(m)
	for _, p := range []func() (*Plan, error){
		func() (*Plan, error) { return PlanFlowsAuto(f, x, FlowOptions{}) },
		func() (*Plan, error) { return PlanFlowsAuto(f, x, FlowOptions{NoPacing: true}) },
		func() (*Plan, error) { return PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{}) },
	} {
		plan, err := p()
		require.NoError(t, err)
		require.NoError(t, ValidateExchange(x, plan))
		full, err := EstimateFlows(f, x, plan.Algorithm, FlowOptions{})
		require.NoError(t, err)
		if IsFlowPlan(plan.Algorithm) {
			require.Equal(t, full.Predicted, plan.Predicted)
			require.Len(t, plan.Transfers, n*(n-1))
		}
	}
}

// Above OnePortSimLimit ranks Auto does not plan the one-port planners
// when its flow plan ends at the fabric bound (they could not be
// predicted to end first): it chooses what it would have chosen after
// planning them, and every one-port planner's estimate is no earlier.
func TestPlanExchangeOnSkipsOnePortAtBound(t *testing.T) {
	for _, n := range []int{OnePortSimLimit + 1, 64, 128} {
		m, x := exNICCase(n, 7)
		f := FabricFromModel(m)
		p, err := PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{})
		require.NoError(t, err)
		require.NoError(t, ValidateExchange(x, p))
		require.Equal(t, Paced, p.Algorithm, "%d ranks", n)
		require.InDelta(t, p.LowerBound, p.Predicted, 1e-12*p.LowerBound, "%d ranks: paced ends at the bound", n)
		for _, a := range autoPreference[KindAlltoall] {
			if lim, ok := autoLimits[a]; ok && n > lim {
				continue
			}
			q, err := PlanExchangeOn(m, f, x, a, Options{Seed: 1}, FlowOptions{})
			require.NoError(t, err)
			require.GreaterOrEqual(t, q.Predicted, p.Predicted, "%d ranks: %s", n, a)
		}
		// Without pacing naive ends above the bound: the one-port plans
		// are planned and can win.
		np, err := PlanExchangeOn(m, f, x, Auto, Options{Seed: 1}, FlowOptions{NoPacing: true})
		require.NoError(t, err)
		require.NoError(t, ValidateExchange(x, np))
		require.NotEqual(t, Paced, np.Algorithm)
		naive, err := estimateScore(f, x, Naive) // as Auto estimates it
		require.NoError(t, err)
		require.LessOrEqual(t, np.Predicted, naive.Predicted*(1+unpacedMargin), "%d ranks", n)
	}
}
