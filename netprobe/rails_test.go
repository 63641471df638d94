package netprobe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

func TestRailCosts(t *testing.T) {
	m := collective.NewUniformModel(2, 1e-4, 1e8)
	m.Rails = []collective.Rail{
		{Name: "rail0", Latency: [][]float64{{0, 1e-4}, {2e-4, 0}}, Bandwidth: [][]float64{{0, 1e8}, {3e8, 0}}},
		{Name: "rail1", Latency: [][]float64{{0, 5e-4}, {6e-4, 0}}, Bandwidth: [][]float64{{0, 2e8}, {4e8, 0}}},
	}
	costs, measured := RailCosts(m, 1, 0, 2)
	require.True(t, measured)
	require.Equal(t, []transport.RailCost{{Latency: 2e-4, Bandwidth: 3e8}, {Latency: 6e-4, Bandwidth: 4e8}}, costs)

	costs, measured = RailCosts(m, 0, 1, 1)
	require.True(t, measured, "fewer rails than the model lists: the first ones")
	require.Equal(t, []transport.RailCost{{Latency: 1e-4, Bandwidth: 1e8}}, costs)

	for name, mm := range map[string]*collective.Model{"no model": nil, "too few rails": m} {
		costs, measured = RailCosts(mm, 0, 1, 3)
		require.False(t, measured, name)
		require.Len(t, costs, 3, name)
		for _, c := range costs {
			require.Equal(t, costs[0], c, "%s: guessed rails are all alike", name)
			require.Positive(t, c.Bandwidth, name)
		}
	}

	e := EffectiveRails(m, 0, 1, transport.RailAgg)
	require.Greater(t, e.Bandwidth, 2e8, "aggregated rails are faster than the better one")
}
