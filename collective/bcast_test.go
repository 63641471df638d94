package collective

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// switchModel is a switched network: every pair runs at the slower of
// the two NICs (bytes per second), with one latency.
func switchModel(latency float64, nic ...float64) *Model {
	return nicModel(latency, nic, nic)
}

// checkTree checks that parent and children describe the same spanning
// tree rooted at root.
func checkTree(t *testing.T, parent []int, children [][]int, root int) {
	t.Helper()
	n := len(parent)
	if parent[root] != -1 {
		t.Fatalf("root %d has parent %d", root, parent[root])
	}
	seen := make([]bool, n)
	seen[root] = true
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if seen[c] {
				t.Fatalf("rank %d reached twice", c)
			}
			if parent[c] != p {
				t.Fatalf("rank %d is a child of %d but its parent is %d", c, p, parent[c])
			}
			seen[c] = true
			queue = append(queue, c)
		}
	}
	for r, ok := range seen {
		if !ok {
			t.Fatalf("rank %d is not in the tree (parents %v)", r, parent)
		}
	}
}

func TestBinomialTree(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for root := 0; root < n; root++ {
			parent, children := binomialTree(n, root)
			checkTree(t, parent, children, root)
			for r := 0; r < n; r++ {
				v := (r - root + n) % n
				if v == 0 {
					continue
				}
				// MPICH's rule: the parent clears the lowest set bit.
				if want := (v - v&-v + root) % n; parent[r] != want {
					t.Fatalf("n=%d root=%d: parent of %d is %d, want %d", n, root, r, parent[r], want)
				}
			}
		}
	}
	// The worked case: 8 ranks from 0, largest subtree first.
	_, children := binomialTree(8, 0)
	if got := children[0]; len(got) != 3 || got[0] != 4 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("root's children %v, want [4 2 1]", got)
	}
}

func TestPredictBcastChain(t *testing.T) {
	// A chain 0 -> 1 -> 2 at 1e6 B/s and 1 ms latency: 4 pieces of 1000
	// bytes take s = 1 ms + the piece overhead on each edge. The first
	// piece reaches 2 after 2 (T + s), the rest stream behind it.
	m := NewUniformModel(3, 1e-3, 1e6)
	p := &BcastPlan{Root: 0, Bytes: 4000, Parent: []int{-1, 0, 1}, Children: [][]int{{1}, {2}, nil}, Chunk: 1000, Chunks: 4}
	s := 1e-3 + bcastChunkOverhead
	want := 2*(1e-3+s) + 3*s
	if got := PredictBcast(m, nil, p); math.Abs(got-want) > 1e-12 {
		t.Fatalf("chain: predicted %v, want %v", got, want)
	}
	// A star from 0 shares its egress: each child gets half of it.
	p = &BcastPlan{Root: 0, Bytes: 4000, Parent: []int{-1, 0, 0}, Children: [][]int{{1, 2}, nil, nil}, Chunk: 4000, Chunks: 1}
	want = 1e-3 + 4000/0.5e6 + bcastChunkOverhead
	if got := PredictBcast(m, nil, p); math.Abs(got-want) > 1e-12 {
		t.Fatalf("star: predicted %v, want %v", got, want)
	}
}

func TestBcastBound(t *testing.T) {
	// NICs 100, 10, 40 B/s: 100 bytes from rank 0 need 100/10 = 10 s at
	// rank 1's ingress; the total egress (150) carries 200 bytes in 1.33 s.
	f := switchFabric(100, 10, 40)
	b := BcastBound(f, 0, 100)
	if b.Bandwidth != 10 || b.Resource != "rank 1 ingress" {
		t.Fatalf("bound %+v, want 10 s at rank 1 ingress", b)
	}
	// From the slow rank, its own egress sets it.
	if b := BcastBound(f, 1, 100); b.Bandwidth != 10 || b.Resource != "rank 1 egress" {
		t.Fatalf("bound from rank 1 %+v, want 10 s at its egress", b)
	}
	// Uniform NICs and many ranks: the total egress.
	f = switchFabric(10, 10, 10, 10)
	if b := BcastBound(f, 0, 100); b.Bandwidth != 10 {
		t.Fatalf("uniform bound %+v, want 10", b)
	}
	f.Segments = []Segment{{Name: "bb", A: []int{0, 1}, B: []int{2, 3}, AB: 2, BA: 5}}
	if b := BcastBound(f, 0, 100); b.Bandwidth != 50 || b.Resource != "segment bb a->b" {
		t.Fatalf("backbone bound %+v, want 50 s at bb a->b", b)
	}
	if b := BcastBound(f, 3, 100); b.Bandwidth != 20 || b.Resource != "segment bb b->a" {
		t.Fatalf("backbone bound from 3 %+v, want 20 s at bb b->a", b)
	}
	if b := AllgatherBound(f, 100); b.Bandwidth != 100 || !strings.HasPrefix(b.Resource, "segment bb a->b") {
		t.Fatalf("allgather bound %+v, want 2*100/2 = 100 s at bb a->b", b)
	}
	f.Segments = nil
	// Allgather: every ingress takes 3 blocks (30 s), the total egress
	// 12 blocks (30 s).
	if b := AllgatherBound(f, 100); b.Bandwidth != 30 {
		t.Fatalf("allgather bound %+v, want 30", b)
	}
}

func TestPlanBcastHeterogeneous(t *testing.T) {
	// 8 ranks on a switch, NICs from 400 to 20 Mbit/s in bytes per
	// second, the slow ones where the binomial tree has its relays.
	mbit := 1e6 / 8
	nic := []float64{100 * mbit, 50 * mbit, 20 * mbit, 100 * mbit, 20 * mbit, 200 * mbit, 20 * mbit, 400 * mbit}
	m := switchModel(100e-6, nic...)
	const size = 1 << 20
	bound := BcastBound(FabricFromModel(m), 0, size)
	bin, err := PlanBcast(m, 0, size, BcastBinomial)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := PlanBcast(m, 0, size, BcastPipeline)
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, pipe.Parent, pipe.Children, 0)
	// The slow ranks are leaves and the fast ones relay.
	for _, r := range []int{2, 4, 6} {
		if len(pipe.Children[r]) != 0 {
			t.Fatalf("20 Mbit/s rank %d relays to %v (parents %v)", r, pipe.Children[r], pipe.Parent)
		}
	}
	if r := pipe.Predicted / bound.Seconds; r > 1.15 {
		t.Fatalf("rate tree predicted %.3f of the bound (%v, parents %v), want within 1.15", r, pipe.Predicted, pipe.Parent)
	}
	if bin.Predicted < 1.5*pipe.Predicted {
		t.Fatalf("binomial predicted %v, rate tree %v: expected the rate tree to win by 1.5x", bin.Predicted, pipe.Predicted)
	}
	if auto, _ := PlanBcast(m, 0, size, Auto); auto.Predicted > pipe.Predicted {
		t.Fatalf("auto predicted %v, worse than the rate tree's %v", auto.Predicted, pipe.Predicted)
	}
	// Alike NICs: a binomial tree sends the message log2 P times from the
	// root; pieces streaming down a tree come near the bound.
	uni := switchModel(100e-6, 100*mbit, 100*mbit, 100*mbit, 100*mbit, 100*mbit, 100*mbit, 100*mbit, 100*mbit)
	auto, err := PlanBcast(uni, 3, size, Auto)
	if err != nil {
		t.Fatal(err)
	}
	if auto.Chunks < 8 {
		t.Fatalf("alike NICs: auto chose %s in %d pieces, want pieces", auto.Algorithm, auto.Chunks)
	}
	if r := auto.Predicted / BcastBound(FabricFromModel(uni), 3, size).Seconds; r > 1.15 {
		t.Fatalf("alike NICs: predicted %.3f of the bound", r)
	}
	// Small messages go whole down the binomial tree.
	small, err := PlanBcast(m, 0, 512, Auto)
	if err != nil {
		t.Fatal(err)
	}
	if small.Chunks != 1 {
		t.Fatalf("512 bytes in %d pieces", small.Chunks)
	}
	// Every root, every size: a spanning tree whose pieces cover the
	// message.
	for root := 0; root < len(nic); root++ {
		for _, size := range []int64{0, 1, 8 << 10, 100000, 3 << 20} {
			for _, algo := range []Algorithm{Auto, BcastBinomial, BcastPipeline} {
				p, err := PlanBcast(m, root, size, algo)
				if err != nil {
					t.Fatal(err)
				}
				checkTree(t, p.Parent, p.Children, root)
				if p.Chunks < 1 || int64(p.Chunks)*p.Chunk < size || size > 0 && int64(p.Chunks-1)*p.Chunk >= size {
					t.Fatalf("root %d, %d bytes: %d pieces of %d", root, size, p.Chunks, p.Chunk)
				}
				if algo != Auto && p.Algorithm != algo {
					t.Fatalf("forced %s, planned %s", algo, p.Algorithm)
				}
			}
		}
	}
}

func TestPlanBcastCrossesABackboneOnce(t *testing.T) {
	// Two clusters of 4 ranks at 100 Mbit/s behind a backbone of 30
	// Mbit/s each way: a good tree sends the message across once and
	// relays it on the far side.
	const fast, slow = 12.5e6, 3.75e6
	m := switchModel(1e-4, fast, fast, fast, fast, fast, fast, fast, fast)
	m.Segments = []Segment{{Name: "bb", A: []int{0, 1, 2, 3}, B: []int{4, 5, 6, 7}, AB: slow, BA: slow}}
	p, err := PlanBcast(m, 1, 1<<20, BcastPipeline)
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, p.Parent, p.Children, 1)
	crossings := 0
	for r, q := range p.Parent {
		if q >= 0 && (q < 4) != (r < 4) {
			crossings++
		}
	}
	if crossings != 1 {
		t.Fatalf("the tree crosses the backbone %d times (parents %v)", crossings, p.Parent)
	}
	bound := BcastBound(FabricFromModel(m), 1, 1<<20)
	if r := p.Predicted / bound.Seconds; r > 1.1 {
		t.Fatalf("predicted %.3f of the bound", r)
	}
}

func TestPlanBcastErrors(t *testing.T) {
	m := NewUniformModel(4, 1e-4, 1e8)
	for _, tc := range []struct {
		root  int
		bytes int64
		algo  Algorithm
		want  string
	}{
		{4, 10, Auto, "root 4 out of range"},
		{-1, 10, Auto, "root -1"},
		{0, -1, Auto, "-1 bytes"},
		{0, 10, "ring", `unknown Bcast algorithm "ring"`},
	} {
		if _, err := PlanBcast(m, tc.root, tc.bytes, tc.algo); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlanBcast(root %d, %d bytes, %q): %v, want %q", tc.root, tc.bytes, tc.algo, err, tc.want)
		}
	}
	// One rank: nothing to send.
	p, err := PlanBcast(NewUniformModel(1, 0, 1), 0, 100, Auto)
	if err != nil || p.Predicted != 0 {
		t.Fatalf("one rank: %+v, %v", p, err)
	}
}

func TestPlanBcastLatencyTree(t *testing.T) {
	// Two sites of 4 ranks, 50 us apart within a site and 5 ms across: a
	// small message from rank 1 should reach every rank in about one
	// crossing. The binomial tree from rank 1 crosses three times, two of
	// them one after the other.
	m := NewUniformModel(8, 50e-6, 100e6)
	for i := 0; i < 8; i++ {
		for j := 0; j < 8; j++ {
			if i != j && (i < 4) != (j < 4) {
				m.Latency[i][j] = 5e-3
			}
		}
	}
	bin, err := PlanBcast(m, 1, 1024, BcastBinomial)
	require.NoError(t, err)
	require.Greater(t, bin.Predicted, 10e-3, "two crossings in a row")
	auto, err := PlanBcast(m, 1, 1024, Auto)
	require.NoError(t, err)
	checkTree(t, auto.Parent, auto.Children, 1)
	require.Less(t, auto.Predicted, 5.5e-3, "parents %v", auto.Parent)
	// Every rank is at most one crossing from the root.
	for r := range auto.Parent {
		k := 0
		for q := r; auto.Parent[q] >= 0; q = auto.Parent[q] {
			if (q < 4) != (auto.Parent[q] < 4) {
				k++
			}
		}
		require.LessOrEqual(t, k, 1, "rank %d (parents %v)", r, auto.Parent)
	}
	// The latency tree itself: fast, near ranks first.
	parent, _ := latencyTree(m, FabricFromModel(m), 1, 1024)
	require.Equal(t, 1, parent[0], "a near rank is informed first: %v", parent)
}

// nicModel is a switched network whose ranks send at out[i] and receive
// at in[i] bytes per second.
func nicModel(latency float64, out, in []float64) *Model {
	n := len(out)
	m := NewUniformModel(n, latency, 1)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = min(out[i], in[j])
		}
	}
	return m
}

// checkPacked checks a plan's trees and the dealing of its pieces.
func checkPacked(t *testing.T, p *BcastPlan) {
	t.Helper()
	checkTree(t, p.Parent, p.Children, p.Root)
	for _, tr := range p.Packed {
		checkTree(t, tr.Parent, tr.Children, p.Root)
	}
	if len(p.Packed) == 0 {
		require.Nil(t, p.PieceTree)
		return
	}
	require.Len(t, p.PieceTree, p.Chunks)
	require.Zero(t, p.PieceTree[0], "the first piece goes down tree 0")
	used := make([]int, p.Trees())
	for _, tr := range p.PieceTree {
		used[tr]++
	}
	for tr, k := range used {
		require.Positive(t, k, "tree %d carries no piece", tr)
	}
}

func TestPlanBcastPacksTrees(t *testing.T) {
	// Fast downlinks, slow uplinks: root sends at 100 MB/s, the others
	// receive at 100 and send at 50. One tree relays at most 50 MB/s to
	// each child (root feeds two, each feeds one): 1 MiB takes 21 ms at
	// best. The bound is 4 MiB over the 300 MB/s of all egress, 14 ms;
	// with every rank relaying a share (and root a direct share) the
	// message reaches it.
	const mb = 1e6
	m := nicModel(50e-6, []float64{100 * mb, 50 * mb, 50 * mb, 50 * mb, 50 * mb}, []float64{100 * mb, 100 * mb, 100 * mb, 100 * mb, 100 * mb})
	const size = 1 << 20
	bound := BcastBound(FabricFromModel(m), 0, size)
	require.InDelta(t, 4.0*size/(300*mb), bound.Bandwidth, 1e-9)
	p, err := PlanBcast(m, 0, size, Auto)
	require.NoError(t, err)
	checkPacked(t, p)
	require.Greater(t, p.Trees(), 1, "one tree cannot reach the bound here")
	single := size / (50 * mb)
	require.Less(t, p.Predicted, 0.8*single, "packed %v against one tree's %v", p.Predicted, single)
	require.Less(t, p.Predicted, 1.2*bound.Seconds, "packed %v against the bound %v", p.Predicted, bound.Seconds)
	// The relays' shares follow their rates: equal relays, equal shares.
	share := make([]int, p.Trees())
	for _, tr := range p.PieceTree {
		share[tr]++
	}
	relays := 0
	for tr := 0; tr < p.Trees(); tr++ {
		if len(p.treeAt(tr).Children[0]) == 1 { // root -> relay -> the rest
			relays++
			require.InDelta(t, share[0], share[tr], 1, "shares %v", share)
		}
	}
	require.Equal(t, 4, relays)
	require.Equal(t, p.Predicted, PredictBcast(m, nil, p))

	// Where one tree reaches the bound (alike NICs), no packing.
	uni := switchModel(50e-6, 100*mb, 100*mb, 100*mb, 100*mb, 100*mb)
	q, err := PlanBcast(uni, 2, size, Auto)
	require.NoError(t, err)
	require.Equal(t, 1, q.Trees())
	// Binomial is never packed; small messages are not either.
	q, err = PlanBcast(m, 0, size, BcastBinomial)
	require.NoError(t, err)
	require.Equal(t, 1, q.Trees())
	q, err = PlanBcast(m, 0, 4096, Auto)
	require.NoError(t, err)
	require.Equal(t, 1, q.Trees())
	// Every root and size: spanning trees, pieces dealt to each.
	for root := 0; root < 5; root++ {
		for _, size := range []int64{0, 1, 100000, 1 << 20, 3 << 20} {
			p, err := PlanBcast(m, root, size, Auto)
			require.NoError(t, err)
			checkPacked(t, p)
		}
	}
}

func TestDealPieces(t *testing.T) {
	trees := make([]BcastTree, 3)
	for i := range trees {
		trees[i] = BcastTree{Parent: []int{-1, i}}
	}
	kept, assign := dealPieces(trees, []float64{3, 1, 0}, 8)
	require.Len(t, kept, 2, "a tree of weight 0 gets no piece and is dropped")
	require.Equal(t, []int{0, 0, 1, 0, 0, 0, 1, 0}, assign)
}

func TestPlanReduce(t *testing.T) {
	// Rank 2 sends slowly and rank 7 receives slowly: in a reduction
	// both are leaves, rank 7 because it cannot take a child's data in
	// time and rank 2 because it sends only its own.
	out := []float64{50e6, 50e6, 2.5e6, 50e6, 50e6, 50e6, 50e6, 50e6}
	in := []float64{50e6, 50e6, 50e6, 50e6, 50e6, 50e6, 50e6, 2.5e6}
	m := nicModel(1e-4, out, in)
	require.Equal(t, m, m.Transposed().Transposed())
	require.Equal(t, 2.5e6, m.Transposed().Bandwidth[0][2], "what 0 sends to 2 transposed is what 2 sends to 0")
	for _, root := range []int{0, 3} {
		p, err := PlanReduce(m, root, 1<<20, Auto)
		require.NoError(t, err)
		checkTree(t, p.Parent, p.Children, root)
		require.Equal(t, 1, p.Trees(), "a reduction takes one tree")
		require.Empty(t, p.Children[2], "root %d: slow sender 2 collects from %v", root, p.Children[2])
		require.Empty(t, p.Children[7], "root %d: slow receiver 7 collects from %v", root, p.Children[7])
		b, err := PlanBcast(m.Transposed(), root, 1<<20, Auto)
		require.NoError(t, err)
		require.Equal(t, b.Predicted, p.Predicted)
		// Rank 2's vector must leave it, at 2.5 MB/s, whatever the tree.
		require.Less(t, p.Predicted, 1.05*(1<<20)/2.5e6)
		// From root 3 the binomial tree makes rank 7 collect from two.
		bin, err := PlanReduce(m, root, 1<<20, BcastBinomial)
		require.NoError(t, err)
		if root == 3 {
			require.Greater(t, bin.Predicted, 1.8*p.Predicted)
		}
	}
}
