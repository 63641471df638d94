package collective

import (
	"math"
	"slices"
	"sort"
)

// kpbsGraph is a bipartite multigraph with n vertices on each side and
// positive integer edge weights, together with a matching of it. GGP and
// OGGP (Jeannot and Wagner) build one that is weight-regular and peel
// perfect matchings off it; see kpbs.go.
//
// Edges are identified by their index. An edge whose weight drops to zero
// is removed from the adjacency lists (and from the matching) but keeps
// its index.
type kpbsGraph struct {
	n  int
	eu []int32 // left endpoint of each edge
	ev []int32 // right endpoint of each edge
	ew []int64 // remaining weight of each edge; 0 once removed
	// orig is the index of the transfer an edge stands for, or -1 for an
	// edge added to make the graph weight-regular.
	orig []int32
	adj  [][]int32 // live edges leaving each left vertex
	pos  []int32   // position of each live edge in adj[eu[e]]

	mateL []int32 // matched edge at each left vertex, or -1
	mateR []int32 // matched edge at each right vertex, or -1

	// Hopcroft-Karp scratch space.
	dist  []int32
	iter  []int32
	queue []int32
	// Scratch for the max-min matching.
	saveL, saveR []int32
	maxL, maxR   []int64
	weights      []int64
	// lastMaxMin is the previous max-min value: peeling only lowers
	// weights, so it bounds the next one.
	lastMaxMin int64
}

const kpbsUnreached = math.MaxInt32

func newKPBSGraph(n int) *kpbsGraph {
	g := &kpbsGraph{n: n, adj: make([][]int32, n)}
	g.mateL = kpbsFill(make([]int32, n), -1)
	g.mateR = kpbsFill(make([]int32, n), -1)
	g.dist = make([]int32, n)
	g.iter = make([]int32, n)
	g.queue = make([]int32, 0, n)
	g.lastMaxMin = math.MaxInt64
	return g
}

func kpbsFill(s []int32, v int32) []int32 {
	for i := range s {
		s[i] = v
	}
	return s
}

// addEdge adds an edge of weight w > 0 from left u to right v.
func (g *kpbsGraph) addEdge(u, v int, w int64, orig int) {
	e := int32(len(g.eu))
	g.eu = append(g.eu, int32(u))
	g.ev = append(g.ev, int32(v))
	g.ew = append(g.ew, w)
	g.orig = append(g.orig, int32(orig))
	g.pos = append(g.pos, int32(len(g.adj[u])))
	g.adj[u] = append(g.adj[u], e)
}

// removeEdge drops edge e from its adjacency list and from the matching.
func (g *kpbsGraph) removeEdge(e int32) {
	u := g.eu[e]
	a := g.adj[u]
	last := a[len(a)-1]
	a[g.pos[e]] = last
	g.pos[last] = g.pos[e]
	g.adj[u] = a[:len(a)-1]
	if g.mateL[u] == e {
		g.mateL[u] = -1
		g.mateR[g.ev[e]] = -1
	}
	g.ew[e] = 0
}

// matched returns the size of the current matching.
func (g *kpbsGraph) matched() int {
	c := 0
	for _, e := range g.mateL {
		if e >= 0 {
			c++
		}
	}
	return c
}

// maximize grows the current matching into a maximum matching of the
// subgraph of edges of weight at least thr (Hopcroft-Karp: shortest
// augmenting paths, vertex-disjoint, phase by phase). Every edge already
// matched must weigh at least thr. It returns the matching's size.
func (g *kpbsGraph) maximize(thr int64) int {
	size := g.matched()
	for size < g.n && g.layer(thr) {
		for i := range g.iter {
			g.iter[i] = 0
		}
		for u := 0; u < g.n; u++ {
			if g.mateL[u] < 0 && g.augment(int32(u), thr) {
				size++
			}
		}
	}
	return size
}

// layer runs the breadth-first phase of Hopcroft-Karp from every free left
// vertex and reports whether a free right vertex is reachable by an
// alternating path.
func (g *kpbsGraph) layer(thr int64) bool {
	q := g.queue[:0]
	for u := 0; u < g.n; u++ {
		if g.mateL[u] < 0 {
			g.dist[u] = 0
			q = append(q, int32(u))
		} else {
			g.dist[u] = kpbsUnreached
		}
	}
	found := int32(kpbsUnreached)
	for h := 0; h < len(q); h++ {
		u := q[h]
		if g.dist[u] >= found {
			break // only shortest augmenting paths are wanted
		}
		for _, e := range g.adj[u] {
			if g.ew[e] < thr {
				continue
			}
			m := g.mateR[g.ev[e]]
			if m < 0 {
				found = g.dist[u] + 1
				continue
			}
			if w := g.eu[m]; g.dist[w] == kpbsUnreached {
				g.dist[w] = g.dist[u] + 1
				q = append(q, w)
			}
		}
	}
	g.queue = q
	return found != kpbsUnreached
}

// augment looks for an augmenting path from left vertex u along the
// layers of the last phase and flips it.
func (g *kpbsGraph) augment(u int32, thr int64) bool {
	for ; g.iter[u] < int32(len(g.adj[u])); g.iter[u]++ {
		e := g.adj[u][g.iter[u]]
		if g.ew[e] < thr {
			continue
		}
		v := g.ev[e]
		m := g.mateR[v]
		if m < 0 || (g.dist[g.eu[m]] == g.dist[u]+1 && g.augment(g.eu[m], thr)) {
			g.mateL[u] = e
			g.mateR[v] = e
			g.iter[u]++
			return true
		}
	}
	g.dist[u] = kpbsUnreached
	return false
}

// minMatched returns the smallest weight of a matched edge.
func (g *kpbsGraph) minMatched() int64 {
	lo := int64(math.MaxInt64)
	for _, e := range g.mateL {
		if e >= 0 && g.ew[e] < lo {
			lo = g.ew[e]
		}
	}
	return lo
}

// maxMin turns the current perfect matching into a perfect matching whose
// smallest edge weight is as large as possible: the matching of Figure 6
// of Jeannot and Wagner, which adds edges in decreasing weight order until
// the graph they form has a perfect matching. Instead of adding the edges
// one at a time it binary-searches the threshold among the distinct edge
// weights, each probe keeping the matched edges that clear the threshold
// and re-augmenting with Hopcroft-Karp restricted to edges at or above it.
//
// Successive calls on a graph being peeled use the previous max-min value
// as an upper bound (a perfect matching of the peeled graph is one of the
// graph before with weights at least as large) and probe it first, as the
// value often stays the same for a while.
func (g *kpbsGraph) maxMin() {
	defer func() { g.lastMaxMin = g.minMatched() }()
	lo := g.minMatched()
	// No perfect matching can beat the lightest of the vertices' heaviest
	// edges: every vertex must be matched through one of its edges.
	if g.maxL == nil {
		g.maxL = make([]int64, g.n)
		g.maxR = make([]int64, g.n)
		g.saveL = make([]int32, g.n)
		g.saveR = make([]int32, g.n)
	}
	for i := 0; i < g.n; i++ {
		g.maxL[i], g.maxR[i] = 0, 0
	}
	for u := 0; u < g.n; u++ {
		for _, e := range g.adj[u] {
			w := g.ew[e]
			if w > g.maxL[u] {
				g.maxL[u] = w
			}
			if v := g.ev[e]; w > g.maxR[v] {
				g.maxR[v] = w
			}
		}
	}
	hi := g.lastMaxMin
	for i := 0; i < g.n; i++ {
		hi = min(hi, g.maxL[i], g.maxR[i])
	}
	if hi <= lo {
		return
	}
	ws := g.weights[:0]
	for u := 0; u < g.n; u++ {
		for _, e := range g.adj[u] {
			if w := g.ew[e]; w > lo && w <= hi {
				ws = append(ws, w)
			}
		}
	}
	slices.Sort(ws)
	d := 0
	for i, w := range ws {
		if i == 0 || w != ws[d-1] {
			ws[d] = w
			d++
		}
	}
	ws = ws[:d]
	g.weights = ws
	// Invariant: the current matching is perfect with minimum >= ws[l]
	// (lo when l = -1); no perfect matching has minimum >= ws[h].
	l, h := -1, len(ws)
	for first := true; h-l > 1; first = false {
		mid := int(uint(l+h) >> 1)
		if first {
			mid = h - 1
		}
		t := ws[mid]
		copy(g.saveL, g.mateL)
		copy(g.saveR, g.mateR)
		for u := 0; u < g.n; u++ {
			if e := g.mateL[u]; e >= 0 && g.ew[e] < t {
				g.mateL[u] = -1
				g.mateR[g.ev[e]] = -1
			}
		}
		if g.maximize(t) == g.n {
			m := g.minMatched()
			l = sort.Search(len(ws), func(i int) bool { return ws[i] > m }) - 1
		} else {
			copy(g.mateL, g.saveL)
			copy(g.mateR, g.saveR)
			h = mid
		}
	}
}
