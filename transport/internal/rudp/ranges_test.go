package rudp

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRangeSetAgainstMap compares the interval set with a brute-force set
// on random operations.
func TestRangeSetAgainstMap(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		var rs rangeSet
		ref := map[uint64]bool{}
		floor := uint64(0)
		for range 300 {
			switch r.IntN(5) {
			case 0:
				floor += uint64(r.IntN(10))
				rs.trimBelow(floor)
				for k := range ref {
					if k < floor {
						delete(ref, k)
					}
				}
			default:
				a := floor + uint64(r.IntN(80))
				b := a + uint64(r.IntN(8))
				fresh := rs.add(a, b, nil)
				var wantFresh []uint64
				for x := a; x < b; x++ {
					if !ref[x] {
						wantFresh = append(wantFresh, x)
					}
					ref[x] = true
				}
				var gotFresh []uint64
				for _, sp := range fresh {
					require.Less(t, sp.start, sp.end)
					for x := sp.start; x < sp.end; x++ {
						gotFresh = append(gotFresh, x)
					}
				}
				require.Equal(t, wantFresh, gotFresh, "seed %d add [%d,%d)", seed, a, b)
			}
			// Invariants: sorted, disjoint, not adjacent, same members.
			n := 0
			for i, sp := range rs.s {
				require.Less(t, sp.start, sp.end)
				if i > 0 {
					require.Less(t, rs.s[i-1].end, sp.start, "spans must be disjoint and non-adjacent")
				}
				for x := sp.start; x < sp.end; x++ {
					require.True(t, ref[x])
					n++
				}
			}
			require.Equal(t, len(ref), n)
			for x := floor; x < floor+100; x++ {
				require.Equal(t, ref[x], rs.contains(x))
			}
		}
	}
}
