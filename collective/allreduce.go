package collective

import (
	"fmt"
	"math"
	"math/bits"
)

// The two ways to Allreduce a vector, and the choice between them.
const (
	// AllreduceTree reduces to rank 0 along a binomial tree, then
	// broadcasts along one: 2 ceil(log2 P) steps of the whole vector.
	// It pays the fewest start-ups, so it wins for small vectors.
	AllreduceTree Algorithm = "tree"
	// AllreduceRSAG reduce-scatters the vector, then allgathers the
	// blocks: every rank sends and receives about twice the vector once,
	// whatever P, so it wins for large vectors. The blocks are in
	// proportion to the ranks' NIC rates, so a slow NIC carries less.
	AllreduceRSAG Algorithm = "rsag"
)

// AllreducePlan is how to Allreduce a vector of Elems elements.
type AllreducePlan struct {
	Algorithm Algorithm
	// Counts is, for AllreduceRSAG, the block of each rank in elements
	// (they add up to Elems).
	Counts []int
	// Segments is, for AllreduceRSAG, how many pieces every block is cut
	// into so that the allgather of one piece overlaps the reduce-scatter
	// of the next (1: the two rounds one after the other). Overlapping
	// pays where the two rounds are limited by different NICs: a rank
	// with a slow egress sends most in the reduce-scatter, one with a
	// slow ingress receives most in the allgather.
	Segments int
	// Tree and RSAG are the two algorithms' predicted times, in seconds.
	Tree, RSAG float64
}

// rsagMargin: Auto reduce-scatters only when that is predicted to take
// less than this share of the tree's time, and only when the tree is
// predicted to take rsagMinSpan or more. Below that the links are not
// what limits: the tree moves the vector as fewer, larger messages with
// fewer buffers, which gains where the ranks share CPUs, and which the
// model does not see. On loopback (4 ranks on 2 cores, 1 and 8 MiB) the
// tree ran 15-30% faster than reduce-scatter; on dualnic4 with rails
// (8 MiB, about 1 s) reduce-scatter ran at 1.05x the bound and the tree
// at 2.3x.
const (
	rsagMargin  = 0.8
	rsagMinSpan = 10e-3
)

// Pipelining reduce-scatter and allgather (AllreducePlan.Segments): at
// most rsagMaxSegments pieces of at least rsagMinPiece bytes per rank,
// and only when predicted under rsagPipelineMargin of the two rounds one
// after the other (which can be paced, and whose messages are fewer).
const (
	rsagMaxSegments    = 16
	rsagMinPiece       = 32 << 10
	rsagPipelineMargin = 0.8
)

// PlanAllreduce chooses how to Allreduce elems elements of elemSize bytes
// on the ranks of m, by the predictions of both algorithms on the fabric
// m implies (every rank's egress Out and ingress In, full duplex). The
// tree reduces a vector of b bytes to rank 0 along a binomial tree,
// ceil(log2 P) rounds of T + b/r with T the median start-up time and r
// the slowest rank's min(Out, In), then broadcasts it as PlanBcast plans.
// Reduce-scatter then allgather, with rank i's block of b_i bytes, is two
// rounds of direct messages: in the first rank i sends b - b_i bytes and
// receives (P-1) b_i, in the second the reverse; each round takes T plus
// its busiest NIC's bytes over its capacity plus P-1 message overheads.
// The blocks are in proportion to min(Out, In). algo forces one ("" or
// Auto: reduce-scatter when predicted to take less than rsagMargin of the
// tree's time, and the tree at least rsagMinSpan).
func PlanAllreduce(m *Model, elems, elemSize int, algo Algorithm) AllreducePlan {
	n := m.Size()
	p := AllreducePlan{Algorithm: AllreduceTree}
	if n < 2 || elems == 0 {
		return p
	}
	f := FabricFromModel(m)
	rates := make([]float64, n)
	slowest := math.Inf(1)
	for r := range rates {
		rates[r] = min(f.Out(r), f.In(r))
		slowest = min(slowest, rates[r])
	}
	var lat []float64
	if m.Latency != nil {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					lat = append(lat, m.Latency[i][j])
				}
			}
		}
	}
	t := 0.0
	if len(lat) > 0 {
		t = Median(lat)
	}
	b := float64(elems) * float64(elemSize)
	rounds := float64(bits.Len(uint(n - 1)))
	p.Tree = rounds * (t + b/slowest)
	if bp, err := PlanBcast(m, 0, int64(b), Auto); err == nil {
		p.Tree += bp.Predicted
	}
	p.Counts = ProportionalCounts(elems, rates)
	rs, ag := 0.0, 0.0
	for r, c := range p.Counts {
		bi := float64(c) * float64(elemSize)
		rs = max(rs, (b-bi)/f.Out(r), float64(n-1)*bi/f.In(r))
		ag = max(ag, float64(n-1)*bi/f.Out(r), (b-bi)/f.In(r))
	}
	p.RSAG = 2*(t+float64(n-1)*allgatherMessageOverhead) + rs + ag
	p.Segments = 1
	// Overlapped, every NIC carries both rounds' bytes at once; a piece
	// of each round is not overlapped (the first reduce-scatter, the last
	// allgather), and each piece costs its messages' overheads.
	both := 0.0
	for r, c := range p.Counts {
		bi := float64(c) * float64(elemSize)
		bytes := b + float64(n-2)*bi // each way, over the two rounds
		both = max(both, bytes/f.Out(r), bytes/f.In(r))
	}
	seq := p.RSAG
	for s := 2; s <= rsagMaxSegments; s *= 2 {
		if b/float64(n*s) < rsagMinPiece {
			break
		}
		pipe := 2*t + both + (rs+ag)/float64(s) + float64(2*s*(n-1))*allgatherMessageOverhead
		if pipe < rsagPipelineMargin*seq && pipe < p.RSAG {
			p.RSAG, p.Segments = pipe, s
		}
	}
	switch {
	case algo == AllreduceRSAG, (algo == "" || algo == Auto) && p.RSAG < rsagMargin*p.Tree && p.Tree >= rsagMinSpan:
		p.Algorithm = AllreduceRSAG
	default:
		p.Counts, p.Segments = nil, 0
	}
	return p
}

// ProportionalCounts splits total units into one count per weight, in
// proportion to the weights (largest remainders get the leftover units),
// so that the counts add up to total. Non-positive weights get nothing,
// unless every weight is: then the split is even.
func ProportionalCounts(total int, weights []float64) []int {
	counts := make([]int, len(weights))
	if len(weights) == 0 {
		return counts
	}
	w := make([]float64, len(weights))
	sum := 0.0
	for i, x := range weights {
		if x > 0 && !math.IsInf(x, 0) {
			w[i] = x
			sum += x
		}
	}
	if sum == 0 {
		for i := range w {
			w[i] = 1
		}
		sum = float64(len(w))
	}
	given := 0
	rem := make([]float64, len(w))
	for i := range w {
		exact := float64(total) * w[i] / sum
		counts[i] = int(math.Floor(exact))
		rem[i] = exact - float64(counts[i])
		given += counts[i]
	}
	for ; given < total; given++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] || rem[i] == rem[best] && w[i] > w[best] {
				best = i
			}
		}
		counts[best]++
		rem[best] = -1
	}
	return counts
}

// AllreduceBound is a lower bound on an Allreduce of bytes bytes per rank
// on f, for algorithms that combine at the ranks (the network only moves
// bytes), and the resource that sets it: the largest of
//
//   - bytes over any rank's ingress: every element of a rank's result
//     depends on every other rank's input, so at least one value per
//     element reaches the rank;
//   - bytes over any rank's egress: every element of a rank's input
//     counts in every other rank's result, so at least one value per
//     element leaves it;
//   - 2(P-1) bytes over the sum of all egress capacities (and of all
//     ingress): combining P inputs into one value takes at least P-1
//     transfers of it, and bringing the result back to the P-1 ranks
//     that did not combine it last at least P-1 more (Patarasuk and
//     Yuan's bound, 2(P-1)/P bytes per rank on alike NICs);
//   - bytes over each direction of a segment: the ranks on either side
//     need the other side's inputs;
//
// plus the shortest start-up of any pair.
func AllreduceBound(f *Fabric, bytes int64) FabricBound {
	n := f.Size()
	bd := &boundOf{}
	if n < 2 {
		return bd.FabricBound
	}
	b := float64(bytes)
	out, in := 0.0, 0.0
	for r := 0; r < n; r++ {
		out += f.Out(r)
		in += f.In(r)
		bd.consider(b/f.Out(r), fmt.Sprintf("rank %d egress", r))
		bd.consider(b/f.In(r), fmt.Sprintf("rank %d ingress", r))
	}
	bd.consider(2*float64(n-1)*b/out, "total egress")
	bd.consider(2*float64(n-1)*b/in, "total ingress")
	for _, seg := range f.Segments {
		bd.consider(b/seg.AB, fmt.Sprintf("segment %s a->b", seg.Name))
		bd.consider(b/seg.BA, fmt.Sprintf("segment %s b->a", seg.Name))
	}
	return bd.done(f, -1, bytes)
}

// ReduceScatterBound is a lower bound on a ReduceScatter of bytes bytes
// per rank in P equal blocks on f (MPI_Reduce_scatter_block), for
// algorithms that combine at the ranks, and the resource that sets it:
// the largest of
//
//   - (P-1)/P bytes over any rank's egress: its input for every other
//     rank's block leaves it at least once;
//   - bytes/P over any rank's ingress: its block, combined, arrives;
//   - (P-1) bytes over the sum of all egress capacities: combining P
//     inputs of a block takes at least P-1 transfers of it;
//   - for each segment direction, the blocks of the receiving side (each
//     needs the sending side's inputs) over its capacity;
//
// plus the shortest start-up of any pair.
func ReduceScatterBound(f *Fabric, bytes int64) FabricBound {
	n := f.Size()
	bd := &boundOf{}
	if n < 2 {
		return bd.FabricBound
	}
	b, p := float64(bytes), float64(n)
	out := 0.0
	for r := 0; r < n; r++ {
		out += f.Out(r)
		bd.consider((p-1)/p*b/f.Out(r), fmt.Sprintf("rank %d egress", r))
		bd.consider(b/p/f.In(r), fmt.Sprintf("rank %d ingress", r))
	}
	bd.consider((p-1)*b/out, "total egress")
	for _, seg := range f.Segments {
		bd.consider(float64(len(seg.B))*b/p/seg.AB, fmt.Sprintf("segment %s a->b", seg.Name))
		bd.consider(float64(len(seg.A))*b/p/seg.BA, fmt.Sprintf("segment %s b->a", seg.Name))
	}
	return bd.done(f, -1, bytes)
}
