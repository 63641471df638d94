package collective

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClusters(t *testing.T) {
	// Two clusters of 3 with fast links inside (100) and slow ones across (10).
	n := 6
	m := &Model{Bandwidth: Matrix(n, 0)}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				m.Bandwidth[i][j] = 10
				if (i < 3) == (j < 3) {
					m.Bandwidth[i][j] = 100 + float64(i+j)
				}
			}
		}
	}
	require.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}}, Clusters(m))
	// Interleaved.
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				m.Bandwidth[i][j] = 10
				if i%2 == j%2 {
					m.Bandwidth[i][j] = 100
				}
			}
		}
	}
	require.Equal(t, [][]int{{0, 2, 4}, {1, 3, 5}}, Clusters(m))
	require.Nil(t, Clusters(NewUniformModel(1, 0, 1)))
	// A pair is as fast as its slower direction: 0->1 is fast one way only,
	// so 0 stays with 2, whose links are fast both ways.
	a := &Model{Bandwidth: [][]float64{
		{0, 100, 50},
		{1, 0, 1},
		{50, 1, 0},
	}}
	require.Equal(t, [][]int{{0, 2}, {1}}, Clusters(a))
}

func TestModelSub(t *testing.T) {
	m := &Model{
		Latency:      [][]float64{{0, 1, 2}, {3, 0, 5}, {6, 7, 0}},
		Bandwidth:    [][]float64{{0, 10, 20}, {30, 0, 50}, {60, 70, 0}},
		SendOverhead: []Overhead{{Const: 1}, {Const: 2}, {Const: 3}},
		RecvOverhead: []Overhead{{PerByte: 1}, {PerByte: 2}, {PerByte: 3}},
	}
	require.Same(t, m, m.Sub([]int{0, 1, 2}), "the whole model in order is the model")
	s := m.Sub([]int{2, 0})
	require.Equal(t, [][]float64{{0, 6}, {2, 0}}, s.Latency)
	require.Equal(t, [][]float64{{0, 60}, {20, 0}}, s.Bandwidth)
	require.Nil(t, s.PerByte)
	require.Equal(t, []Overhead{{Const: 3}, {Const: 1}}, s.SendOverhead)
	require.Equal(t, []Overhead{{PerByte: 3}, {PerByte: 1}}, s.RecvOverhead)
	// A permutation of every node is renumbered, not returned as is.
	p := m.Sub([]int{1, 0, 2})
	require.Equal(t, 30.0, p.Bandwidth[0][1])
	require.Equal(t, 10.0, p.Bandwidth[1][0])
	require.NoError(t, p.Validate())
}

func TestNICRatesAndSplitNICs(t *testing.T) {
	// Five hosts on a switch with NICs of 100, 100, 100, 50 and 10: a pair
	// runs at the slower NIC, except 0->1 whose path is slower still (40).
	nic := []float64{100, 100, 100, 50, 10}
	m := &Model{Latency: Matrix(5, 1e-3), Bandwidth: Matrix(5, 0),
		SendOverhead: []Overhead{{Const: 1e-6}, {}, {}, {}, {}}}
	for i := range nic {
		m.Latency[i][i] = 0
		for j := range nic {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	m.Bandwidth[0][1] = 40
	out, in := m.NICRates()
	require.Equal(t, nic, out)
	require.Equal(t, nic, in)

	mm := m.SplitNICs()
	require.NoError(t, mm.Validate())
	require.Equal(t, m.Latency, mm.Latency)
	require.Equal(t, 1e-6, mm.SendOverhead[0].Const)
	require.InDelta(t, 1.0/100, mm.SendOverhead[0].PerByte, 1e-12)
	require.InDelta(t, 1.0/10, mm.RecvOverhead[4].PerByte, 1e-12)
	// 0->1 is slower than both NICs (40 < 100): the wire keeps the rest.
	require.InDelta(t, 1.0/40-1.0/100, mm.PerByte[0][1], 1e-12)
	require.Equal(t, 0.0, mm.PerByte[1][0])
	require.Equal(t, 0.0, mm.PerByte[0][4])
	// NICBound uses the same interface rates: every host sends a byte to
	// every other, so 4 sends and receives 4 bytes through its 10 B/s NIC.
	x := &Exchange{Bytes: make([][]int64, 5)}
	for i := range x.Bytes {
		x.Bytes[i] = []int64{1, 1, 1, 1, 1}
		x.Bytes[i][i] = 0
	}
	require.InDelta(t, 1e-3+4.0/10, NICBound(m, x), 1e-12)
}

func TestWithRates(t *testing.T) {
	m := &Model{Latency: Matrix(3, 0), PerByte: [][]float64{{0, 0.5, 0.25}, {0.5, 0, 0.5}, {0.25, 0.5, 0}}}
	cp, changed := m.WithRates([]PairRate{
		{From: 0, To: 1, Rate: 7},
		{From: 1, To: 1, Rate: 9},           // diagonal: ignored
		{From: 2, To: 5, Rate: 9},           // out of range: ignored
		{From: 2, To: 0, Rate: math.Inf(1)}, // not finite: ignored
		{From: 1, To: 2, Rate: -1},          // not positive: ignored
	})
	require.True(t, changed)
	require.Nil(t, cp.PerByte)
	require.Equal(t, [][]float64{{0, 7, 4}, {2, 0, 2}, {4, 2, 0}}, cp.Bandwidth)
	require.Equal(t, 0.5, m.PerByte[0][1], "the original is untouched")
	_, changed = m.WithRates([]PairRate{{From: 0, To: 0, Rate: 1}})
	require.False(t, changed)
}

func TestDigest(t *testing.T) {
	a := NewUniformModel(3, 1e-4, 1e8)
	b := NewUniformModel(3, 1e-4, 1e8)
	require.Equal(t, a.Digest(), b.Digest())
	require.Zero(t, a.Digest()>>63, "the digest fits in 63 bits")
	b.Bandwidth[1][2] = 2e8
	require.NotEqual(t, a.Digest(), b.Digest())
	c := NewUniformModel(3, 1e-4, 1e8)
	c.Latency[0][1] = 2e-4
	require.NotEqual(t, a.Digest(), c.Digest())
	// The same rates written as PerByte digest alike (powers of two, so
	// that 1/(1/B) is B exactly).
	p2 := NewUniformModel(3, 1e-4, 1<<27)
	d := &Model{Latency: p2.Latency, PerByte: Matrix(3, 1.0/(1<<27))}
	require.Equal(t, p2.Digest(), d.Digest())
	require.Zero(t, (*Model)(nil).Digest())
}

func TestRedistributionCostsFrom(t *testing.T) {
	m := &Model{Latency: Matrix(4, 2e-3), Bandwidth: Matrix(4, 0)}
	rates := [][]float64{{0, 0, 10, 20}, {0, 0, 30, 60}}
	for s := range rates {
		for d, r := range rates[s] {
			m.Bandwidth[s][d] = r
			m.Bandwidth[d][s] = 1
		}
	}
	r := &Redistribution{}
	r.CostsFrom(m, []int{0, 1}, []int{2, 3})
	require.Equal(t, 25.0, r.Rate, "the median of 10, 20, 30 and 60")
	require.Equal(t, 4e-3, r.Setup)
	given := &Redistribution{Rate: 5, Setup: 1}
	given.CostsFrom(m, []int{0, 1}, []int{2, 3})
	require.Equal(t, &Redistribution{Rate: 5, Setup: 1}, given, "given costs are kept")
	noLat := &Redistribution{}
	noLat.CostsFrom(&Model{Bandwidth: m.Bandwidth}, []int{0}, []int{2})
	require.Equal(t, 10.0, noLat.Rate)
	require.Equal(t, 100e-6, noLat.Setup)
}

func TestModelClone(t *testing.T) {
	m := NewUniformModel(3, 1e-3, 1e6)
	m.PerByte = Matrix(3, 1e-6)
	m.SendOverhead = []Overhead{{Const: 1}, {Const: 2}, {Const: 3}}
	m.Rails = []Rail{{Name: "r0", Latency: Matrix(3, 1e-3), Bandwidth: Matrix(3, 2e6)}}
	m.Segments = []Segment{{Name: "bb", A: []int{0}, B: []int{1, 2}, AB: 5e5, BA: 5e5}}
	c := m.Clone()
	require.Equal(t, m, c)
	require.Equal(t, m.Digest(), c.Digest())
	// Nothing is shared: changing the copy leaves the original alone.
	c.Latency[0][1], c.Bandwidth[0][1], c.PerByte[0][1] = 9, 9, 9
	c.SendOverhead[0].Const = 9
	c.Rails[0].Bandwidth[0][1] = 9
	c.Segments[0].A[0], c.Segments[0].AB = 2, 9
	require.Equal(t, 1e-3, m.Latency[0][1])
	require.Equal(t, 1e6, m.Bandwidth[0][1])
	require.Equal(t, 1e-6, m.PerByte[0][1])
	require.Equal(t, 1.0, m.SendOverhead[0].Const)
	require.Equal(t, 2e6, m.Rails[0].Bandwidth[0][1])
	require.Equal(t, 0, m.Segments[0].A[0])
	require.Equal(t, 5e5, m.Segments[0].AB)
	require.Nil(t, (&Model{}).Clone().Latency)
}
