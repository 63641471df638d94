package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

func TestSimScaleQuick(t *testing.T) {
	e, ok := Lookup("scale")
	require.True(t, ok, "the experiment registers itself")
	estimated := 0
	ProbeEstimator = func(m *collective.Model, cuts [][]int) (float64, int, error) {
		estimated++
		require.Len(t, cuts, m.Size()/8, "the racks")
		return float64(m.Size()), 3, nil
	}
	defer func() { ProbeEstimator = nil }()
	res, err := e.Run(SimConfig{Seed: 2, Quick: true})
	require.NoError(t, err)
	require.Len(t, res.Tables, 1)
	tb := res.Tables[0]
	require.Len(t, tb.Rows, 2) // quick: 16 and 32 ranks
	col := map[string]int{}
	for i, c := range tb.Columns {
		col[c] = i
	}
	for _, row := range tb.Rows {
		n := row[col["ranks"]].(int)
		ratio := func(a string) float64 { return row[col[a+"_ratio"]].(float64) }
		for _, a := range scalePlanners {
			// No plan is predicted to beat the fabric's lower bound.
			require.GreaterOrEqual(t, ratio(string(a)), 1-1e-9, "%d ranks, %s", n, a)
			require.Positive(t, row[col[string(a)+"_ms"]].(float64), "%d ranks, %s: timed", n, a)
		}
		// Auto keeps the best of what it considers (naive only when it
		// wins by its margin).
		for _, a := range []string{"openshop", "greedy", "caterpillar", "paced"} {
			require.LessOrEqual(t, ratio("auto"), ratio(a)+1e-9, "%d ranks: auto against %s", n, a)
		}
		require.Positive(t, row[col["bound_s"]].(float64))
		require.Equal(t, probeSeconds(n), row[col["probe_pairwise_s"]])
		require.Equal(t, float64(n), row[col["probe_fabric_s"]])
		require.Equal(t, 3.0, row[col["probe_fabric_steps"]])
	}
	require.Equal(t, 2, estimated, "one probe estimate per instance")
	dir := t.TempDir()
	require.NoError(t, res.Save(dir))
	for _, name := range []string{"scale.csv", "scale.json", "scale_planning_time.png", "scale_ratio.png"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}
