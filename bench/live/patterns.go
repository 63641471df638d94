package live

import (
	"fmt"
	"strings"

	"github.com/hetcomm/hetcomm/collective"
)

// Patterns are the Alltoallv byte matrices of the live benchmark. The C
// peer (bench/peer/alltoallv.c) builds exactly the same ones, from the
// same splitmix64 generator.
var Patterns = []string{"uniform", "random", "servers", "sparse"}

// splitmix64 is the generator shared with the C peer.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// PatternSizes returns the n x n byte matrix (row = sender) of a pattern
// whose messages are at most max bytes:
//
//   - uniform: every pair sends max bytes;
//   - random: each pair sends a size drawn uniformly from [0, max];
//   - servers: the ranks r with r % 5 == 0 (20%) are servers; a server sends
//     max bytes to every client, every other message is min(max, 1 KiB);
//   - sparse: each rank sends max bytes to the next max(1, n/4) ranks only.
//
// The diagonal is zero.
func PatternSizes(pattern string, n int, max int64, seed uint64) ([][]int64, error) {
	if n < 1 || max < 0 {
		return nil, fmt.Errorf("bench: pattern needs n >= 1 and max >= 0")
	}
	small := max
	if small > 1024 {
		small = 1024
	}
	sz := make([][]int64, n)
	for i := range sz {
		sz[i] = make([]int64, n)
		for j := range sz[i] {
			if i == j {
				continue
			}
			switch pattern {
			case "uniform":
				sz[i][j] = max
			case "random":
				sz[i][j] = int64(splitmix64(seed*0x9E3779B97F4A7C15+uint64(i)*1000003+uint64(j)) % uint64(max+1))
			case "servers":
				if i%5 == 0 && j%5 != 0 {
					sz[i][j] = max
				} else {
					sz[i][j] = small
				}
			case "sparse":
				k := n / 4
				if k < 1 {
					k = 1
				}
				if d := (j - i + n) % n; d >= 1 && d <= k {
					sz[i][j] = max
				}
			default:
				return nil, fmt.Errorf("bench: unknown pattern %q (want %s)", pattern, strings.Join(Patterns, ", "))
			}
		}
	}
	return sz, nil
}

// MulticastPattern returns a multiple multicast of n ranks with messages
// of size bytes: "allbcast", every rank broadcasting to all the others;
// "multi", the ranks r with r % 4 == 0 (25%) each sending to a random
// subset (each other rank with probability 1/2, at least one).
func MulticastPattern(pattern string, n int, size int64, seed uint64) (*collective.Multicast, error) {
	mc := &collective.Multicast{}
	switch pattern {
	case "allbcast":
		for s := 0; s < n; s++ {
			var d []int
			for r := 0; r < n; r++ {
				if r != s {
					d = append(d, r)
				}
			}
			mc.Messages = append(mc.Messages, collective.Message{Source: s, Bytes: size, Dests: d})
		}
	case "multi":
		for s := 0; s < n; s += 4 {
			var d []int
			for r := 0; r < n; r++ {
				if r != s && splitmix64(seed*0x9E3779B97F4A7C15+uint64(s)*7919+uint64(r))%2 == 0 {
					d = append(d, r)
				}
			}
			if len(d) == 0 && n > 1 {
				d = []int{(s + 1) % n}
			}
			mc.Messages = append(mc.Messages, collective.Message{Source: s, Bytes: size, Dests: d})
		}
	default:
		return nil, fmt.Errorf("bench: unknown multicast pattern %q (want allbcast or multi)", pattern)
	}
	return mc, nil
}

// RedistributionSizes returns an n1 x n2 matrix of sizes drawn uniformly
// from [max/10, max]: the redistribution paper's experiment (10 to 100 MB
// per pair), scaled.
func RedistributionSizes(n1, n2 int, max int64, seed uint64) [][]int64 {
	lo := max / 10
	out := make([][]int64, n1)
	for i := range out {
		out[i] = make([]int64, n2)
		for j := range out[i] {
			out[i][j] = lo + int64(splitmix64(seed*0xBF58476D1CE4E5B9+uint64(i)*1000003+uint64(j))%uint64(max-lo+1))
		}
	}
	return out
}
