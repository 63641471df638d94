package collective

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// exOpenShopCase draws an instance for the open shop's equality test,
// biased towards exact ties: homogeneous systems (every message at the
// same time, the caterpillar's steps), a few cost levels that add up
// exactly (powers of two), NIC classes with equal or random sizes, free
// messages, and patterns with missing messages.
func exOpenShopCase(rng *rand.Rand, n int) exCase {
	kind := []string{"homogeneous", "levels", "nic-equal", "nic-random", "free", "random"}[rng.IntN(6)]
	if kind == "random" {
		return exRandomCase(rng, n)
	}
	density := 1.0
	if rng.IntN(2) == 0 {
		density = []float64{0.02, 0.1, 0.5, 0.9}[rng.IntN(4)]
	}
	nic := make([]float64, n)
	for r := range nic {
		nic[r] = []float64{1, 2, 4, 8, 16}[rng.IntN(5)]
	}
	cost := make([][]float64, n)
	for i := range cost {
		cost[i] = make([]float64, n)
		for j := range cost[i] {
			if i == j || rng.Float64() >= density {
				continue
			}
			switch kind {
			case "homogeneous":
				cost[i][j] = 1
			case "levels":
				cost[i][j] = []float64{0.5, 1, 2, 4}[rng.IntN(4)]
			case "nic-equal":
				cost[i][j] = 64 / min(nic[i], nic[j])
			case "nic-random":
				cost[i][j] = float64(1+rng.IntN(64)) / min(nic[i], nic[j])
			case "free":
				cost[i][j] = []float64{1, 2}[rng.IntN(2)]
			}
		}
	}
	m, x := exCostModel(cost)
	if kind == "free" {
		// Some messages cost nothing: a per-byte model with zero entries.
		m.Latency, m.Bandwidth, m.PerByte = nil, nil, Matrix(n, 0)
		for i := range cost {
			for j := range cost[i] {
				if cost[i][j] > 0 && rng.IntN(3) > 0 {
					m.PerByte[i][j] = cost[i][j]
				}
			}
		}
	}
	return exCase{name: fmt.Sprintf("n=%d/%s/density=%g", n, kind, density), m: m, x: x}
}

// TestExchangeOpenShopEqualsReference checks that the open shop planner
// orders every send and receive exactly as the plain O(P^3) heuristic
// does, on instances of 1 to 300 ranks.
func TestExchangeOpenShopEqualsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1024))
	trials := 400
	if testing.Short() || mcRace {
		trials = 60
	}
	norm := func(o [][]int) [][]int {
		for k := range o {
			if len(o[k]) == 0 {
				o[k] = nil
			}
		}
		return o
	}
	for trial := 0; trial < trials; trial++ {
		var n int
		switch r := rng.IntN(10); {
		case r < 6:
			n = 1 + rng.IntN(40)
		case r < 9:
			n = 41 + rng.IntN(110)
		default:
			n = 151 + rng.IntN(150)
		}
		if trial == 0 {
			n = 300
		}
		c := exOpenShopCase(rng, n)
		in, err := newExchangeInstance(c.m, c.x)
		require.NoError(t, err, c.name)
		send, recv := in.openShop()
		wantSend, wantRecv := openShopReference(in)
		require.Equal(t, norm(wantSend), norm(send), c.name)
		require.Equal(t, norm(wantRecv), norm(recv), c.name)
	}
}

// TestExchangeOpenShopOrder moves receivers to random later times and
// checks that the order stays sorted by (time, rank), complete, and in
// blocks of 1 to 2*orderBlock keys.
func TestExchangeOpenShopOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 2, 63, 64, 65, 200, 700} {
		o := newRecvOrder(n)
		at := make([]float64, n)
		for step := 0; step < 20*n; step++ {
			r := rng.IntN(n)
			to := at[r]
			switch rng.IntN(3) {
			case 0: // ties: a few distinct times
				to += float64(rng.IntN(2))
			default:
				to += rng.Float64() * 10
			}
			o.remove(o.locate(recvKey{at[r], int32(r)}))
			o.insert(recvKey{to, int32(r)})
			pos := o.locate(recvKey{to, int32(r)})
			require.Equal(t, recvKey{to, int32(r)}, o.at(pos))
			at[r] = to
		}
		var got []recvKey
		for _, b := range o.blocks {
			require.Positive(t, b.n)
			for k := range b.n {
				got = append(got, b.key(k))
			}
		}
		require.Len(t, got, n)
		require.True(t, sort.SliceIsSorted(got, func(a, b int) bool { return got[a].less(got[b]) }))
		for _, k := range got {
			require.Equal(t, at[k.r], k.t)
		}
	}
}

// openShop returns the open shop plan's orders: send[i] lists i's
// destinations in its send order, recv[j] j's sources in its receive
// order.
func (in *exchangeInstance) openShop() (send, recv [][]int) {
	p := in.openShopPlan()
	send, recv = in.newOrders()
	for r := range send {
		send[r] = make([]int, 0)
		recv[r] = make([]int, 0)
	}
	byRecv := make([][]Transfer, in.n)
	for _, t := range p.Transfers {
		// Listed by sender, then the sender's order.
		send[t.Src] = append(send[t.Src], t.Dst)
		byRecv[t.Dst] = append(byRecv[t.Dst], t)
	}
	for j, ts := range byRecv {
		sort.Slice(ts, func(a, b int) bool { return ts[a].RecvSeq < ts[b].RecvSeq })
		for _, t := range ts {
			recv[j] = append(recv[j], t.Src)
		}
	}
	return send, recv
}

// TestExchangeOpenShopPlanIsSimulated checks that the plan the open shop
// writes as it goes is exactly what building it from its orders and
// simulating them gives, times, sequence numbers and bound included.
func TestExchangeOpenShopPlanIsSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 99))
	trials := 300
	if testing.Short() {
		trials = 60
	}
	for trial := 0; trial < trials; trial++ {
		n := 1 + rng.IntN(40)
		if trial%25 == 0 {
			n = 100 + rng.IntN(200)
		}
		c := exOpenShopCase(rng, n)
		in, err := newExchangeInstance(c.m, c.x)
		require.NoError(t, err, c.name)
		got := in.openShopPlan()
		send, recv := in.openShop()
		want, err := in.buildPlan(OpenShop, send, recv)
		require.NoError(t, err, c.name)
		require.Equal(t, want, got, c.name)
	}
}
