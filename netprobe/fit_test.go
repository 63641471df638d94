package netprobe

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
)

func TestFitLineExact(t *testing.T) {
	T, B := 0.002, 12.5e6
	var s []Sample
	for _, m := range []int64{8, 1 << 10, 64 << 10, 1 << 20} {
		s = append(s, Sample{m, T + float64(m)/B})
	}
	f, err := FitLine(s)
	require.NoError(t, err)
	require.InDelta(t, T, f.Latency, 1e-12)
	require.InEpsilon(t, B, f.Bandwidth, 1e-9)
}

func TestFitLineNoiseAndOutliers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		T := 1e-5 + rng.Float64()*0.05
		B := 1e6 * math.Pow(10, rng.Float64()*3) // 1 MB/s .. 1 GB/s
		var s []Sample
		sw := Sweep{MinBytes: 8, MaxBytes: 1 << 30, Dominance: 8, Budget: 10}
		for {
			m, ok := sw.Next()
			if !ok {
				break
			}
			best := math.Inf(1)
			for rep := 0; rep < 5; rep++ {
				ideal := T + float64(m)/B
				noise := ideal * 0.05 * rng.ExpFloat64() // queueing only adds time
				if rng.IntN(10) == 0 {
					noise += ideal * (1 + 4*rng.Float64()) // an outlier: a retransmission
				}
				s = append(s, Sample{m, ideal + noise})
				best = math.Min(best, ideal+noise)
			}
			sw.Observe(best)
		}
		f, err := FitLine(s)
		require.NoError(t, err)
		require.InEpsilon(t, B, f.Bandwidth, 0.10, "trial %d", trial)
		require.InDelta(t, T, f.Latency, 0.1*T+float64(8<<10)/B, "trial %d", trial)
	}
}

func TestFitLineRejects(t *testing.T) {
	_, err := FitLine(nil)
	require.ErrorIs(t, err, ErrFit)
	_, err = FitLine([]Sample{{8, 1}, {8, 2}})
	require.ErrorIs(t, err, ErrFit)
	_, err = FitLine([]Sample{{8, math.NaN()}, {16, -1}})
	require.ErrorIs(t, err, ErrFit)
	f, err := FitLine([]Sample{{8, 1e-5}, {1 << 20, 1e-5}})
	require.NoError(t, err)
	require.True(t, math.IsInf(f.Bandwidth, 1))
}

func TestSweep(t *testing.T) {
	// A fast link: the sweep goes up until the rate term dominates.
	sw := Sweep{MinBytes: 8, MaxBytes: 64 << 20, Dominance: 8, Budget: 1}
	var sizes []int64
	for {
		m, ok := sw.Next()
		if !ok {
			break
		}
		sizes = append(sizes, m)
		sw.Observe(1e-4 + float64(m)/1e9)
	}
	require.Equal(t, int64(8), sizes[0])
	last := sizes[len(sizes)-1]
	require.GreaterOrEqual(t, 1e-4+float64(last)/1e9, 8e-4)
	// A slow link: the budget stops it.
	sw = Sweep{MinBytes: 8, MaxBytes: 64 << 20, Dominance: 1000, Budget: 0.05}
	sizes = nil
	for {
		m, ok := sw.Next()
		if !ok {
			break
		}
		sizes = append(sizes, m)
		sw.Observe(1e-3 + float64(m)/1e6)
	}
	last = sizes[len(sizes)-1]
	require.LessOrEqual(t, 1e-3+float64(last)/1e6, 0.05*4)
	// MaxBytes caps it.
	sw = Sweep{MinBytes: 8, MaxBytes: 1024, Dominance: 1e9, Budget: 1e9}
	sizes = nil
	for {
		m, ok := sw.Next()
		if !ok {
			break
		}
		sizes = append(sizes, m)
		sw.Observe(1)
	}
	require.Equal(t, []int64{8, 32, 128, 512}, sizes)
}

func TestTournament(t *testing.T) {
	for n := 0; n <= 33; n++ {
		rounds := Tournament(n)
		seen := map[Pair]int{}
		for ri, round := range rounds {
			busy := map[int]bool{}
			for _, p := range round {
				require.Less(t, p.A, p.B)
				require.False(t, busy[p.A] || busy[p.B], "n=%d round %d: rank in two probes at once", n, ri)
				busy[p.A], busy[p.B] = true, true
				seen[p]++
			}
		}
		want := n * (n - 1) / 2
		require.Len(t, seen, want, "n=%d", n)
		for p, c := range seen {
			require.Equal(t, 1, c, "n=%d pair %v", n, p)
		}
		if n >= 2 {
			wantRounds := n - 1
			if n%2 == 1 {
				wantRounds = n
			}
			require.Len(t, rounds, wantRounds)
		}
	}
}

func TestSchedule(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 25, 26, 33, 64, 65} {
		rounds, plain := Schedule(n), Tournament(n)
		require.Len(t, rounds, len(plain), "n=%d", n)
		for ri, round := range rounds {
			// The tournament's pairs, some swapped.
			require.Len(t, round, len(plain[ri]))
			for k, p := range round {
				require.Equal(t, plain[ri][k], Pair{min(p.A, p.B), max(p.A, p.B)}, "n=%d round %d", n, ri)
			}
			// Flows of the round's first half crossing the two halvings,
			// by blocks and odd against even, each way: balanced as well as
			// both can be (each alone can always be within 1; some rounds
			// cannot balance both at once, e.g. n=4: {0,3} and {1,2}).
			blocks, parity := 0, 0
			for _, p := range round {
				if (p.A < n/2) != (p.B < n/2) {
					blocks += sign(p.A < n/2)
				}
				if p.A%2 != p.B%2 {
					parity += sign(p.A%2 == 0)
				}
			}
			require.LessOrEqual(t, abs(blocks)+abs(parity), 2, "n=%d round %d: %v", n, ri, round)
			if n%8 == 0 {
				require.Zero(t, abs(blocks)+abs(parity), "n=%d round %d: %v", n, ri, round)
			}
		}
	}
	// Two clusters of 4 behind a backbone, ranks by blocks: round 0 pairs
	// every rank across it, so half the pairs measure each way first.
	require.Equal(t, []Pair{{0, 7}, {6, 1}, {5, 2}, {3, 4}}, Schedule(8)[0])
}

func sign(b bool) int {
	if b {
		return 1
	}
	return -1
}

func abs(x int) int { return max(x, -x) }

func TestSuspects(t *testing.T) {
	// Two clusters of two (fast inside), probed with the cross links
	// contended: 0->2 and 3->1 came out slow, 2->0 absurdly fast.
	m := &collective.Model{Latency: collective.Matrix(4, 0), Bandwidth: [][]float64{
		{0, 12, 6, 12},
		{12, 0, 12, 12},
		{25, 12, 0, 12},
		{12, 6, 12, 0},
	}}
	require.ElementsMatch(t, []Pair{{0, 2}, {3, 1}, {2, 0}}, Suspects(m))
	// A network of genuinely different speeds agrees with itself: a slow
	// host is slow with everyone.
	nic := []float64{50, 25, 25, 2.5}
	for i := range nic {
		for j := range nic {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	require.Empty(t, Suspects(m))
}
