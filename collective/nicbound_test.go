package collective

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNICBound(t *testing.T) {
	// Three ranks on a switch: NICs of 100, 10 and 10 (bytes/s), pair rate
	// min(out, in). Rank 0 sends 100 bytes to each of the others.
	nic := []float64{100, 10, 10}
	m := &Model{Latency: Matrix(3, 0), Bandwidth: Matrix(3, 0)}
	for i := range nic {
		for j := range nic {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	x := &Exchange{Bytes: [][]int64{{0, 100, 100}, {0, 0, 0}, {0, 0, 0}}}
	// Rank 0's fastest pair is 10: 200 bytes at 10 = 20 (it cannot see its
	// own 100 through slower peers); each receiver takes 100 at 10 = 10.
	require.InDelta(t, 20.0, NICBound(m, x), 1e-12)
	// The one-port bound is the same here (rank 0 sends 20 s in a row).
	p, err := PlanExchange(m, x, OpenShop, Options{})
	require.NoError(t, err)
	require.InDelta(t, 20.0, p.LowerBound, 1e-12)

	// A fast receiver fed by two slow senders: one-port makes it take them
	// one after the other (20 s); its NIC takes both at once (10 s).
	nic = []float64{100, 100, 10, 10}
	m = &Model{Bandwidth: Matrix(4, 0)}
	for i := range nic {
		for j := range nic {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	x = &Exchange{Bytes: [][]int64{{0, 0, 0, 0}, {0, 0, 0, 0}, {100, 0, 0, 0}, {100, 0, 0, 0}}}
	require.InDelta(t, 10.0, NICBound(m, x), 1e-12)
	p, err = PlanExchange(m, x, OpenShop, Options{})
	require.NoError(t, err)
	require.InDelta(t, 20.0, p.Predicted, 1e-12)

	require.Zero(t, NICBound(m, &Exchange{Bytes: [][]int64{{5}}}))
}

func TestAutoPreferenceCoversEveryPlanner(t *testing.T) {
	for _, k := range []Kind{KindAlltoall, KindMulticast, KindRedistribute} {
		require.ElementsMatch(t, Algorithms(k), autoPreference[k], "kind %s", k)
	}
	// On a uniform network every total-exchange planner ties: Auto keeps
	// the open shop plan.
	m := NewUniformModel(4, 0, 1)
	x := &Exchange{Bytes: [][]int64{{0, 1, 1, 1}, {1, 0, 1, 1}, {1, 1, 0, 1}, {1, 1, 1, 0}}}
	p, err := PlanExchange(m, x, Auto, Options{})
	require.NoError(t, err)
	require.Equal(t, OpenShop, p.Algorithm)
}
