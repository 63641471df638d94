package netprobe

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The fabric probe's latencies (probeFabric). Up to Config.PingAll ranks,
// every pair is pinged, in the rounds of a tournament: P-1 rounds. Beyond,
// a sample of the pairs is pinged, in a few rounds, and the others are
// inferred from a model of how latency builds up on a network:
//
//	latency(i, j) = a_i + a_j + D(g_i, g_j)
//
// a rank's own part (its stack, its NIC, its link to the switch) and a
// part for the way between the two groups (subnets: the switches and
// links between them; D(g, g) for two ranks of one group). The sample
// (samplePings) links every rank to two or more of its group (a ring and
// the ring two ahead, so that every a_i shows on its own) and every pair
// of groups by a pair or two of their ranks, plus one pair per rank kept
// out of the fit to check it. If the model misses the checked pairs (a
// network whose latencies are not of that form, such as one with delays
// per pair), the pairs not yet pinged are pinged after all, in the
// tournament's rounds: the fallback costs what pinging everything costs,
// and the latencies are measured wherever the model does not hold.
//
// Pairs of ranks on one host are always pinged: their latency is the
// host's, which the model above would not see.
//
// The rounds of pings run one at a time, each rank in one pair: pinging
// several peers at once was tried, and on racks32 here (32 namespaces on
// two loaded cores) eight or four at once took the median probed latency
// from 46-97 us to 160-500 us, the CPU, not the network, being what the
// pings then measured.

// pingPlan is what the fabric probe pings: rounds of pairs (A pings B),
// no rank in two pairs of a round, and which pairs check the model (not
// fitted). all: every pair, in the tournament's rounds.
type pingPlan struct {
	rounds [][]Pair
	check  map[Pair]bool
	all    bool
}

// planPings returns the pings of n ranks in groups (rankGroups) on hosts
// (nil, or one name per rank; "" is a host of its own).
func planPings(n int, groups []int, hosts []string, cfg Config) pingPlan {
	if cfg.PingAll >= 0 && n <= cfg.PingAll {
		return pingPlan{rounds: Tournament(n), all: true}
	}
	return samplePings(n, groups, hosts)
}

// samplePings picks the pairs to ping (see the comment above) and
// schedules them in rounds. It is deterministic: every rank makes the
// same plan.
func samplePings(n int, groups []int, hosts []string) pingPlan {
	members := map[int][]int{}
	var gs []int
	for r, g := range groups {
		if len(members[g]) == 0 {
			gs = append(gs, g)
		}
		members[g] = append(members[g], r)
	}
	seen := map[Pair]bool{}
	var pairs []Pair
	deg := make([]int, n)
	add := func(a, b int) bool {
		if a == b {
			return false
		}
		pr := Pair{min(a, b), max(a, b)}
		if seen[pr] {
			return false
		}
		seen[pr] = true
		pairs = append(pairs, pr)
		deg[a]++
		deg[b]++
		return true
	}
	// Within each group: the ring, and the ring two ahead.
	for _, g := range gs {
		m := members[g]
		for k := range m {
			add(m[k], m[(k+1)%len(m)])
			if len(m) > 3 {
				add(m[k], m[(k+2)%len(m)])
			}
		}
	}
	// Every pair of groups, by its least busy ranks: two pairs while the
	// groups are few, one when there are many (each pair of groups is then
	// still seen, and the check pairs cross most of them again).
	per := 2
	if len(gs) > 16 {
		per = 1
	}
	for x, g := range gs {
		for _, h := range gs[x+1:] {
			for range per {
				a := leastBusy(members[g], deg, func(int) bool { return true })
				if b := leastBusy(members[h], deg, func(r int) bool { return !seen[Pair{min(a, r), max(a, r)}] }); b >= 0 {
					add(a, b)
				}
			}
		}
	}
	// Every pair of ranks on one host.
	if hosts != nil {
		byHost := map[string][]int{}
		var names []string
		for r, h := range hosts {
			if h != "" && r < n {
				if len(byHost[h]) == 0 {
					names = append(names, h)
				}
				byHost[h] = append(byHost[h], r)
			}
		}
		for _, h := range names {
			for x, a := range byHost[h] {
				for _, b := range byHost[h][x+1:] {
					add(a, b)
				}
			}
		}
	}
	// One more pair per two ranks, at random, to check the model.
	rng := rand.New(rand.NewPCG(uint64(n), 0x9e3779b97f4a7c15))
	perm := rng.Perm(n)
	check := map[Pair]bool{}
	for k := 0; k+1 < n; k += 2 {
		a, b := perm[k], perm[k+1]
		if sameHost(hosts, a, b) {
			continue
		}
		if add(a, b) {
			check[Pair{min(a, b), max(a, b)}] = true
		}
	}
	return pingPlan{rounds: colourRounds(n, pairs), check: check}
}

func sameHost(hosts []string, a, b int) bool {
	return hosts != nil && a < len(hosts) && b < len(hosts) && hosts[a] != "" && hosts[a] == hosts[b]
}

// leastBusy returns the rank of ranks with the fewest pairs so far that ok
// accepts (the lowest such rank on a tie), or -1.
func leastBusy(ranks []int, deg []int, ok func(int) bool) int {
	best := -1
	for _, r := range ranks {
		if ok(r) && (best < 0 || deg[r] < deg[best]) {
			best = r
		}
	}
	return best
}

// colourRounds puts the pairs into rounds in which no rank is in two
// pairs: each pair, in order, into the first round where both its ranks
// are free (about as many rounds as the busiest rank has pairs).
func colourRounds(n int, pairs []Pair) [][]Pair {
	var rounds [][]Pair
	var busy [][]bool
	for _, pr := range pairs {
		k := 0
		for ; k < len(rounds); k++ {
			if !busy[k][pr.A] && !busy[k][pr.B] {
				break
			}
		}
		if k == len(rounds) {
			rounds = append(rounds, nil)
			busy = append(busy, make([]bool, n))
		}
		rounds[k] = append(rounds[k], pr)
		busy[k][pr.A], busy[k][pr.B] = true, true
	}
	return rounds
}

// The model's fit to the checked pairs: each within checkTol of what was
// measured (or checkFloor seconds, for the small latencies that noise
// moves by more than a fraction), in at least checkShare of them.
const (
	checkTol   = 0.3
	checkFloor = 20e-6
	checkShare = 0.9
)

// latencyModel is a fitted a_i + a_j + D(g_i, g_j).
type latencyModel struct {
	a      []float64
	d      map[[2]int]float64
	groups []int
	floor  float64 // half the smallest latency measured: no prediction is lower
}

func groupKey(g, h int) [2]int { return [2]int{min(g, h), max(g, h)} }

// at predicts the latency between i and j.
func (m *latencyModel) at(i, j int) float64 {
	return max(m.a[i]+m.a[j]+m.d[groupKey(m.groups[i], m.groups[j])], m.floor)
}

// fitLatency fits the model to the latencies of the pairs fit, by least
// squares (conjugate gradients on the normal equations: one unknown per
// rank and per pair of groups, one equation per pair; the model leaves a
// part free, a constant moved between a group's ranks and its ways, which
// changes no prediction). lat[i][j] is the measured latency of a pinged
// pair.
func fitLatency(n int, groups []int, fit []Pair, lat [][]float64) *latencyModel {
	m := &latencyModel{a: make([]float64, n), d: map[[2]int]float64{}, groups: groups, floor: math.Inf(1)}
	wayOf := map[[2]int]int{}
	var ways [][2]int
	w := make([]int, len(fit))
	b := make([]float64, len(fit))
	for k, pr := range fit {
		key := groupKey(groups[pr.A], groups[pr.B])
		x, ok := wayOf[key]
		if !ok {
			x = len(ways)
			wayOf[key] = x
			ways = append(ways, key)
		}
		w[k], b[k] = n+x, lat[pr.A][pr.B]
		m.floor = min(m.floor, b[k])
	}
	if len(fit) == 0 {
		m.floor = 0
		return m
	}
	dim := n + len(ways)
	// mul returns (A^T A) v.
	av := make([]float64, len(fit))
	mul := func(v, out []float64) {
		for k, pr := range fit {
			av[k] = v[pr.A] + v[pr.B] + v[w[k]]
		}
		clear(out)
		for k, pr := range fit {
			out[pr.A] += av[k]
			out[pr.B] += av[k]
			out[w[k]] += av[k]
		}
	}
	x := make([]float64, dim)
	r := make([]float64, dim) // A^T b - A^T A x, with x = 0
	for k, pr := range fit {
		r[pr.A] += b[k]
		r[pr.B] += b[k]
		r[w[k]] += b[k]
	}
	p := slices.Clone(r)
	q := make([]float64, dim)
	dot := func(u, v []float64) float64 {
		s := 0.0
		for i := range u {
			s += u[i] * v[i]
		}
		return s
	}
	rr := dot(r, r)
	stop := 1e-24 * rr
	for range 4 * dim {
		if rr <= stop {
			break
		}
		mul(p, q)
		pq := dot(p, q)
		if pq <= 0 {
			break
		}
		alpha := rr / pq
		for i := range x {
			x[i] += alpha * p[i]
			r[i] -= alpha * q[i]
		}
		next := dot(r, r)
		for i := range p {
			p[i] = r[i] + next/rr*p[i]
		}
		rr = next
	}
	m.floor /= 2
	copy(m.a, x[:n])
	for k, key := range ways {
		m.d[key] = x[n+k]
	}
	return m
}

// check tells whether the model predicts the checked pairs (lat: their
// measured latencies) within checkTol, in checkShare of them.
func (m *latencyModel) check(check map[Pair]bool, lat [][]float64) bool {
	if len(check) == 0 {
		return true
	}
	ok := 0
	for pr := range check {
		got, want := m.at(pr.A, pr.B), lat[pr.A][pr.B]
		if math.Abs(got-want) <= max(checkTol*want, checkFloor) {
			ok++
		}
	}
	return float64(ok) >= checkShare*float64(len(check))
}

// symmetricLatency makes the latencies the same both ways: the smaller of
// the two where both ends pinged, else the one measured (0: not pinged).
func symmetricLatency(l [][]float64) {
	for i := range l {
		for j := i + 1; j < len(l); j++ {
			v := min(l[i][j], l[j][i])
			if v == 0 {
				v = max(l[i][j], l[j][i])
			}
			l[i][j], l[j][i] = v, v
		}
	}
}

// fitPings fits the latency model to the pairs of a sample that were
// pinged (lat, symmetric) and are neither check pairs nor on one host,
// and returns it if it predicts the check pairs; nil otherwise.
func fitPings(lat [][]float64, groups []int, hosts []string, pp pingPlan) *latencyModel {
	var fit []Pair
	for _, round := range pp.rounds {
		for _, pr := range round {
			if !pp.check[pr] && !sameHost(hosts, pr.A, pr.B) && lat[pr.A][pr.B] > 0 {
				fit = append(fit, pr)
			}
		}
	}
	m := fitLatency(len(lat), groups, fit, lat)
	if !m.check(pp.check, lat) {
		return nil
	}
	return m
}

// composeOffsets returns every rank's clock offset to rank 0's (what to
// add to its clock to read rank 0's) from the offsets its pings measured
// (clocks[i][j]: j's clock minus i's), along the fewest pings from rank 0
// (each adds its error); 0 for a rank no ping reaches.
func composeOffsets(n int, clocks []map[int]float64) []float64 {
	type edge struct {
		to  int
		off float64 // to's clock minus from's
	}
	adj := make([][]edge, n)
	for i, c := range clocks {
		peers := make([]int, 0, len(c))
		for j := range c {
			peers = append(peers, j)
		}
		slices.Sort(peers)
		for _, j := range peers {
			adj[i] = append(adj[i], edge{j, c[j]})
			adj[j] = append(adj[j], edge{i, -c[j]})
		}
	}
	off := make([]float64, n)
	if n == 0 {
		return off
	}
	seen := make([]bool, n)
	seen[0] = true
	queue := []int{0}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, e := range adj[i] {
			if !seen[e.to] {
				// 0's clock minus to's = (0's minus i's) - (to's minus i's).
				seen[e.to] = true
				off[e.to] = off[i] - e.off
				queue = append(queue, e.to)
			}
		}
	}
	return off
}
