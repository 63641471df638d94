package collective

import "sort"

// Clusters splits the nodes of a model into the two groups that its
// fastest links hold together: single-linkage clustering on the pair
// rates, where a pair's rate is the slower of its two directions. It
// joins pairs from the fastest down, as Kruskal's algorithm does, until
// two groups remain, so that the slowest links left between the groups
// form the cut (on two clusters joined by a backbone, the backbone). It
// returns the groups with their nodes in increasing order, the group of
// the lowest node first; nil if the model has fewer than 2 nodes. Ties
// between equal rates are broken by the lower pair first.
func Clusters(m *Model) [][]int {
	n := m.Size()
	if n < 2 {
		return nil
	}
	type edge struct {
		i, j int
		rate float64
	}
	var edges []edge
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			edges = append(edges, edge{i, j, min(m.Rate(i, j), m.Rate(j, i))})
		}
	}
	sort.SliceStable(edges, func(a, b int) bool { return edges[a].rate > edges[b].rate })
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	comps := n
	for _, e := range edges {
		if comps == 2 {
			break
		}
		if a, b := find(e.i), find(e.j); a != b {
			parent[a] = b
			comps--
		}
	}
	groups := map[int][]int{}
	for i := 0; i < n; i++ {
		groups[find(i)] = append(groups[find(i)], i)
	}
	out := make([][]int, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// CostsFrom fills in the redistribution's Rate and Setup from a model
// when they are zero: Rate is the median rate from the senders to the
// receivers (world node numbers) and Setup twice their median latency,
// or 100 µs when the model has no latencies.
func (r *Redistribution) CostsFrom(m *Model, senders, receivers []int) {
	var rates, lat []float64
	for _, s := range senders {
		for _, d := range receivers {
			rates = append(rates, m.Rate(s, d))
			if m.Latency != nil {
				lat = append(lat, m.Latency[s][d])
			}
		}
	}
	if r.Rate == 0 && len(rates) > 0 {
		r.Rate = Median(rates)
	}
	if r.Setup == 0 {
		if len(lat) > 0 {
			r.Setup = 2 * Median(lat)
		}
		if r.Setup == 0 {
			r.Setup = 100e-6
		}
	}
}
