package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
)

func TestSimMulticastQuick(t *testing.T) {
	e, ok := Lookup("multicast")
	require.True(t, ok, "the experiment registers itself")
	var progress bytes.Buffer
	dir := t.TempDir()
	res, err := e.Run(SimConfig{Seed: 3, Quick: true, OutDir: dir, Progress: &progress})
	require.NoError(t, err)
	require.Contains(t, progress.String(), "multicast: ")

	names := map[string]*bench.Table{}
	for _, tb := range res.Tables {
		names[tb.Name] = tb
	}
	for _, n := range []string{"alltoall_completion", "alltoall_ratio", "alltoall_plan_time", "multicast_completion", "multicast_ratio", "multicast_plan_time"} {
		require.Contains(t, names, n)
		require.NotEmpty(t, names[n].Rows, n)
	}
	// 3 networks x 2 sizes x 2 node counts; 3 networks x 3 sizes x 2 source counts.
	require.Len(t, names["alltoall_completion"].Rows, 12)
	require.Len(t, names["multicast_ratio"].Rows, 18)
	for _, pat := range []string{"alltoall", "multicast"} {
		for _, row := range names[pat+"_completion"].Rows {
			lb := row[3].(float64)
			require.Greater(t, lb, 0.0)
			for _, v := range row[4:] {
				require.GreaterOrEqual(t, v.(float64), lb, "a mean completion below the mean lower bound")
			}
		}
		for _, row := range names[pat+"_ratio"].Rows {
			for _, v := range row[3:] {
				require.GreaterOrEqual(t, v.(float64), 1.0, "competitive ratios are at least 1")
			}
		}
		for _, row := range names[pat+"_plan_time"].Rows {
			for _, v := range row[2:] {
				require.Greater(t, v.(float64), 0.0)
			}
		}
	}
	// A quick run stops before 64 nodes: the summary reports its largest
	// size, says so, and never a worst ratio of 0 (there was none at 64).
	require.Contains(t, res.Summary, "WRP's mean competitive ratio at 8 nodes (all-to-all)")
	require.Contains(t, res.Summary, "run without -quick")
	require.NotContains(t, res.Summary, "worst 0.000")

	// Results are reproducible for a seed (planning times aside).
	again, err := e.Run(SimConfig{Seed: 3, Quick: true})
	require.NoError(t, err)
	require.Equal(t, names["multicast_completion"].Rows, again.Tables[3].Rows)
	require.Equal(t, names["alltoall_ratio"].Rows, again.Tables[1].Rows)

	// Every setting has its plots (completion for both patterns, in two
	// families; competitive ratio for multicast); render only a few, which
	// is slow under the race detector.
	require.Len(t, res.Plots, 3*2*2+3*3*2*2)
	keep := []string{"multicast_completion_mixed_hybrid_preemptive.png", "alltoall_completion_slow_large_nonpreemptive.png", "multicast_ratio_fast_small_nonpreemptive.png"}
	plots := res.Plots
	res.Plots = map[string]*bench.LinePlot{}
	for _, f := range keep {
		require.Contains(t, plots, f)
		res.Plots[f] = plots[f]
	}
	require.NoError(t, res.Save(dir))
	for _, f := range append([]string{"alltoall_completion.csv", "multicast_ratio.json"}, keep...) {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		require.Greater(t, st.Size(), int64(0), f)
	}
	var md strings.Builder
	require.NoError(t, names["alltoall_ratio"].WriteMarkdown(&md))
	require.Contains(t, md.String(), "| network | size | nodes | fef |")
}
