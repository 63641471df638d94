package bench

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

func TestSimAlltoallQuick(t *testing.T) {
	e, ok := Lookup("alltoall")
	require.True(t, ok, "alltoall is registered")
	cfg := SimConfig{Seed: 3, Quick: true}
	res, err := e.Run(cfg)
	require.NoError(t, err)
	require.Len(t, res.Tables, 5)
	require.Len(t, res.Plots, 4)
	for _, fig := range []string{"fig9_small", "fig10_large", "fig11_mixed", "fig12_servers"} {
		require.Contains(t, res.Plots, fig+".png")
	}
	algos := collective.Algorithms(collective.KindAlltoall)
	for _, tab := range res.Tables[:4] {
		require.Len(t, tab.Rows, 3, tab.Name) // quick: 5, 10 and 20 ranks
		require.Len(t, tab.Columns, 2+2*len(algos))
		for _, row := range tab.Rows {
			for k := range algos {
				mean, worst := row[1+2*k].(float64), row[2+2*k].(float64)
				require.GreaterOrEqual(t, mean, 1.0, "%s %v", tab.Name, row)
				require.GreaterOrEqual(t, worst, mean)
				if algos[k] == collective.OpenShop {
					require.LessOrEqual(t, worst, 2.0, "Theorem 3")
				}
			}
		}
	}
	require.Len(t, res.Tables[4].Rows, 4*len(algos))
	require.Contains(t, res.Summary, "openshop")
	require.Contains(t, res.Summary, "20% servers")

	// Reproducible for a seed.
	again, err := e.Run(cfg)
	require.NoError(t, err)
	require.Equal(t, res.Tables, again.Tables)
	require.Equal(t, res.Summary, again.Summary)
}

func TestSimAlltoallCommand(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := SimCommand([]string{"-quick", "-trials", "2", "-out", dir, "alltoall"}, &stdout, &stderr)
	require.Equal(t, ExitOK, code, stderr.String())
	require.Contains(t, stdout.String(), "## fig12_servers")
	require.Contains(t, stderr.String(), "alltoall: ")
	for _, f := range []string{"fig9_small.csv", "fig9_small.json", "fig9_small.png", "summary.csv"} {
		st, err := os.Stat(filepath.Join(dir, "alltoall", f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}

func TestAlltoallPatterns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{5, 10, 13, 50} {
		b := alltoallServers(rng, n)
		servers := (n + 2) / 5
		large := map[int]int{} // per sender
		clients := 0
		for i := range b {
			require.Zero(t, b[i][i])
			for j := range b[i] {
				if b[i][j] == alltoallMB {
					large[i]++
					clients++
				} else if i != j {
					require.Equal(t, int64(alltoallKB), b[i][j])
				}
			}
		}
		// Every client gets exactly one large message, from one of the
		// servers, and the servers' shares differ by at most one.
		require.Equal(t, n-servers, clients)
		require.Len(t, large, servers)
		lo, hi := n, 0
		for _, c := range large {
			lo, hi = min(lo, c), max(hi, c)
		}
		require.LessOrEqual(t, hi-lo, 1)

		m := alltoallGustoModel(rng, n)
		require.NoError(t, m.Validate())
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					require.Equal(t, m.Latency[i][j], m.Latency[j][i])
					require.Equal(t, m.Bandwidth[i][j], m.Bandwidth[j][i])
					require.True(t, m.Latency[i][j] >= 0.0045 && m.Latency[i][j] <= 0.0895)
					require.True(t, m.Bandwidth[i][j] >= 246*125 && m.Bandwidth[i][j] <= 4976*125)
				}
			}
		}
	}
}
