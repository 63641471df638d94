package collective

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Above OnePortSimLimit ranks a one-port plan is not replayed on the
// fabric: it keeps its one-port times, and its prediction is the later of
// its one-port completion and the fabric bound. At the limit it is still
// replayed, and the replay never ends before that estimate.
func TestPlanExchangeOnOnePortEstimate(t *testing.T) {
	for _, n := range []int{OnePortSimLimit, OnePortSimLimit + 1} {
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
		// Half the ranks behind an uplink of a quarter of their NICs.
		var a, b []int
		up := 0.0
		for r := range n {
			if r < n/2 {
				a, up = append(a, r), up+nic[r]
			} else {
				b = append(b, r)
			}
		}
		m.Segments = []Segment{{Name: "uplink", A: a, B: b, AB: up / 4, BA: up / 4}}
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
		if n > OnePortSimLimit {
			require.Equal(t, estimate, p.Predicted, "%d ranks: estimated", n)
			require.Equal(t, onePort.Transfers, p.Transfers, "the one-port times are kept")
		} else {
			require.GreaterOrEqual(t, p.Predicted, estimate*(1-1e-9), "%d ranks: the replay", n)
			require.NotEqual(t, onePort.Transfers, p.Transfers, "replayed on the fabric")
		}
	}
}
