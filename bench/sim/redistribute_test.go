package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSimRedistributeQuick(t *testing.T) {
	e, ok := Lookup("redistribute")
	require.True(t, ok, "the experiment registers itself")
	var progress bytes.Buffer
	res, err := e.Run(SimConfig{Seed: 1, Quick: true, Progress: &progress})
	require.NoError(t, err)
	require.Len(t, res.Tables, 3)
	require.Len(t, res.Plots, 3)
	require.Contains(t, progress.String(), "redistribute fig7_small_weights")
	for _, tb := range res.Tables {
		require.Len(t, tb.Rows, 3, tb.Name)
		col := map[string]int{}
		for i, c := range tb.Columns {
			col[c] = i
		}
		for _, row := range tb.Rows {
			require.Equal(t, 40, row[col["instances"]])
			for _, c := range []string{"ggp_mean", "ggp_max", "oggp_mean", "oggp_max"} {
				v := float64(row[col[c]].(rdRatio))
				require.GreaterOrEqual(t, v, 1.0, "%s %s", tb.Name, c)
				require.LessOrEqual(t, v, 2.0, "%s %s: the planners are 2-approximations", tb.Name, c)
			}
			require.LessOrEqual(t, row[col["oggp_mean"]].(rdRatio), row[col["ggp_mean"]].(rdRatio)+1e-12)
			require.Positive(t, row[col["bruteforce_mean"]].(rdRatio))
		}
	}
	require.Contains(t, res.Summary, "never worse than GGP on average")
	require.Contains(t, res.Summary, "on graphs of at least 80 edges")

	// Same seed, same numbers, however the goroutines ran.
	again, err := e.Run(SimConfig{Seed: 1, Quick: true})
	require.NoError(t, err)
	require.Equal(t, res.Tables, again.Tables)

	dir := t.TempDir()
	require.NoError(t, res.Save(dir))
	for _, name := range []string{"fig7_small_weights.csv", "fig8_large_weights.json", "fig9_beta.png"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	var md strings.Builder
	require.NoError(t, res.Tables[0].WriteMarkdown(&md))
	require.Contains(t, md.String(), "| k | instances | ggp_mean |")
	require.Contains(t, md.String(), "\n| 1 | 40 | 1.00000 | 1.00000 |", "k is an integer, ratios have five decimals")
	var js strings.Builder
	require.NoError(t, res.Tables[1].WriteJSON(&js))
	require.Contains(t, js.String(), `"ggp_mean": 1`, "JSON keeps ratios as numbers")
}

func TestSimRedistributeCommand(t *testing.T) {
	stdout, _ := runSimCommand(t, "redistribute", 5, "fig7_small_weights.png")
	require.Contains(t, stdout, "## fig8_large_weights")
	require.Contains(t, stdout, "5 random graphs per point")
}
