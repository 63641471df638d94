package netprobe

import "math/bits"

// exhaustivePairs: rounds of up to this many pairs are oriented by trying
// every orientation (2^(pairs-1)); larger ones greedily.
const exhaustivePairs = 12

// Pair is one probe: A and B measure the link between them, both ways.
type Pair struct{ A, B int }

// Tournament returns the rounds of a round-robin tournament on n ranks
// (the circle method): every pair meets exactly once, and within a round
// no rank is in two pairs, so probes in one round never share an endpoint.
// n-1 rounds for even n, n rounds for odd n (one rank rests each round).
func Tournament(n int) [][]Pair {
	if n < 2 {
		return nil
	}
	m := n
	if m%2 == 1 {
		m++ // a phantom rank; pairing with it means resting
	}
	// Rank m-1 stays put; the others rotate.
	var rounds [][]Pair
	for r := 0; r < m-1; r++ {
		var round []Pair
		for k := 0; k < m/2; k++ {
			var a, b int
			if k == 0 {
				a, b = m-1, r
			} else {
				a = (r + k) % (m - 1)
				b = (r - k + m - 1) % (m - 1)
			}
			if a >= n || b >= n {
				continue
			}
			if a > b {
				a, b = b, a
			}
			round = append(round, Pair{a, b})
		}
		rounds = append(rounds, round)
	}
	return rounds
}

// Schedule is the tournament of n ranks with each pair oriented: A
// measures its direction first, then B. Probes of one round share no rank
// but may share a link of the network's core (a backbone between two
// clusters); a full-duplex link carries a flow each way at full rate, so
// within each round the senders are chosen to balance, across every likely
// cut of the ranks into two groups, the flows that cross it one way
// against those crossing it the other way. The ranks' placement is
// unknown, so the likely cuts are the ones launchers make: consecutive
// blocks of ranks (a prefix and the rest, and alternating blocks of every
// size, down to odd against even ranks). A round whose pairs all cross a
// backbone then loads each direction of it with half of them rather than
// all of them.
func Schedule(n int) [][]Pair {
	cuts, weights := likelyCuts(n)
	rounds := Tournament(n)
	for _, round := range rounds {
		orient(round, cuts, weights)
	}
	return rounds
}

// likelyCuts returns, for each cut, which side every rank is on, and its
// weight: prefixes {r < k} and alternating blocks {(r/b) odd}, without
// duplicates or complements of one another. The two halvings launchers
// make of two equal clusters, by blocks ({r < n/2}) and cyclically (odd
// against even ranks), weigh more than all the others together, so that
// they are balanced first.
func likelyCuts(n int) (cuts [][]bool, weights []int) {
	seen := cutSet{}
	add := func(w int, side func(r int) bool) {
		c := make([]bool, n)
		for r := range c {
			c[r] = side(r)
		}
		if seen.add(c) {
			cuts, weights = append(cuts, c), append(weights, w)
		}
	}
	heavy := 2 * n // more than the others' imbalances together (< 2n cuts, each at most n/2)
	add(heavy, func(r int) bool { return r < n/2 })
	add(heavy, func(r int) bool { return r%2 == 1 })
	for k := 1; k < n; k++ {
		add(1, func(r int) bool { return r < k })
	}
	for b := 2; b < n; b++ {
		add(1, func(r int) bool { return (r/b)%2 == 1 })
	}
	return cuts, weights
}

// cutSet records cuts, each given by which side every rank is on; a cut
// and its complement are the same cut.
type cutSet map[string]bool

// add records the cut and reports whether it is new.
func (s cutSet) add(side []bool) bool {
	key, comp := make([]byte, len(side)), make([]byte, len(side))
	for r, in := range side {
		key[r], comp[r] = '0', '1'
		if in {
			key[r], comp[r] = '1', '0'
		}
	}
	if s[string(key)] || s[string(comp)] {
		return false
	}
	s[string(key)] = true
	return true
}

// orient swaps A and B of a round's pairs to minimize, summed over the
// cuts (weighted), how many more flows of the round's first half cross
// each cut one way than the other: every orientation for small rounds,
// else a greedy pass in the round's order, then single flips while they
// help. Deterministic, so every rank computes the same.
func orient(round []Pair, cuts [][]bool, weights []int) {
	// d[k]: flows crossing cut k from its true side minus the other way.
	d := make([]int, len(cuts))
	dir := func(p Pair, k int) int {
		switch side := cuts[k]; {
		case side[p.A] == side[p.B]:
			return 0
		case side[p.A]:
			return 1
		default:
			return -1
		}
	}
	abs := func(x int) int { return max(x, -x) }
	cost := 0
	// flipGain is how much flipping pair i would lower the cost.
	flipGain := func(i int) int {
		g := 0
		for k := range cuts {
			if s := dir(round[i], k); s != 0 {
				g += weights[k] * (abs(d[k]) - abs(d[k]-2*s))
			}
		}
		return g
	}
	flip := func(i int) {
		cost -= flipGain(i)
		for k := range cuts {
			d[k] -= 2 * dir(round[i], k)
		}
		round[i].A, round[i].B = round[i].B, round[i].A
	}
	if len(round) <= exhaustivePairs {
		for k := range cuts {
			for _, p := range round {
				d[k] += dir(p, k)
			}
			cost += weights[k] * abs(d[k])
		}
		// Every orientation (the first pair's is fixed: flipping all of
		// them costs the same), in Gray-code order.
		best, bestMask, mask := cost, 0, 0
		for g := 1; g < 1<<max(len(round)-1, 0); g++ {
			i := 1 + bits.TrailingZeros(uint(g))
			flip(i)
			mask ^= 1 << i
			if cost < best {
				best, bestMask = cost, mask
			}
		}
		for i := range round {
			if (mask^bestMask)&(1<<i) != 0 {
				flip(i)
			}
		}
		return
	}
	// Greedy: each pair in turn takes the orientation that costs less with
	// the pairs before it (later ones are not counted yet), then single
	// flips while they help.
	for i, p := range round {
		gain := 0 // how much less the other orientation adds
		for k := range cuts {
			if s := dir(p, k); s != 0 {
				gain += weights[k] * (abs(d[k]+s) - abs(d[k]-s))
			}
		}
		if gain > 0 {
			round[i].A, round[i].B = p.B, p.A
		}
		for k := range cuts {
			d[k] += dir(round[i], k)
		}
	}
	for improved := true; improved; {
		improved = false
		for i := range round {
			if flipGain(i) > 0 {
				flip(i)
				improved = true
			}
		}
	}
}
