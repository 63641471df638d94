package collective

import (
	"fmt"
	"math"
	"slices"
)

// Fabric is the second model of the network, for switched networks (the
// pairwise Model is the first, one-port one). Every rank has one NIC per
// rail, each with an egress and an ingress capacity, and a rank may send
// to and receive from several ranks at once, no faster in total than its
// NICs. Shared segments (a backbone between two clusters, an
// oversubscribed rack uplink) cap every flow that crosses them. A flow
// from i to j therefore uses i's egress, j's ingress and every segment
// direction between them; the network gives the active flows rates that
// share each of these max-min fairly (see SimulateFlows).
//
// A rank's NICs count together: a pair's traffic is striped over the
// rails both ends have (a transport.RailSet), so a rank's egress is the
// sum of its rails' egress capacities.
type Fabric struct {
	// Egress[r][k] and Ingress[r][k] are rank r's rail k capacities in
	// bytes per second. Every rank has at least one rail.
	Egress  [][]float64 `json:"egress"`
	Ingress [][]float64 `json:"ingress"`
	// Latency[i][j] is a flow's start-up time from i to j in seconds: the
	// pair's latency, plus whatever slow start costs. Nil means 0.
	Latency [][]float64 `json:"latency,omitempty"`
	// Segments are the shared links.
	Segments []Segment `json:"segments,omitempty"`
}

// Segment is a shared link between two disjoint sides of ranks: every
// flow from a rank of A to a rank of B crosses it at AB bytes per second
// in total, every flow from B to A at BA.
type Segment struct {
	Name string  `json:"name"`
	A    []int   `json:"a"`
	B    []int   `json:"b"`
	AB   float64 `json:"ab"`
	BA   float64 `json:"ba"`
}

// Size returns the number of ranks.
func (f *Fabric) Size() int { return len(f.Egress) }

// Out returns rank r's total egress capacity (all rails).
func (f *Fabric) Out(r int) float64 { return sum(f.Egress[r]) }

// In returns rank r's total ingress capacity (all rails).
func (f *Fabric) In(r int) float64 { return sum(f.Ingress[r]) }

// StartUp returns the start-up time of a flow from i to j.
func (f *Fabric) StartUp(i, j int) float64 {
	if f.Latency == nil || i == j {
		return 0
	}
	return f.Latency[i][j]
}

// clone returns a deep copy of f (nil for nil).
func (f *Fabric) clone() *Fabric {
	if f == nil {
		return nil
	}
	return &Fabric{Egress: cloneMatrix(f.Egress), Ingress: cloneMatrix(f.Ingress), Latency: cloneMatrix(f.Latency),
		Segments: cloneSegments(f.Segments)}
}

// cloneSegments returns a deep copy of ss (nil for none).
func cloneSegments(ss []Segment) []Segment {
	var c []Segment
	for _, s := range ss {
		s.A, s.B = slices.Clone(s.A), slices.Clone(s.B)
		c = append(c, s)
	}
	return c
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// Validate checks that the fabric is consistent: n ranks with at least
// one rail each and positive finite capacities, an n x n latency matrix
// of finite non-negative times if any, and segments whose sides are
// disjoint, non-empty sets of ranks with positive finite capacities.
func (f *Fabric) Validate() error {
	if f == nil {
		return fmt.Errorf("collective: nil fabric")
	}
	n := f.Size()
	if n < 1 {
		return fmt.Errorf("collective: fabric has no ranks")
	}
	if len(f.Ingress) != n {
		return fmt.Errorf("collective: fabric has egress for %d ranks and ingress for %d", n, len(f.Ingress))
	}
	for r := 0; r < n; r++ {
		for name, caps := range map[string][]float64{"egress": f.Egress[r], "ingress": f.Ingress[r]} {
			if len(caps) == 0 {
				return fmt.Errorf("collective: fabric %s[%d] lists no rail", name, r)
			}
			for k, c := range caps {
				if !(c > 0) || math.IsInf(c, 0) {
					return fmt.Errorf("collective: fabric %s[%d][%d] = %v: must be a positive number of bytes per second", name, r, k, c)
				}
			}
		}
	}
	if err := checkMatrix("fabric latency", f.Latency, n, false, false); err != nil {
		return err
	}
	for s, seg := range f.Segments {
		if err := seg.validate(n); err != nil {
			return fmt.Errorf("collective: fabric segment %d (%q): %w", s, seg.Name, err)
		}
	}
	return nil
}

func (s *Segment) validate(n int) error {
	if len(s.A) == 0 || len(s.B) == 0 {
		return fmt.Errorf("a side has no rank")
	}
	side := make(map[int]byte, len(s.A)+len(s.B))
	for name, ranks := range map[byte][]int{'a': s.A, 'b': s.B} {
		for _, r := range ranks {
			if r < 0 || r >= n {
				return fmt.Errorf("rank %d out of range [0,%d)", r, n)
			}
			if side[r] != 0 {
				return fmt.Errorf("rank %d listed twice", r)
			}
			side[r] = name
		}
	}
	for name, c := range map[string]float64{"ab": s.AB, "ba": s.BA} {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("%s = %v: must be a positive number of bytes per second", name, c)
		}
	}
	return nil
}

// segmentSides maps, for every segment, each rank to its side: 1 for A, 2
// for B, 0 for neither.
func (f *Fabric) segmentSides() [][]byte {
	sides := make([][]byte, len(f.Segments))
	for s, seg := range f.Segments {
		sides[s] = make([]byte, f.Size())
		for _, r := range seg.A {
			sides[s][r] = 1
		}
		for _, r := range seg.B {
			sides[s][r] = 2
		}
	}
	return sides
}

// FabricFromModel derives a fabric from a pairwise model: each rank's
// egress and ingress per rail are its fastest outgoing and incoming pair
// rates on that rail (Model.NICRates; the top-level rates when the model
// lists no rails), the start-up times are the model's latencies, and its
// segments are the model's (measured ones: netprobe finds a backbone with
// Clusters and measures it with concurrent flows; the pair rates alone
// cannot show one).
func FabricFromModel(m *Model) *Fabric {
	n := m.Size()
	f := &Fabric{Egress: make([][]float64, n), Ingress: make([][]float64, n), Latency: m.Latency, Segments: cloneSegments(m.Segments)}
	rails := []*Model{m}
	if len(m.Rails) > 0 {
		rails = rails[:0]
		for _, r := range m.Rails {
			rails = append(rails, &Model{Latency: r.Latency, Bandwidth: r.Bandwidth})
		}
	}
	for _, rm := range rails {
		out, in := rm.NICRates()
		for r := 0; r < n; r++ {
			// A lone rank has no peer and no flow: any capacity will do.
			f.Egress[r] = append(f.Egress[r], max(out[r], 1))
			f.Ingress[r] = append(f.Ingress[r], max(in[r], 1))
		}
	}
	return f
}
