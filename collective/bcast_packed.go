package collective

import (
	"math"
	"sort"
)

// Tree packing: where no single tree reaches the broadcast's bound, the
// message is cut into pieces dealt to several trees that run at once,
// each carrying a share in proportion to its rate (as ForestColl and
// Blink pack trees for GPUs). One tree sends every byte out of each of
// its relays once per child, so a network whose relays' egress is short
// (fast downlinks, slow uplinks) caps a tree at the slowest relay's
// egress over its children; with every rank relaying its own share, the
// sum of all egress capacities carries the message instead.

// BcastTree is one spanning tree of a broadcast: Parent[r] is the rank r
// receives from (-1 for the root), Children[r] the ranks it sends to.
type BcastTree struct {
	Parent   []int
	Children [][]int
}

// packedMinGain is how much faster than the best single tree a packing
// must be predicted to be to be chosen: its prediction (resource loads
// plus a pipeline fill) is coarser than a tree's.
const packedMinGain = 0.9

// Tree returns the tree piece i goes down.
func (p *BcastPlan) Tree(i int) (parent []int, children [][]int) {
	t := p.treeAt(p.treeOf(i))
	return t.Parent, t.Children
}

// treeAt returns tree t: 0 is (Parent, Children), t > 0 is Packed[t-1].
func (p *BcastPlan) treeAt(t int) BcastTree {
	if t > 0 {
		return p.Packed[t-1]
	}
	return BcastTree{Parent: p.Parent, Children: p.Children}
}

// Trees returns the number of trees the plan packs (1 for a single tree).
func (p *BcastPlan) Trees() int { return 1 + len(p.Packed) }

func (p *BcastPlan) treeOf(i int) int {
	if i < 0 || i >= len(p.PieceTree) {
		return 0
	}
	return p.PieceTree[i]
}

// starPacking is the packing in which every rank j other than root
// relays a share of the message: tree j sends it root -> j -> every other
// rank. Each star runs at w_j, the smallest of j's egress over its n-2
// children, the pair rates on its edges and, with withRoot, root also
// keeps a star of its own (root -> every rank) for whatever egress the
// relays leave it. The relays' rates are scaled down together until
// root's egress can carry their sum. Only their proportions matter: they
// deal the pieces (a shortage of ingress slows every star alike). It
// returns the trees and their rates, the fastest first; none when n < 3.
func starPacking(m *Model, f *Fabric, root int, withRoot bool) ([]BcastTree, []float64) {
	n := f.Size()
	if n < 3 {
		return nil, nil
	}
	type star struct {
		relay int
		rate  float64
	}
	var stars []star
	used := 0.0 // root's egress the relays' stars take
	for j := 0; j < n; j++ {
		if j == root {
			continue
		}
		w := min(f.Out(j)/float64(n-2), m.Rate(root, j), f.In(j))
		for u := 0; u < n; u++ {
			if u != root && u != j {
				w = min(w, m.Rate(j, u))
			}
		}
		stars = append(stars, star{j, w})
		used += w
	}
	if s := f.Out(root) / used; s < 1 {
		for i := range stars {
			stars[i].rate *= s
		}
		used = f.Out(root)
	}
	if withRoot {
		w := (f.Out(root) - used) / float64(n-1)
		for u := 0; u < n; u++ {
			if u != root {
				w = min(w, m.Rate(root, u))
			}
		}
		if w > 0 {
			stars = append(stars, star{root, w})
		}
	}
	sort.SliceStable(stars, func(a, b int) bool { return stars[a].rate > stars[b].rate })
	var trees []BcastTree
	var rates []float64
	for _, s := range stars {
		if s.rate <= 0 {
			continue
		}
		t := BcastTree{Parent: make([]int, n), Children: make([][]int, n)}
		t.Parent[root] = -1
		for u := 0; u < n; u++ {
			if u == root {
				continue
			}
			p := s.relay
			if u == s.relay {
				p = root
			}
			t.Parent[u] = p
			t.Children[p] = append(t.Children[p], u)
		}
		trees = append(trees, t)
		rates = append(rates, s.rate)
	}
	return trees, rates
}

// dealPieces deals k pieces to trees in proportion to weights, smoothly
// (weighted round robin: each piece to the tree furthest behind its
// share), the first to tree 0 (the heaviest). Trees left with no piece
// are dropped; it returns the trees kept and each piece's tree.
func dealPieces(trees []BcastTree, weights []float64, k int) ([]BcastTree, []int) {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	current := make([]float64, len(weights))
	assign := make([]int, k)
	count := make([]int, len(weights))
	for i := range assign {
		best := 0
		for t, w := range weights {
			current[t] += w
			if current[t] > current[best] {
				best = t
			}
		}
		current[best] -= total
		assign[i] = best
		count[best]++
	}
	index := make([]int, len(trees))
	var kept []BcastTree
	for t := range trees {
		index[t] = len(kept)
		if count[t] > 0 {
			kept = append(kept, trees[t])
		}
	}
	for i, t := range assign {
		assign[i] = index[t]
	}
	return kept, assign
}

// packedPlans returns the packed candidates for a broadcast of bytes
// bytes: the star packings with and without root's own star, each dealt
// over every power-of-two number of pieces from four per tree up to
// pieces of bcastMinChunk bytes.
func packedPlans(m *Model, f *Fabric, root int, bytes int64) []*BcastPlan {
	var plans []*BcastPlan
	for _, withRoot := range []bool{false, true} {
		trees, rates := starPacking(m, f, root, withRoot)
		if len(trees) < 2 {
			continue
		}
		k := 1
		for k < 4*len(trees) {
			k *= 2
		}
		for ; k <= bcastMaxChunks; k *= 2 {
			chunk := (bytes + int64(k) - 1) / int64(k)
			if chunk < bcastMinChunk {
				break
			}
			kept, assign := dealPieces(trees, rates, k)
			p := &BcastPlan{Algorithm: BcastPipeline, Root: root, Bytes: bytes, Parent: kept[0].Parent, Children: kept[0].Children, Chunk: chunk, Chunks: k}
			if len(kept) > 1 {
				p.Packed, p.PieceTree = kept[1:], assign
			}
			p.Predicted = predictPacked(m, f, p)
			plans = append(plans, p)
		}
	}
	return plans
}

// predictPacked predicts a plan whose pieces go down several trees at
// once: the longest time any resource needs for the bytes the plan puts
// on it (each rank's egress and ingress, each pair, each segment
// direction, at its capacity), a relay's egress counted from when its
// first piece can be in, and root's followed by the longest way a piece
// still has to go below root's children; plus a start-up and the pieces'
// overheads.
func predictPacked(m *Model, f *Fabric, p *BcastPlan) float64 {
	n := f.Size()
	sides := f.segmentSides()
	out, in := make([]float64, n), make([]float64, n)
	pair := map[[2]int]float64{}
	seg := make([]float64, 2*len(f.Segments))
	pieceCount := map[[2]int]int{}   // pieces per edge
	flows := make([]map[int]bool, n) // the distinct children each rank sends to
	for r := range flows {
		flows[r] = map[int]bool{}
	}
	// Each tree's bytes and pieces cross every one of its edges.
	bytes, pieces := make([]float64, p.Trees()), make([]int, p.Trees())
	for i := 0; i < max(p.Chunks, 1); i++ {
		t := p.treeOf(i)
		bytes[t] += float64(min(p.Chunk, p.Bytes-int64(i)*p.Chunk))
		pieces[t]++
	}
	for t := range bytes {
		children := p.treeAt(t).Children
		for u := 0; u < n; u++ {
			for _, c := range children[u] {
				size := bytes[t]
				out[u] += size
				in[c] += size
				pair[[2]int{u, c}] += size
				pieceCount[[2]int{u, c}] += pieces[t]
				flows[u][c] = true
				for s := range f.Segments {
					switch {
					case sides[s][u] == 1 && sides[s][c] == 2:
						seg[2*s] += size
					case sides[s][u] == 2 && sides[s][c] == 1:
						seg[2*s+1] += size
					}
				}
			}
		}
	}
	// A rank's egress cannot start before its first piece is in: first[u]
	// is when the earliest piece of any tree reaches u, one piece down
	// the tree's edges, each at its share of its sender's egress among
	// all the flows that sender keeps busy.
	first := make([]float64, n)
	for r := range first {
		first[r] = math.Inf(1)
	}
	first[p.Root] = 0
	tail := 0.0 // the longest way a piece has to go once root has sent it
	for t := 0; t < p.Trees(); t++ {
		children := p.treeAt(t).Children
		// at: when the piece reaches u; after: how long it has gone
		// since it left root's hop.
		var walk func(u int, at, after float64)
		walk = func(u int, at, after float64) {
			first[u] = min(first[u], at)
			for _, c := range children[u] {
				hop := f.StartUp(u, c) + float64(p.Chunk)/min(m.Rate(u, c), f.Out(u)/float64(len(flows[u])), f.In(c)) + bcastChunkOverhead
				if u == p.Root {
					walk(c, at+hop, 0)
					continue
				}
				tail = max(tail, after+hop)
				walk(c, at+hop, after+hop)
			}
		}
		walk(p.Root, 0, 0)
	}
	// The plan ends when its busiest resource has moved its bytes: each
	// rank's egress from its first piece on, each ingress, pair and
	// segment direction; plus a start-up, and the overhead every piece
	// costs on the edge that carries the most (as in PredictBcast).
	// The last piece leaves root when root's egress is done, and still
	// has its tail to go.
	busiest, startUp := out[p.Root]/f.Out(p.Root)+tail, 0.0
	for r := 0; r < n; r++ {
		busiest = max(busiest, in[r]/f.In(r))
		if out[r] > 0 {
			busiest = max(busiest, first[r]+out[r]/f.Out(r))
		}
		for c := range flows[r] {
			startUp = max(startUp, f.StartUp(r, c))
		}
	}
	for e, b := range pair {
		busiest = max(busiest, b/m.Rate(e[0], e[1]))
	}
	for s, sg := range f.Segments {
		busiest = max(busiest, seg[2*s]/sg.AB, seg[2*s+1]/sg.BA)
	}
	most := 0
	for e := range pair {
		most = max(most, pieceCount[e])
	}
	return busiest + startUp + float64(most)*bcastChunkOverhead
}
