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
	n := len(nic)
	m := NewUniformModel(n, latency, 1)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = min(nic[i], nic[j])
		}
	}
	return m
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
