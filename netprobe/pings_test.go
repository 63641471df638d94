package netprobe

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// racks assigns n ranks to racks of size consecutive ranks.
func racks(n, size int) []int {
	g := make([]int, n)
	for r := range g {
		g[r] = r / size
	}
	return g
}

// TestSamplePings: the sample's rounds put no rank in two pairs, hold no
// pair twice, link every rank to two or more of its group and every pair
// of groups, keep one check pair per two ranks out of the fit, and take a
// few rounds where the tournament takes P-1; the plan is the same every
// time it is made.
func TestSamplePings(t *testing.T) {
	for _, c := range []struct {
		n, rack, most int
		hosts         []string
	}{
		{24, 8, 10, nil},
		{32, 8, 10, nil},
		{64, 64, 8, nil}, // one switch: one group
		{256, 8, 16, nil},
		{1024, 8, 32, nil},
		{20, 5, 12, []string{"a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "c", "d", "d", "d", "d", "e", "e", "e", "e"}},
	} {
		groups := racks(c.n, c.rack)
		pp := samplePings(c.n, groups, c.hosts)
		require.Equal(t, pp, samplePings(c.n, groups, c.hosts), "deterministic")
		require.False(t, pp.all)
		seen := map[Pair]bool{}
		intra := make([]int, c.n)
		ways := map[[2]int]bool{}
		for _, round := range pp.rounds {
			busy := map[int]bool{}
			for _, pr := range round {
				require.Less(t, pr.A, pr.B)
				require.False(t, busy[pr.A] || busy[pr.B], "%v: a rank twice in a round", pr)
				busy[pr.A], busy[pr.B] = true, true
				require.False(t, seen[pr], "%v twice", pr)
				seen[pr] = true
				if pp.check[pr] {
					continue
				}
				if groups[pr.A] == groups[pr.B] {
					intra[pr.A]++
					intra[pr.B]++
				}
				ways[groupKey(groups[pr.A], groups[pr.B])] = true
			}
		}
		for r := range c.n {
			require.GreaterOrEqual(t, intra[r], 2, "n=%d: rank %d's pairs in its group", c.n, r)
		}
		for g := range c.n / c.rack {
			for h := g; h < c.n/c.rack; h++ {
				require.True(t, ways[groupKey(g, h)], "n=%d: groups %d and %d not linked", c.n, g, h)
			}
		}
		for pr := range pp.check {
			require.True(t, seen[pr], "check pair %v pinged", pr)
		}
		require.GreaterOrEqual(t, len(pp.check), c.n/2-c.n/8, "n=%d: check pairs", c.n)
		for i, h := range c.hosts {
			for j := i + 1; j < c.n; j++ {
				if c.hosts[j] == h {
					require.True(t, seen[Pair{i, j}], "%d and %d share a host", i, j)
					require.False(t, pp.check[Pair{i, j}])
				}
			}
		}
		t.Logf("%d ranks in groups of %d: %d rounds, %d pairs of %d", c.n, c.rack, len(pp.rounds), len(seen), c.n*(c.n-1)/2)
		require.LessOrEqual(t, len(pp.rounds), c.most, "n=%d", c.n)
	}
	all := planPings(8, racks(8, 4), nil, Config{}.withDefaults())
	require.True(t, all.all)
	require.Equal(t, Tournament(8), all.rounds)
	require.False(t, planPings(8, racks(8, 4), nil, Config{PingAll: -1}.withDefaults()).all)
}

// additive is a latency matrix of the model's form: a part per rank and
// one per pair of groups.
func additive(n int, groups []int, seed uint64) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	a := make([]float64, n)
	for r := range a {
		a[r] = 5e-6 + 20e-6*rng.Float64()
	}
	d := map[[2]int]float64{}
	lat := make([][]float64, n)
	for i := range lat {
		lat[i] = make([]float64, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			k := groupKey(groups[i], groups[j])
			if _, ok := d[k]; !ok {
				d[k] = 10e-6 + 2e-3*rng.Float64()
			}
			lat[i][j] = a[i] + a[j] + d[k]
			lat[j][i] = lat[i][j]
		}
	}
	return lat
}

// pinged keeps of lat only the pairs the plan pings (0 elsewhere).
func pinged(lat [][]float64, pp pingPlan) [][]float64 {
	n := len(lat)
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
	}
	for _, round := range pp.rounds {
		for _, pr := range round {
			out[pr.A][pr.B], out[pr.B][pr.A] = lat[pr.A][pr.B], lat[pr.A][pr.B]
		}
	}
	return out
}

// TestFitPings: latencies of the model's form are inferred exactly from
// the sample; with a noise of 10% on every pair they pass the check
// within its tolerance; latencies of a network with a delay of its own
// per pair fail it (and the probe then pings every pair).
func TestFitPings(t *testing.T) {
	for _, c := range []struct{ n, rack int }{{24, 8}, {64, 64}, {256, 8}, {60, 1}} {
		groups := racks(c.n, c.rack)
		pp := samplePings(c.n, groups, nil)
		lat := additive(c.n, groups, uint64(c.n))
		m := fitPings(pinged(lat, pp), groups, nil, pp)
		require.NotNil(t, m, "n=%d: the model's own form fits", c.n)
		for i := range c.n {
			for j := range c.n {
				if i != j {
					require.InDelta(t, lat[i][j], m.at(i, j), 1e-9, "n=%d: %d->%d", c.n, i, j)
				}
			}
		}
		rng := rand.New(rand.NewPCG(2, uint64(c.n)))
		noisy := pinged(lat, pp)
		for i := range noisy {
			for j := i + 1; j < c.n; j++ {
				noisy[i][j] *= 1 + 0.1*(2*rng.Float64()-1)
				noisy[j][i] = noisy[i][j]
			}
		}
		require.NotNil(t, fitPings(noisy, groups, nil, pp), "n=%d: 10%% noise", c.n)
		if c.rack == 1 {
			continue // every pair its own group: every pair is pinged
		}
		own := make([][]float64, c.n)
		for i := range own {
			own[i] = make([]float64, c.n)
		}
		for i := range c.n {
			for j := i + 1; j < c.n; j++ {
				own[i][j] = 10e-6 + 5e-3*rng.Float64()
				own[j][i] = own[i][j]
			}
		}
		require.Nil(t, fitPings(pinged(own, pp), groups, nil, pp), "n=%d: a delay per pair", c.n)
	}
}

// TestComposeOffsets: the offsets to rank 0 follow the fewest pings from
// it, whichever end pinged.
func TestComposeOffsets(t *testing.T) {
	clock := []float64{0, 0.5, -1, 2, 7} // each rank's clock minus a true one
	c := make([]map[int]float64, 5)
	for i := range c {
		c[i] = map[int]float64{}
	}
	link := func(i, j int) { c[i][j] = clock[j] - clock[i] } // i pinged j
	link(1, 0)
	link(1, 2)
	link(3, 2)
	got := composeOffsets(5, c)
	for r := range 4 {
		require.InDelta(t, clock[0]-clock[r], got[r], 1e-12, "rank %d", r)
	}
	require.Zero(t, got[4], "no ping reaches rank 4")
	require.False(t, math.IsNaN(got[4]))
}
