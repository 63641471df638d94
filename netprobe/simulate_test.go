package netprobe

import (
	"math/rand/v2"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

// racksModel: racks of eight ranks with NICs of 20 to 400 Mbit/s, a pair
// at the slower of its NICs (what it reaches alone), each rack's uplink at
// half the sum of its NICs.
func racksModel(n int, seed uint64) (*collective.Model, [][]int) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	nic := make([]float64, n)
	for r := range nic {
		nic[r] = []float64{2.5e6, 6.25e6, 12.5e6, 25e6, 50e6}[rng.IntN(5)]
	}
	m := &collective.Model{Latency: collective.Matrix(n, 1e-4), Bandwidth: collective.Matrix(n, 0)}
	for i := range n {
		m.Latency[i][i] = 0
		for j := range n {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	var cuts [][]int
	for lo := 0; lo < n; lo += 8 {
		var in, out []int
		up := 0.0
		for r := range n {
			if r >= lo && r < lo+8 {
				in, up = append(in, r), up+nic[r]
			} else {
				out = append(out, r)
			}
		}
		cuts = append(cuts, in)
		m.Segments = append(m.Segments, collective.Segment{Name: "rack", A: in, B: out, AB: up / 2, BA: up / 2})
	}
	return m, cuts
}

// The simulated probe infers every pair's rate within 10% from steps of
// concurrent flows, and tests every rack's uplink: one at a time up to
// five racks, a third of them at once from six (four rounds of 2 at 8
// racks).
func TestSimulateProbe(t *testing.T) {
	rounds := map[int]int{32: 4, 64: 4}
	for _, n := range []int{32, 64} {
		m, cuts := racksModel(n, 1)
		est, err := SimulateProbe(m, cuts)
		require.NoError(t, err)
		t.Logf("%d ranks: %+v", n, est)
		require.LessOrEqual(t, est.Worst, 0.1, "%d ranks: every pair within 10%%", n)
		require.LessOrEqual(t, est.PingRounds, 8, "%d ranks: a sample of the pairs pinged, the rest inferred", n)
		require.Equal(t, rounds[n], est.Cuts)
		require.Positive(t, est.Steps)
		require.Greater(t, est.Seconds, 0.0)
		require.Greater(t, est.Flows, est.Steps)
	}
	_, err := SimulateProbe(&collective.Model{Bandwidth: [][]float64{{0, -1}, {1, 0}}}, nil)
	require.Error(t, err)
}

// TestSimulateProbeScale: on racks of eight (NICs of five classes,
// uplinks at half their NICs) the fabric probe's steps of flows stay
// flat from 32 to 256 ranks (before the cross-group fan-outs for pairs
// in doubt and the limits seen from outside a group: 14, 20-23, 28-38
// and 58-60 steps on these instances, one flow a step at the end), and
// every pair comes out at what it reaches alone; so do the rounds of
// pings (a sample, the other latencies inferred: P-1 rounds before).
func TestSimulateProbeScale(t *testing.T) {
	sizes := []int{32, 64, 128, 256}
	if testing.Short() || raceOn {
		sizes = sizes[:3]
	}
	for _, n := range sizes {
		for seed := uint64(1); seed <= 3; seed++ {
			m, cuts := racksModel(n, seed)
			est, err := SimulateProbe(m, cuts)
			require.NoError(t, err)
			t.Logf("%d ranks, seed %d: %d steps, %d flows, worst %.2g", n, seed, est.Steps, est.Flows, est.Worst)
			require.LessOrEqual(t, est.Worst, 1e-9, "%d ranks, seed %d: every pair exact", n, seed)
			require.LessOrEqual(t, est.Steps, 16, "%d ranks, seed %d", n, seed)
			require.LessOrEqual(t, est.PingRounds, 16, "%d ranks, seed %d: rounds of pings", n, seed)
		}
	}
}
