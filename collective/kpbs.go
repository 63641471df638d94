package collective

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// This file implements the graph side of GGP and OGGP (Jeannot and Wagner,
// "Two fast and efficient message scheduling algorithms for data
// redistribution through a backbone", sections 4.1 to 4.3):
//
//  1. every non-zero transfer becomes an edge whose weight is its duration
//     normalised by the setup time beta and rounded up (4.2.1), in integer
//     units of a byte quantum, see kpbsQuantum;
//  2. nodes and edges are added to turn the graph into a D-weight-regular
//     bipartite graph whose perfect matchings contain at most k original
//     edges (4.2.2);
//  3. WRGP (Figure 3) peels it: find a perfect matching, cut its edges to
//     the weight w of its lightest edge, emit that as a step, subtract, and
//     repeat until the graph is empty. GGP takes any perfect matching; OGGP
//     takes one whose lightest edge is as heavy as possible (Figure 6).
//  4. the original edges of each matching form a step, whose pieces of
//     units are mapped back to exact byte counts (kpbsBytes).

// kpbsMaxUnits bounds the total weight of the normalised graph, so that
// every sum the construction forms fits an int64 with room to spare.
const kpbsMaxUnits = 1 << 40

// kpbsMaxQuantum bounds the quantum (bytes per unit).
const kpbsMaxQuantum = 1 << 62

// kpbsEdge is one non-zero transfer of a redistribution.
type kpbsEdge struct {
	src, dst int   // sender and receiver index
	bytes    int64 // the matrix entry
	units    int64 // its normalised weight, ceil(bytes / quantum) >= 1
}

// kpbsQuantum returns the number of bytes in one unit of edge weight: the
// bytes one transfer moves in beta seconds, rounded to an integer, at least
// one byte, and coarse enough that the total weight stays below
// kpbsMaxUnits. With beta = 0 the unit is one byte: weights are byte counts
// and, preemption being free, GGP's schedule reaches max(W(G), P(G)/k) to
// within one byte's time per step.
func kpbsQuantum(r *Redistribution) int64 {
	qf := math.Round(r.Setup * r.Rate)
	var total float64
	for _, row := range r.Bytes {
		for _, b := range row {
			total += float64(b)
		}
	}
	qf = math.Max(qf, math.Ceil(total/kpbsMaxUnits))
	if !(qf < kpbsMaxQuantum) { // also catches +Inf
		return kpbsMaxQuantum
	}
	return max(int64(qf), 1)
}

// kpbsEdges lists the non-zero transfers in row-major order with their
// weights in units of q bytes.
func kpbsEdges(r *Redistribution, q int64) []kpbsEdge {
	var es []kpbsEdge
	for i, row := range r.Bytes {
		for j, b := range row {
			if b > 0 {
				u := b / q
				if b%q != 0 {
					u++
				}
				es = append(es, kpbsEdge{src: i, dst: j, bytes: b, units: u})
			}
		}
	}
	return es
}

// kpbsRegular builds the weight-regular graph of section 4.2.2 for the
// edges es (weights in units) and concurrency limit k. Senders and
// receivers without transfers are left out. It returns the graph and its
// degree D = max(W(G), ceil(P(G)/k')) where k' = min(k, active senders,
// active receivers): a larger k cannot be used by any matching.
func kpbsRegular(es []kpbsEdge, n1, n2, k int) (*kpbsGraph, int64) {
	// Compact the active senders (left) and receivers (right).
	left := make([]int, n1)
	right := make([]int, n2)
	for i := range left {
		left[i] = -1
	}
	for j := range right {
		right[j] = -1
	}
	var wl, wr []int64 // weight of each compacted vertex
	var p, w int64     // P(G) and W(G) in units
	for _, e := range es {
		if left[e.src] < 0 {
			left[e.src] = len(wl)
			wl = append(wl, 0)
		}
		if right[e.dst] < 0 {
			right[e.dst] = len(wr)
			wr = append(wr, 0)
		}
		wl[left[e.src]] += e.units
		wr[right[e.dst]] += e.units
		p += e.units
	}
	for _, x := range wl {
		w = max(w, x)
	}
	for _, x := range wr {
		w = max(w, x)
	}
	kk := int64(min(k, len(wl), len(wr)))
	d := max(w, (p+kk-1)/kk)

	// Case 2 of 4.2.2: pad P(G) up to k*D with edges joining pairs of new
	// vertices, each as heavy as allowed (D) but the last.
	fill := kk*d - p
	var pads []int64
	for fill > 0 {
		x := min(fill, d)
		pads = append(pads, x)
		fill -= x
	}
	nl := len(wl) + len(pads) // |V1'|
	nr := len(wr) + len(pads) // |V2'|
	// Case 1: add |V2'|-k vertices on the left and |V1'|-k on the right,
	// each of weight D, joined only to old vertices on the other side.
	n := nl + nr - int(kk)
	g := newKPBSGraph(n)
	for t, e := range es {
		g.addEdge(left[e.src], right[e.dst], e.units, t)
	}
	for _, x := range pads {
		g.addEdge(len(wl), len(wr), x, -1)
		wl = append(wl, x)
		wr = append(wr, x)
	}
	// Old left vertices give their deficits to the new right vertices
	// (indices nr..n-1), filling them one after the other; and the other
	// way round.
	c, room := nr, d
	for u, x := range wl {
		for def := d - x; def > 0; {
			y := min(def, room)
			g.addEdge(u, c, y, -1)
			def -= y
			room -= y
			if room == 0 {
				c, room = c+1, d
			}
		}
	}
	c, room = nl, d
	for v, x := range wr {
		for def := d - x; def > 0; {
			y := min(def, room)
			g.addEdge(c, v, y, -1)
			def -= y
			room -= y
			if room == 0 {
				c, room = c+1, d
			}
		}
	}
	return g, d
}

// kpbsPiece is a part of an original edge carried by one step, in units.
type kpbsPiece struct {
	edge  int // index into the edge list
	units int64
}

// kpbsPeel runs WRGP on the d-weight-regular graph g: it returns the steps
// as lists of pieces of original edges, dropping matchings made only of
// added edges. With maxMin it picks OGGP's matchings, otherwise any
// perfect matching (GGP).
func kpbsPeel(g *kpbsGraph, d int64, maxMin bool) ([][]kpbsPiece, error) {
	var steps [][]kpbsPiece
	for d > 0 {
		if g.maximize(1) != g.n {
			return nil, fmt.Errorf("collective: internal error: weight-regular graph (degree %d, %d vertices a side) has no perfect matching", d, g.n)
		}
		if maxMin {
			g.maxMin()
		}
		w := g.minMatched()
		var step []kpbsPiece
		for u := 0; u < g.n; u++ {
			e := g.mateL[u]
			if g.orig[e] >= 0 {
				step = append(step, kpbsPiece{edge: int(g.orig[e]), units: w})
			}
		}
		for u := 0; u < g.n; u++ {
			e := g.mateL[u]
			if g.ew[e] -= w; g.ew[e] == 0 {
				g.removeEdge(e)
			}
		}
		if len(step) > 0 {
			steps = append(steps, step)
		}
		d -= w
	}
	return steps, nil
}

// kpbsMulDiv returns floor(a*b/c) for 0 <= b <= c, c > 0, without
// overflow.
func kpbsMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// kpbsBytes turns the steps' pieces (units) into transfers of exact byte
// counts. An edge of B bytes and U units whose pieces have cumulated c
// units so far gives its next piece of u units
// floor(B*(c+u)/U) - floor(B*c/U) bytes: the pieces of an edge add up to
// exactly B, and as B >= U (a unit is at least one byte) every piece
// carries at least one byte.
func kpbsBytes(es []kpbsEdge, steps [][]kpbsPiece) [][]StepTransfer {
	done := make([]int64, len(es))
	out := make([][]StepTransfer, len(steps))
	for s, st := range steps {
		ts := make([]StepTransfer, 0, len(st))
		for _, pc := range st {
			e := es[pc.edge]
			before := kpbsMulDiv(e.bytes, done[pc.edge], e.units)
			done[pc.edge] += pc.units
			after := kpbsMulDiv(e.bytes, done[pc.edge], e.units)
			ts = append(ts, StepTransfer{Src: e.src, Dst: e.dst, Bytes: after - before})
		}
		sort.Slice(ts, func(a, b int) bool { return ts[a].Src < ts[b].Src })
		out[s] = ts
	}
	return out
}

// kpbsSchedule plans r with GGP (maxMin false) or OGGP (maxMin true) and
// returns the steps with exact byte counts.
func kpbsSchedule(r *Redistribution, maxMin bool) ([][]StepTransfer, error) {
	q := kpbsQuantum(r)
	es := kpbsEdges(r, q)
	if len(es) == 0 {
		return nil, nil
	}
	g, d := kpbsRegular(es, r.Senders, r.Receivers, r.K)
	steps, err := kpbsPeel(g, d, maxMin)
	if err != nil {
		return nil, err
	}
	return kpbsBytes(es, steps), nil
}
