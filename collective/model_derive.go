package collective

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
)

// Models derived from a model: the part of a group, the multicast view of
// hosts limited by their NICs, a model with some rates replaced, and a
// digest that ranks compare to check they plan with the same model.

// Sub returns the model of the nodes in group, renumbered 0..len(group)-1
// in group's order: entry (a, b) of every matrix is entry (group[a],
// group[b]) of m, and the overheads follow their nodes. A segment keeps
// the members of the group on each of its sides, and is dropped when a
// side has none left. Rails are not carried over (they serve the rails of
// the whole world). A group that names every node in order returns m
// itself.
func (m *Model) Sub(group []int) *Model {
	if len(group) == m.Size() && isIdentity(group) {
		return m
	}
	sub := func(a [][]float64) [][]float64 {
		return remap(a, len(group), func(i, j int) float64 { return a[group[i]][group[j]] })
	}
	s := &Model{Latency: sub(m.Latency), Bandwidth: sub(m.Bandwidth), PerByte: sub(m.PerByte)}
	if m.SendOverhead != nil {
		for _, g := range group {
			s.SendOverhead = append(s.SendOverhead, m.SendOverhead[g])
		}
	}
	if m.RecvOverhead != nil {
		for _, g := range group {
			s.RecvOverhead = append(s.RecvOverhead, m.RecvOverhead[g])
		}
	}
	s.Segments = subSegments(m.Segments, group)
	return s
}

// subSegments renumbers segments for the nodes of group (see Model.Sub).
func subSegments(segs []Segment, group []int) []Segment {
	var out []Segment
	for _, seg := range segs {
		side := map[int]byte{}
		for _, r := range seg.A {
			side[r] = 'a'
		}
		for _, r := range seg.B {
			side[r] = 'b'
		}
		s := Segment{Name: seg.Name, AB: seg.AB, BA: seg.BA}
		for i, g := range group {
			switch side[g] {
			case 'a':
				s.A = append(s.A, i)
			case 'b':
				s.B = append(s.B, i)
			}
		}
		if len(s.A) > 0 && len(s.B) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func isIdentity(group []int) bool {
	for i, g := range group {
		if g != i {
			return false
		}
	}
	return true
}

// NICRates estimates every node's interface rates from the pair rates:
// out[i] is the fastest rate from i to anyone, in[j] the fastest rate into
// j from anyone (bytes per second; 0 for a node of a one-node model). On a
// switched network where a pair's rate is min(sender's NIC, receiver's
// NIC) this is exact as soon as some peer is at least as fast; otherwise
// it underestimates the interface.
func (m *Model) NICRates() (out, in []float64) {
	n := m.Size()
	out, in = make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				r := m.Rate(i, j)
				out[i] = max(out[i], r)
				in[j] = max(in[j], r)
			}
		}
	}
	return out, in
}

// SplitNICs maps a probed model onto the multicast paper's model for a
// network whose hosts are limited by their interfaces. The paper lets the
// transfers into a node overlap on the wire and serialises only the
// software overheads S and R; on a switched network each host's NIC
// serialises its traffic too, so the NIC's time per byte joins the
// overheads: S(i,m) = Sc + (Sm + 1/out_i) m and R(j,m) = Rc + (Rm +
// 1/in_j) m, with out_i and in_j from [Model.NICRates]. The wire keeps the
// latency and whatever a pair is slower than both its NICs: X(i,j) =
// max(0, 1/B_ij - 1/min(out_i, in_j)).
func (m *Model) SplitNICs() *Model {
	n := m.Size()
	out, in := m.NICRates()
	mm := &Model{Latency: m.Latency, PerByte: Matrix(n, 0),
		SendOverhead: make([]Overhead, n), RecvOverhead: make([]Overhead, n)}
	for i := 0; i < n; i++ {
		if m.SendOverhead != nil {
			mm.SendOverhead[i] = m.SendOverhead[i]
		}
		if m.RecvOverhead != nil {
			mm.RecvOverhead[i] = m.RecvOverhead[i]
		}
		if out[i] > 0 {
			mm.SendOverhead[i].PerByte += 1 / out[i]
		}
		if in[i] > 0 {
			mm.RecvOverhead[i].PerByte += 1 / in[i]
		}
		for j := 0; j < n; j++ {
			if i != j && out[i] > 0 && in[j] > 0 {
				mm.PerByte[i][j] = math.Max(0, m.SecondsPerByte(i, j)-1/math.Min(out[i], in[j]))
			}
		}
	}
	return mm
}

// PairRate is a measured rate for the link from one node to another.
type PairRate struct {
	From, To int
	Rate     float64 // bytes per second
}

// WithRates returns a copy of m in which the rate of every pair in rates
// is replaced, and whether any was: the copy has a Bandwidth matrix (from
// m's time per byte) and no PerByte, and shares m's other fields. Entries
// out of range, on the diagonal, or with a rate that is not positive and
// finite are ignored. m itself is not modified.
func (m *Model) WithRates(rates []PairRate) (*Model, bool) {
	n := m.Size()
	cp := *m
	cp.Bandwidth = make([][]float64, n)
	for i := range cp.Bandwidth {
		cp.Bandwidth[i] = make([]float64, n)
		for j := range cp.Bandwidth[i] {
			if i != j {
				cp.Bandwidth[i][j] = m.Rate(i, j)
			}
		}
	}
	cp.PerByte = nil
	changed := false
	for _, r := range rates {
		if r.From != r.To && r.From >= 0 && r.From < n && r.To >= 0 && r.To < n && r.Rate > 0 && !math.IsInf(r.Rate, 0) {
			cp.Bandwidth[r.From][r.To] = r.Rate
			changed = true
		}
	}
	return &cp, changed
}

// Digest summarises what the planners use of the model (every pair's
// rate and latency, and the segments' sides and capacities) in 63 bits,
// so that ranks can check cheaply that they plan with the same model. A
// nil model digests to 0.
func (m *Model) Digest() uint64 {
	if m == nil {
		return 0
	}
	h := fnv.New64a()
	var b [8]byte
	for i := 0; i < m.Size(); i++ {
		for j := 0; j < m.Size(); j++ {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(m.Rate(i, j)))
			h.Write(b[:])
			if m.Latency != nil {
				binary.LittleEndian.PutUint64(b[:], math.Float64bits(m.Latency[i][j]))
				h.Write(b[:])
			}
		}
	}
	for _, seg := range m.Segments {
		for _, v := range []float64{float64(len(seg.A)), float64(len(seg.B)), seg.AB, seg.BA} {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
		for _, r := range append(append([]int(nil), seg.A...), seg.B...) {
			binary.LittleEndian.PutUint64(b[:], uint64(r))
			h.Write(b[:])
		}
	}
	return h.Sum64() &^ (1 << 63)
}

// Transposed returns m with every direction reversed: what i sends to j
// in the result costs what j sends to i in m (latency, rate, per-byte
// cost, each rail), send and receive overheads trade places, and each
// segment's two directions swap. A reduction's tree, along which data
// flows towards the root, is a broadcast's tree on the transposed model.
func (m *Model) Transposed() *Model {
	tr := func(a [][]float64) [][]float64 {
		return remap(a, len(a), func(i, j int) float64 { return a[j][i] })
	}
	t := &Model{Latency: tr(m.Latency), Bandwidth: tr(m.Bandwidth), PerByte: tr(m.PerByte), SendOverhead: m.RecvOverhead, RecvOverhead: m.SendOverhead}
	for _, r := range m.Rails {
		t.Rails = append(t.Rails, Rail{Name: r.Name, Latency: tr(r.Latency), Bandwidth: tr(r.Bandwidth)})
	}
	for _, s := range m.Segments {
		s.AB, s.BA = s.BA, s.AB
		s.A, s.B = append([]int(nil), s.A...), append([]int(nil), s.B...)
		t.Segments = append(t.Segments, s)
	}
	return t
}

// remap returns the n x n matrix whose element (i, j) is at(i, j), or nil
// when a (the matrix at reads) is nil.
func remap(a [][]float64, n int, at func(i, j int) float64) [][]float64 {
	if a == nil {
		return nil
	}
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
		for j := range out[i] {
			out[i][j] = at(i, j)
		}
	}
	return out
}

// Clone returns a deep copy of m: changing either leaves the other as it
// was.
func (m *Model) Clone() *Model {
	c := &Model{
		Latency:      cloneMatrix(m.Latency),
		Bandwidth:    cloneMatrix(m.Bandwidth),
		PerByte:      cloneMatrix(m.PerByte),
		SendOverhead: slices.Clone(m.SendOverhead),
		RecvOverhead: slices.Clone(m.RecvOverhead),
	}
	for _, r := range m.Rails {
		c.Rails = append(c.Rails, Rail{Name: r.Name, Latency: cloneMatrix(r.Latency), Bandwidth: cloneMatrix(r.Bandwidth)})
	}
	c.Segments = cloneSegments(m.Segments)
	return c
}

func cloneMatrix(a [][]float64) [][]float64 {
	if a == nil {
		return nil
	}
	c := make([][]float64, len(a))
	for i, row := range a {
		c[i] = slices.Clone(row)
	}
	return c
}
