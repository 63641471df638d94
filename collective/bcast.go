package collective

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// The ways to broadcast a message, and the choice between them.
const (
	// BcastBinomial sends the whole message down a binomial tree in
	// rank order: ceil(log2 P) steps. It pays the fewest start-ups, so it
	// wins for small messages on networks whose ranks are alike.
	BcastBinomial Algorithm = "binomial"
	// BcastPipeline sends the message in chunks down a tree built from
	// the measured rates: fast ranks relay, slow ones are leaves, a
	// rank's out-degree follows its egress capacity, and a shared segment
	// is crossed as few times as its capacity needs. Every rank forwards
	// a chunk as soon as it has it, so the message streams through the
	// tree at the rate of its slowest edge.
	BcastPipeline Algorithm = "pipeline"
)

// BcastPlan is how to broadcast a message from Root: a spanning tree
// rooted at Root, down which the message goes in Chunks pieces of Chunk
// bytes (the last one smaller), each rank forwarding every piece to its
// children as soon as it has it.
type BcastPlan struct {
	Algorithm Algorithm
	Root      int
	Bytes     int64
	// Parent[r] is the rank r receives from (-1 for Root).
	Parent []int
	// Children[r] are the ranks r sends to, in the order it starts them.
	Children [][]int
	// Chunk is the size of a piece, Chunks the number of pieces (1 when
	// the message goes whole; at least 1, also for an empty message).
	Chunk  int64
	Chunks int
	// Packed holds the further trees of a packed broadcast (see
	// starPacking), and PieceTree[i] the tree piece i goes down: 0 for
	// (Parent, Children), t for Packed[t-1]; piece 0 always goes down
	// tree 0. Both are nil when the message takes one tree. Tree(i)
	// returns a piece's tree.
	Packed    []BcastTree
	PieceTree []int
	// Predicted is the plan's predicted time in seconds (see
	// PredictBcast).
	Predicted float64
}

const (
	// bcastChunkOverhead is what each piece of a pipelined broadcast
	// costs a rank in software, in seconds, on top of its bytes: the
	// pieces of a chunked message follow each other on the link, so they
	// do not each pay the link's latency, only the per-message work of
	// both ends (matching, copying, waking the forwarding goroutines).
	bcastChunkOverhead = 20e-6
	// bcastMinChunk is the smallest piece worth pipelining: a few
	// Ethernet packets. Smaller pieces cost more in overhead than the
	// overlap gains.
	bcastMinChunk = 8 << 10
	// bcastMaxChunks bounds the number of pieces.
	bcastMaxChunks = 1024
)

// PlanBcast plans the broadcast of bytes bytes from root on the ranks of
// m. The candidates are the binomial tree, the tree that informs every
// rank earliest from the measured latencies (latencyTree, up to
// latencyTreeLimit ranks) and trees built from the measured rates
// (rateTree) for several target rates, each with every
// power-of-two number of pieces from 1 up to pieces of bcastMinChunk
// bytes; the plan is the candidate with the shortest predicted time
// (PredictBcast, on the fabric m implies). Up to latencyTreeLimit ranks,
// packings of several trees (starPacking) are candidates too, chosen
// only when predicted under packedMinGain of the best single tree. algo
// forces the tree: "" or Auto chooses, BcastBinomial keeps the binomial
// tree (still pieced when that is predicted faster), BcastPipeline the
// rate trees and the packings.
func PlanBcast(m *Model, root int, bytes int64, algo Algorithm) (*BcastPlan, error) {
	return planBcast(m, root, bytes, algo, true)
}

// PlanReduce plans a reduction of bytes bytes to root as a broadcast run
// backwards: a tree PlanBcast would choose on the transposed model
// (Model.Transposed), so that Children[r] are the ranks whose partial
// results r receives and combines, piece by piece, and Parent[r] the rank
// it sends its own to. A rank's ingress is then shared among its
// children as a broadcaster's egress is, and a slow sender is a leaf.
//
// Every rank plans with its own vector's size, and a rank whose size
// differs must still send to the parent that waits for it, so that the
// parent finds the difference. The tree therefore depends on the size
// only through its class: below ReduceLargeFrom bytes it is the tree
// planned for a vector of reduceSmallShape bytes (sent whole: the
// latency tree or the binomial), from it the tree planned for
// reduceLargeShape bytes (the rate trees); only the number of pieces
// follows the size. Packings are not candidates: cutting the vector over
// several trees is what reduce-scatter does (PlanAllreduce). Predicted
// leaves out the operator's cost.
func PlanReduce(m *Model, root int, bytes int64, algo Algorithm) (*BcastPlan, error) {
	t := m.Transposed()
	shape := int64(reduceSmallShape)
	if bytes >= ReduceLargeFrom {
		shape = reduceLargeShape
	}
	tree, err := planBcast(t, root, shape, algo, false)
	if err != nil {
		return nil, err
	}
	if bytes < 0 {
		return nil, fmt.Errorf("collective: Reduce of %d bytes", bytes)
	}
	return pieced(t, FabricFromModel(t), tree, bytes), nil
}

// ReduceLargeFrom is the vector size in bytes from which a reduction
// goes up the tree planned for large vectors (see PlanReduce).
const ReduceLargeFrom = 32 << 10

// The two sizes a reduction's tree is planned for (see PlanReduce).
const (
	reduceSmallShape = 1 << 10
	reduceLargeShape = 1 << 20
)

// planBcast is PlanBcast; pack says whether packings are candidates.
func planBcast(m *Model, root int, bytes int64, algo Algorithm, pack bool) (*BcastPlan, error) {
	n := m.Size()
	if root < 0 || root >= n {
		return nil, fmt.Errorf("collective: Bcast root %d out of range [0,%d)", root, n)
	}
	if bytes < 0 {
		return nil, fmt.Errorf("collective: Bcast of %d bytes", bytes)
	}
	switch algo {
	case "", Auto, BcastBinomial, BcastPipeline:
	default:
		return nil, fmt.Errorf("collective: unknown Bcast algorithm %q (want %s, %s or auto)", algo, BcastBinomial, BcastPipeline)
	}
	f := FabricFromModel(m)
	type tree struct {
		algo     Algorithm
		parent   []int
		children [][]int
	}
	var trees []tree
	if algo != BcastPipeline {
		p, c := binomialTree(n, root)
		trees = append(trees, tree{BcastBinomial, p, c})
	}
	if algo != BcastBinomial && n > 2 && n <= latencyTreeLimit {
		p, c := latencyTree(m, f, root, bytes)
		trees = append(trees, tree{BcastPipeline, p, c})
	}
	if algo != BcastBinomial && n > 2 {
		top := maxTreeRate(m, f, root)
		for _, share := range []float64{1, 0.75, 0.5, 0.25} {
			if p, c, ok := rateTree(m, f, root, top*share); ok {
				trees = append(trees, tree{BcastPipeline, p, c})
			}
		}
	}
	if len(trees) == 0 { // two ranks, or no rate tree: the one tree there is
		p, c := binomialTree(n, root)
		trees = append(trees, tree{algo, p, c})
	}
	var best *BcastPlan
	for _, t := range trees {
		p := pieced(m, f, &BcastPlan{Algorithm: t.algo, Root: root, Parent: t.parent, Children: t.children}, bytes)
		if best == nil || p.Predicted < best.Predicted*(1-1e-9) {
			best = p
		}
	}
	if pack && algo != BcastBinomial && n > 2 && n <= latencyTreeLimit {
		var packed *BcastPlan
		for _, p := range packedPlans(m, f, root, bytes) {
			if packed == nil || p.Predicted < packed.Predicted {
				packed = p
			}
		}
		if packed != nil && packed.Predicted < packedMinGain*best.Predicted {
			best = packed
		}
	}
	return best, nil
}

// pieced returns tree's plan (its Algorithm, Root, Parent and Children)
// for a message of bytes bytes in the number of pieces predicted fastest:
// every power of two from 1 up to pieces of bcastMinChunk bytes (at most
// bcastMaxChunks).
func pieced(m *Model, f *Fabric, tree *BcastPlan, bytes int64) *BcastPlan {
	var best *BcastPlan
	for k := 1; ; k *= 2 {
		chunk := (bytes + int64(k) - 1) / int64(k)
		if k > 1 && (chunk < bcastMinChunk || k > bcastMaxChunks) {
			break
		}
		p := &BcastPlan{Algorithm: tree.Algorithm, Root: tree.Root, Bytes: bytes, Parent: tree.Parent, Children: tree.Children, Chunk: max(chunk, 1), Chunks: k}
		if bytes == 0 {
			p.Chunk = 0
		}
		p.Predicted = PredictBcast(m, f, p)
		if best == nil || p.Predicted < best.Predicted*(1-1e-9) {
			best = p
		}
		if bytes == 0 {
			break
		}
	}
	return best
}

// binomialTree is the binomial broadcast tree from root over ranks in
// rank order: virtual rank v = (r - root) mod n receives from v minus its
// lowest set bit and sends to v + 2^i for the 2^i below that bit, the
// largest subtree first.
func binomialTree(n, root int) (parent []int, children [][]int) {
	parent = make([]int, n)
	children = make([][]int, n)
	for v := 0; v < n; v++ {
		r := (v + root) % n
		if v == 0 {
			parent[r] = -1
		} else {
			low := v & -v
			parent[r] = (v - low + root) % n
		}
		limit := 1 << bits.Len(uint(n))
		if v != 0 {
			limit = v & -v
		}
		for mask := limit >> 1; mask > 0; mask >>= 1 {
			if v+mask < n {
				children[r] = append(children[r], (v+mask+root)%n)
			}
		}
	}
	return parent, children
}

// latencyTreeLimit bounds the ranks latencyTree plans for (its cost is
// O(P^3)).
const latencyTreeLimit = 128

// latencyTree builds a tree for a message sent whole, from the measured
// latencies and rates: each step informs the rank that the message can
// reach first, from whichever informed rank gets it there earliest, where
// a rank sends to its children one after the other, each send keeping it
// busy for the message's bytes over its egress plus the message overhead.
// Fast, near ranks therefore inform first and relay, and a slow link
// (a WAN between clusters) is crossed once, early.
func latencyTree(m *Model, f *Fabric, root int, bytes int64) (parent []int, children [][]int) {
	n := f.Size()
	b := float64(bytes)
	parent = make([]int, n)
	children = make([][]int, n)
	free := make([]float64, n) // when an informed rank can start its next send
	informed := make([]bool, n)
	for r := range parent {
		parent[r] = -2
	}
	parent[root], informed[root] = -1, true
	members := []int{root}
	for len(members) < n {
		bestV, bestU, bestAt := -1, -1, math.Inf(1)
		for _, v := range members {
			for u := 0; u < n; u++ {
				if informed[u] {
					continue
				}
				at := free[v] + f.StartUp(v, u) + b/min(m.Rate(v, u), f.Out(v), f.In(u)) + bcastChunkOverhead
				if at < bestAt {
					bestV, bestU, bestAt = v, u, at
				}
			}
		}
		parent[bestU] = bestV
		children[bestV] = append(children[bestV], bestU)
		informed[bestU] = true
		free[bestV] += b/f.Out(bestV) + bcastChunkOverhead
		free[bestU] = bestAt
		members = append(members, bestU)
	}
	return parent, children
}

// maxTreeRate returns the highest rate at which rateTree finds a tree,
// by bisection between the slowest rank's rate and root's egress.
func maxTreeRate(m *Model, f *Fabric, root int) float64 {
	hi := f.Out(root)
	for r := 0; r < f.Size(); r++ {
		if r != root {
			hi = min(hi, f.In(r))
		}
	}
	lo := 0.0
	for it := 0; it < 40 && hi-lo > 1e-6*hi; it++ {
		mid := (lo + hi) / 2
		if _, _, ok := rateTree(m, f, root, mid); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return max(lo, 1)
}

// rateTree builds a broadcast tree in which every edge can carry theta
// bytes per second at once: rank r relays to at most floor(Out(r) /
// theta) children, a child needs theta of ingress and of pair rate, and a
// segment direction carries at most floor(capacity / theta) tree edges.
// The ranks join in decreasing order of egress (fast ranks become the
// relays, slow ones the leaves), each under the member that can take it
// without crossing a segment if any does, then under the one whose first
// byte arrives earliest. ok is false when some rank finds no parent.
func rateTree(m *Model, f *Fabric, root int, theta float64) (parent []int, children [][]int, ok bool) {
	n := f.Size()
	order := make([]int, 0, n-1)
	for r := 0; r < n; r++ {
		if r != root {
			order = append(order, r)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return f.Out(order[a]) > f.Out(order[b]) })
	const slack = 1 + 1e-9
	slots := make([]int, n)
	for r := range slots {
		slots[r] = int(math.Floor(f.Out(r) / theta * slack))
	}
	sides := f.segmentSides()
	segLeft := make([][2]int, len(f.Segments))
	for s, seg := range f.Segments {
		segLeft[s] = [2]int{int(math.Floor(seg.AB / theta * slack)), int(math.Floor(seg.BA / theta * slack))}
	}
	crossings := func(p, u int) (dirs []int, fits bool) {
		for s := range f.Segments {
			d := -1
			switch {
			case sides[s][p] == 1 && sides[s][u] == 2:
				d = 0
			case sides[s][p] == 2 && sides[s][u] == 1:
				d = 1
			}
			if d >= 0 {
				if segLeft[s][d] < 1 {
					return nil, false
				}
				dirs = append(dirs, 2*s+d)
			}
		}
		return dirs, true
	}
	parent = make([]int, n)
	children = make([][]int, n)
	first := make([]float64, n) // when the first byte could arrive
	for r := range parent {
		parent[r] = -2
	}
	parent[root] = -1
	members := []int{root}
	for _, u := range order {
		if f.In(u) < theta/slack {
			return nil, nil, false
		}
		best, bestCross, bestAt := -1, 0, 0.0
		var bestDirs []int
		for _, p := range members {
			if slots[p] < 1 || m.Rate(p, u) < theta/slack {
				continue
			}
			dirs, fits := crossings(p, u)
			if !fits {
				continue
			}
			at := first[p] + f.StartUp(p, u)
			if best < 0 || len(dirs) < bestCross || len(dirs) == bestCross && at < bestAt {
				best, bestCross, bestAt, bestDirs = p, len(dirs), at, dirs
			}
		}
		if best < 0 {
			return nil, nil, false
		}
		for _, d := range bestDirs {
			segLeft[d/2][d%2]--
		}
		slots[best]--
		parent[u] = best
		children[best] = append(children[best], u)
		first[u] = bestAt
		members = append(members, u)
	}
	return parent, children, true
}

// PredictBcast predicts how long plan takes on the ranks of m, whose
// fabric is f (FabricFromModel(m) when nil). Each edge p->c of the tree
// runs at the smallest of the pair's rate, p's egress shared among its
// children, c's ingress, and an equal share of every segment direction it
// crosses with the other tree edges that do. A piece of C bytes takes s =
// C / rate + bcastChunkOverhead on the edge. The first piece reaches c at
// F_c = F_p + T_pc + s, the last at L_c = max(F_c + (k-1) s, L_p + T_pc +
// s): the pieces stream at the edge's rate, but none leaves p before it
// arrived there. The prediction is the latest L_c.
func PredictBcast(m *Model, f *Fabric, plan *BcastPlan) float64 {
	if f == nil {
		f = FabricFromModel(m)
	}
	if len(plan.Packed) > 0 {
		return predictPacked(m, f, plan)
	}
	n := f.Size()
	sides := f.segmentSides()
	edges := make([]int, 2*len(f.Segments)) // tree edges per segment direction
	dirsOf := func(p, c int, visit func(d int)) {
		for s := range f.Segments {
			switch {
			case sides[s][p] == 1 && sides[s][c] == 2:
				visit(2 * s)
			case sides[s][p] == 2 && sides[s][c] == 1:
				visit(2*s + 1)
			}
		}
	}
	for p := 0; p < n; p++ {
		for _, c := range plan.Children[p] {
			dirsOf(p, c, func(d int) { edges[d]++ })
		}
	}
	k := max(plan.Chunks, 1)
	first, last := make([]float64, n), make([]float64, n)
	worst := 0.0
	queue := []int{plan.Root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		d := float64(len(plan.Children[p]))
		for _, c := range plan.Children[p] {
			rate := min(m.Rate(p, c), f.Out(p)/d, f.In(c))
			dirsOf(p, c, func(dir int) {
				seg := f.Segments[dir/2]
				capacity := seg.AB
				if dir%2 == 1 {
					capacity = seg.BA
				}
				rate = min(rate, capacity/float64(edges[dir]))
			})
			s := float64(plan.Chunk)/rate + bcastChunkOverhead
			t := f.StartUp(p, c)
			first[c] = first[p] + t + s
			last[c] = max(first[c]+float64(k-1)*s, last[p]+t+s)
			worst = max(worst, last[c])
			queue = append(queue, c)
		}
	}
	return worst
}

// BcastBound is a lower bound on broadcasting bytes bytes from root on f,
// and the resource that sets it: the largest of bytes over root's
// egress, over any other rank's ingress, (P-1) bytes over the sum of all
// egress capacities (every copy is sent by someone), and bytes over any
// segment direction from root's side to a side with ranks (the message
// crosses it at least once); plus the shortest start-up from root.
func BcastBound(f *Fabric, root int, bytes int64) FabricBound {
	n := f.Size()
	bd := &boundOf{}
	if n < 2 || root < 0 || root >= n {
		return bd.FabricBound
	}
	b := float64(bytes)
	bd.consider(b/f.Out(root), fmt.Sprintf("rank %d egress", root))
	total := 0.0
	for r := 0; r < n; r++ {
		total += f.Out(r)
		if r != root {
			bd.consider(b/f.In(r), fmt.Sprintf("rank %d ingress", r))
		}
	}
	bd.consider(float64(n-1)*b/total, "total egress")
	for s, side := range f.segmentSides() {
		seg := f.Segments[s]
		switch side[root] {
		case 1:
			bd.consider(b/seg.AB, fmt.Sprintf("segment %s a->b", seg.Name))
		case 2:
			bd.consider(b/seg.BA, fmt.Sprintf("segment %s b->a", seg.Name))
		}
	}
	return bd.done(f, root, bytes)
}

// AllgatherBound is a lower bound on an Allgather of bytes bytes per rank
// on f: the largest of bytes over any rank's egress (its block leaves it
// at least once), (P-1) bytes over any ingress, P(P-1) bytes over the sum
// of all egress capacities, and, for each segment direction, the blocks
// of its sending side over its capacity (each must cross at least once);
// plus the shortest start-up of any pair.
func AllgatherBound(f *Fabric, bytes int64) FabricBound {
	n := f.Size()
	bd := &boundOf{}
	if n < 2 {
		return bd.FabricBound
	}
	b := float64(bytes)
	total := 0.0
	for r := 0; r < n; r++ {
		total += f.Out(r)
		bd.consider(b/f.Out(r), fmt.Sprintf("rank %d egress", r))
		bd.consider(float64(n-1)*b/f.In(r), fmt.Sprintf("rank %d ingress", r))
	}
	bd.consider(float64(n)*float64(n-1)*b/total, "total egress")
	for _, seg := range f.Segments {
		bd.consider(float64(len(seg.A))*b/seg.AB, fmt.Sprintf("segment %s a->b", seg.Name))
		bd.consider(float64(len(seg.B))*b/seg.BA, fmt.Sprintf("segment %s b->a", seg.Name))
	}
	return bd.done(f, -1, bytes)
}

// boundOf builds a collective's FabricBound: the largest of the times it
// is given, and what sets it.
type boundOf struct{ FabricBound }

// consider takes sec seconds on the resource named what.
func (bd *boundOf) consider(sec float64, what string) {
	if sec > bd.Bandwidth {
		bd.Bandwidth, bd.Resource = sec, what
	}
}

// done adds the shortest start-up of a pair from rank from (any pair when
// from is -1) and returns the bound (no resource when nothing moves).
func (bd *boundOf) done(f *Fabric, from int, bytes int64) FabricBound {
	start := math.Inf(1)
	for i := 0; i < f.Size(); i++ {
		if from >= 0 && i != from {
			continue
		}
		for j := 0; j < f.Size(); j++ {
			if j != i {
				start = min(start, f.StartUp(i, j))
			}
		}
	}
	if bytes == 0 {
		bd.Resource = ""
	}
	bd.Seconds = bd.Bandwidth + start
	return bd.FabricBound
}
