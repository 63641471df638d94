package netprobe

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
