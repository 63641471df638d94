package collective

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanOrdersAll checks Orders, SendOrder and RecvOrder against a plain
// stable sort, on the planners' plans (numbers 0..k-1) and on plans with
// gaps and repeated numbers (which take the sorting path).
func TestPlanOrdersAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 15))
	want := func(p *Plan, rank int, key, seq func(*Transfer) int) []int {
		var idx []int
		for k := range p.Transfers {
			if key(&p.Transfers[k]) == rank {
				idx = append(idx, k)
			}
		}
		sort.SliceStable(idx, func(a, b int) bool { return seq(&p.Transfers[idx[a]]) < seq(&p.Transfers[idx[b]]) })
		return idx
	}
	for trial := 0; trial < 200; trial++ {
		c := exRandomCase(rng, 1+rng.IntN(12))
		p, err := PlanExchange(c.m, c.x, Algorithms(KindAlltoall)[trial%5], Options{})
		require.NoError(t, err)
		if trial%2 == 1 {
			// Shuffle the list and renumber some transfers with gaps
			// and repeats.
			rng.Shuffle(len(p.Transfers), func(a, b int) { p.Transfers[a], p.Transfers[b] = p.Transfers[b], p.Transfers[a] })
			for k := range p.Transfers {
				if rng.IntN(3) == 0 {
					p.Transfers[k].SendSeq = rng.IntN(5) * 3
					p.Transfers[k].RecvSeq = rng.IntN(5)
				}
			}
		}
		send, recv := p.Orders()
		for r := 0; r < p.Ranks; r++ {
			ws, wr := want(p, r, srcOf, sendSeqOf), want(p, r, dstOf, recvSeqOf)
			require.Equal(t, ws, p.SendOrder(r))
			require.Equal(t, wr, p.RecvOrder(r))
			require.Equal(t, len(ws), len(send[r]))
			if len(ws) > 0 {
				require.Equal(t, ws, send[r])
			}
			require.Equal(t, len(wr), len(recv[r]))
			if len(wr) > 0 {
				require.Equal(t, wr, recv[r])
			}
		}
	}
}
