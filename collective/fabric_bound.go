package collective

import (
	"fmt"
	"slices"
)

// FabricBound is a lower bound on the completion of a total exchange on a
// fabric, and the resource that sets it.
type FabricBound struct {
	// Seconds is the bound: the largest, over every NIC and segment
	// direction, of the bytes that must cross it divided by its capacity,
	// plus the shortest start-up time of the flows that cross it (the last
	// byte through it still has to arrive).
	Seconds float64
	// Bandwidth is the same without start-up times: the time Γ in which
	// the busiest resource can carry its bytes. Every flow paced at
	// bytes/Γ keeps every resource within its capacity (MADD).
	Bandwidth float64
	// Resource names what sets Seconds: "rank 3 egress", "rank 0 ingress"
	// or "segment backbone a->b" ("" when nothing moves).
	Resource string
}

// resource is one capacity of the fabric that flows share: a rank's
// egress or ingress, or one direction of a segment.
type resource struct {
	name string
	cap  float64
}

// fabricResources lists the fabric's resources: egress of every rank
// (index r), ingress of every rank (n+r), then each segment's a->b and
// b->a directions (2n+2s, 2n+2s+1).
func (f *Fabric) fabricResources() []resource {
	n := f.Size()
	res := make([]resource, 0, 2*n+2*len(f.Segments))
	for r := 0; r < n; r++ {
		res = append(res, resource{fmt.Sprintf("rank %d egress", r), f.Out(r)})
	}
	for r := 0; r < n; r++ {
		res = append(res, resource{fmt.Sprintf("rank %d ingress", r), f.In(r)})
	}
	for _, s := range f.Segments {
		res = append(res, resource{fmt.Sprintf("segment %s a->b", s.Name), s.AB},
			resource{fmt.Sprintf("segment %s b->a", s.Name), s.BA})
	}
	return res
}

// segmentIndex is what route needs to find a flow's segments quickly:
// every segment's sides (segmentSides) and, for every rank, the segments
// whose side A holds it. A rack's uplink has the rack on side A and every
// other rank on side B, so each rank is on side A of few segments while
// a pair may be on sides of all of them: scanning every segment for every
// pair cost the fabric bound 0.5 s at 1,024 ranks in 128 racks.
type segmentIndex struct {
	sides [][]byte
	onA   [][]int32
}

func (f *Fabric) segmentIndex() *segmentIndex {
	idx := &segmentIndex{sides: f.segmentSides(), onA: make([][]int32, f.Size())}
	for s, seg := range f.Segments {
		for _, r := range seg.A {
			idx.onA[r] = append(idx.onA[r], int32(s))
		}
	}
	return idx
}

// route appends to buf the resources a flow from i to j uses (indices
// into fabricResources): i's egress, j's ingress and every segment
// direction between them, in the segments' order.
func (f *Fabric) route(buf []int32, idx *segmentIndex, i, j int) []int32 {
	n := f.Size()
	buf = append(buf[:0], int32(i), int32(n+j))
	for _, s := range idx.onA[i] {
		if idx.sides[s][j] == 2 {
			buf = append(buf, int32(2*n)+2*s) // a->b
		}
	}
	for _, s := range idx.onA[j] {
		if idx.sides[s][i] == 2 {
			buf = append(buf, int32(2*n)+2*s+1) // b->a
		}
	}
	if len(buf) > 3 {
		slices.Sort(buf[2:])
	}
	return buf
}

// Bound returns the fabric lower bound of a total exchange: it
// generalises NICBound (one resource per NIC, rates from the pairwise
// model) with measured capacities and shared segments. x must be for as
// many ranks as f has.
func (f *Fabric) Bound(x *Exchange) (FabricBound, error) {
	if err := f.Validate(); err != nil {
		return FabricBound{}, err
	}
	n := f.Size()
	if x == nil || x.Size() != n {
		return FabricBound{}, fmt.Errorf("collective: the fabric has %d ranks but the exchange pattern has %d", n, x.Size())
	}
	if err := x.Validate(n); err != nil {
		return FabricBound{}, err
	}
	res := f.fabricResources()
	load := make([]float64, len(res))
	minStart := make([]float64, len(res))
	used := make([]bool, len(res))
	idx := f.segmentIndex()
	var route []int32
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j || x.Bytes[i][j] == 0 {
				continue
			}
			st := f.StartUp(i, j)
			route = f.route(route, idx, i, j)
			for _, r := range route {
				load[r] += float64(x.Bytes[i][j])
				if !used[r] || st < minStart[r] {
					minStart[r] = st
				}
				used[r] = true
			}
		}
	}
	var b FabricBound
	for r, rs := range res {
		if !used[r] {
			continue
		}
		t := load[r] / rs.cap
		b.Bandwidth = max(b.Bandwidth, t)
		if t+minStart[r] > b.Seconds {
			b.Seconds, b.Resource = t+minStart[r], rs.name
		}
	}
	return b, nil
}
