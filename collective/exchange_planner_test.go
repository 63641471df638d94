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
