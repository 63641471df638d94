package collective

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProportionalCounts(t *testing.T) {
	require.Equal(t, []int{5, 3, 2}, ProportionalCounts(10, []float64{5, 3, 2}))
	require.Equal(t, []int{4, 3, 3}, ProportionalCounts(10, []float64{1, 1, 1}), "leftovers to the largest remainders, then the larger weight, then the lower index")
	require.Equal(t, []int{0, 7}, ProportionalCounts(7, []float64{0, 2}), "no weight, nothing")
	require.Equal(t, []int{2, 2, 1}, ProportionalCounts(5, []float64{0, -1, 0}), "no positive weight at all: even")
	require.Equal(t, []int{0, 0}, ProportionalCounts(0, []float64{1, 2}))
	for total := 0; total < 50; total++ {
		c := ProportionalCounts(total, []float64{0.3, 7, 1.1, 2})
		sum := 0
		for _, x := range c {
			require.GreaterOrEqual(t, x, 0)
			sum += x
		}
		require.Equal(t, total, sum)
	}
}

func TestPlanAllreduce(t *testing.T) {
	m4 := NewUniformModel(4, 50e-6, 1e9)
	small := PlanAllreduce(m4, 1, 8, "")
	require.Equal(t, AllreduceTree, small.Algorithm)
	require.Nil(t, small.Counts)
	// 4 ranks at 1 GB/s, 8 MiB: two tree rounds to reduce, then the
	// planned Bcast; reduce-scatter moves 3/4 of the vector out and in in
	// each of its two rounds.
	const b = 8.0 * (1 << 20)
	big := PlanAllreduce(m4, 1<<20, 8, Auto)
	bp, err := PlanBcast(m4, 0, 1<<23, Auto)
	require.NoError(t, err)
	require.InDelta(t, 2*(50e-6+b/1e9)+bp.Predicted, big.Tree, 1e-12)
	require.InDelta(t, 2*(50e-6+3*allgatherMessageOverhead)+2*0.75*b/1e9, big.RSAG, 1e-12)
	require.Equal(t, AllreduceRSAG, big.Algorithm, "%+v", big)
	// 1 MiB: the tree takes under rsagMinSpan, where the links are not
	// what limits; it stays, although reduce-scatter is predicted faster.
	mid := PlanAllreduce(m4, 1<<17, 8, Auto)
	require.Less(t, mid.Tree, rsagMinSpan)
	require.Less(t, mid.RSAG, rsagMargin*mid.Tree)
	require.Equal(t, AllreduceTree, mid.Algorithm)
	forced := PlanAllreduce(m4, 1<<20, 8, AllreduceRSAG)
	require.Equal(t, AllreduceRSAG, forced.Algorithm)
	require.Equal(t, []int{1 << 18, 1 << 18, 1 << 18, 1 << 18}, forced.Counts)
	require.Equal(t, AllreduceTree, PlanAllreduce(m4, 1<<20, 8, AllreduceTree).Algorithm)

	// 8 ranks on uniform NICs: reduce-scatter.
	require.Equal(t, AllreduceRSAG, PlanAllreduce(NewUniformModel(8, 50e-6, 1e9), 1<<20, 8, "").Algorithm)

	// One NIC ten times slower: the tree runs at its pace, reduce-scatter
	// gives it a tenth of a block.
	m := NewUniformModel(4, 50e-6, 1e9)
	for j := 0; j < 4; j++ {
		if j != 3 {
			m.Bandwidth[3][j], m.Bandwidth[j][3] = 1e8, 1e8
		}
	}
	slow := PlanAllreduce(m, 1<<20, 8, "")
	require.Equal(t, AllreduceRSAG, slow.Algorithm)
	require.Less(t, slow.Counts[3]*5, slow.Counts[0], "the slow rank's block is much smaller")
	require.Equal(t, 1<<20, slow.Counts[0]+slow.Counts[1]+slow.Counts[2]+slow.Counts[3])

	require.Equal(t, AllreduceTree, PlanAllreduce(NewUniformModel(1, 0, 1), 100, 8, AllreduceRSAG).Algorithm, "one rank: nothing to split")
}

func TestAllreduceBound(t *testing.T) {
	// NICs 100, 10 and 40 B/s, 100 bytes: rank 1 must send and receive
	// 100 bytes at 10 B/s; the 4 transfers per value over 150 B/s of
	// egress take 2.7 s.
	f := switchFabric(100, 10, 40)
	if b := AllreduceBound(f, 100); b.Bandwidth != 10 || b.Resource != "rank 1 egress" {
		t.Fatalf("bound %+v, want 10 s at rank 1 egress", b)
	}
	// Alike NICs: 2(P-1)/P bytes per rank, Patarasuk and Yuan's bound.
	f = switchFabric(10, 10, 10, 10)
	if b := AllreduceBound(f, 100); b.Bandwidth != 15 || b.Resource != "total egress" {
		t.Fatalf("bound %+v, want 2*3*100/40 = 15 s on the total egress", b)
	}
	f.Segments = []Segment{{Name: "bb", A: []int{0, 1}, B: []int{2, 3}, AB: 5, BA: 4}}
	if b := AllreduceBound(f, 100); b.Bandwidth != 25 || b.Resource != "segment bb b->a" {
		t.Fatalf("bound %+v, want 100/4 = 25 s on bb b->a", b)
	}
	if b := AllreduceBound(f, 0); b.Seconds != 0 || b.Resource != "" {
		t.Fatalf("nothing to move: %+v", b)
	}
	// No algorithm the planner predicts beats the bound.
	for _, nic := range [][]float64{{1e8, 1e8, 1e8, 1e8}, {1e8, 1e7, 4e7, 2e8, 5e7}, {1e9, 1e9}} {
		m := switchModel(1e-4, nic...)
		b := AllreduceBound(FabricFromModel(m), 8<<20)
		p := PlanAllreduce(m, 1<<20, 8, Auto)
		if p.Tree < b.Seconds || p.RSAG < b.Seconds {
			t.Fatalf("NICs %v: predicted tree %v, rsag %v under the bound %v", nic, p.Tree, p.RSAG, b.Seconds)
		}
	}
}

// asymmetricModel is a switch whose rank 1 sends slowly and rank 2
// receives slowly: the reduce-scatter is limited by the first, the
// allgather by the second.
func asymmetricModel() *Model {
	out := []float64{50e6, 2.5e6, 50e6, 50e6, 50e6, 50e6, 50e6, 50e6}
	in := []float64{50e6, 50e6, 2.5e6, 50e6, 50e6, 50e6, 50e6, 50e6}
	return nicModel(1e-4, out, in)
}

func TestPlanAllreducePipelined(t *testing.T) {
	m := asymmetricModel()
	p := PlanAllreduce(m, 1<<20, 8, Auto)
	require.Equal(t, AllreduceRSAG, p.Algorithm)
	require.Greater(t, p.Segments, 1, "the two rounds are limited by different NICs: overlap them")
	bd := AllreduceBound(FabricFromModel(m), 8<<20)
	require.Less(t, p.RSAG/bd.Seconds, 1.3, "overlapped, near the bound (%s)", bd.Resource)
	// Alike NICs: both rounds load every NIC alike; nothing to overlap.
	uni := PlanAllreduce(NewUniformModel(8, 1e-4, 50e6), 1<<20, 8, Auto)
	require.Equal(t, AllreduceRSAG, uni.Algorithm)
	require.Equal(t, 1, uni.Segments)
	require.Equal(t, 0, PlanAllreduce(m, 1<<20, 8, AllreduceTree).Segments)
}

func TestReduceScatterBound(t *testing.T) {
	// 4 alike NICs of 10 B/s, 400 bytes: each rank sends 3 blocks of 100
	// (30 s), and the 3 transfers of each of 4 blocks over 40 B/s take
	// 30 s too.
	f := switchFabric(10, 10, 10, 10)
	b := ReduceScatterBound(f, 400)
	require.Equal(t, 30.0, b.Bandwidth)
	// A slow rank's egress: its 300 bytes for the others at 1 B/s.
	f = switchFabric(10, 1, 10, 10)
	b = ReduceScatterBound(f, 400)
	require.Equal(t, 300.0, b.Bandwidth)
	require.Equal(t, "rank 1 egress", b.Resource)
	// A backbone: side B's two blocks need side A's inputs.
	f = switchFabric(100, 100, 100, 100)
	f.Segments = []Segment{{Name: "bb", A: []int{0, 1}, B: []int{2, 3}, AB: 1, BA: 10}}
	b = ReduceScatterBound(f, 400)
	require.Equal(t, 200.0, b.Bandwidth)
	require.Equal(t, "segment bb a->b", b.Resource)
}
