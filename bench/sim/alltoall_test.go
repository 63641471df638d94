package sim

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

func TestSimAlltoallQuick(t *testing.T) {
	e, ok := Lookup("alltoall")
	require.True(t, ok, "alltoall is registered")
	cfg := SimConfig{Seed: 3, Quick: true}
	res, err := e.Run(cfg)
	require.NoError(t, err)
	require.Len(t, res.Tables, 6)
	require.Len(t, res.Plots, 4)
	for _, fig := range []string{"fig9_small", "fig10_large", "fig11_mixed", "fig12_servers"} {
		require.Contains(t, res.Plots, fig+".png")
	}
	algos := collective.Algorithms(collective.KindAlltoall)
	for _, tab := range res.Tables[:4] {
		require.Len(t, tab.Rows, 3, tab.Name)       // quick: 5, 10 and 20 ranks
		require.Len(t, tab.Columns, 4+2*len(algos)) // + the barrier caterpillar, lb_mean_s
		for _, row := range tab.Rows {
			for k := 0; k <= len(algos); k++ {
				mean, worst := row[1+2*k].(float64), row[2+2*k].(float64)
				// An optimal plan's makespan (summed in schedule order)
				// can land an ulp below t_lb (summed in rank order).
				require.GreaterOrEqual(t, mean, 1-1e-12, "%s %v", tab.Name, row)
				require.GreaterOrEqual(t, worst, mean)
				if k < len(algos) && algos[k] == collective.OpenShop {
					require.LessOrEqual(t, worst, 2.0, "Theorem 3")
				}
			}
			// Barriers can only delay the caterpillar.
			cat := slices.Index(algos, collective.Caterpillar)
			require.GreaterOrEqual(t, row[1+2*len(algos)].(float64), row[1+2*cat].(float64), "%s %v", tab.Name, row)
		}
	}
	require.Len(t, res.Tables[4].Rows, 4*(len(algos)+1))
	require.Len(t, res.Tables[5].Rows, 4*(len(algos)+1))
	require.Contains(t, res.Summary, "caterpillar_barrier")
	require.Contains(t, res.Summary, "site pairs")
	require.Contains(t, res.Summary, "openshop")
	require.Contains(t, res.Summary, "20% servers")

	// Reproducible for a seed.
	again, err := e.Run(cfg)
	require.NoError(t, err)
	require.Equal(t, res.Tables, again.Tables)
	require.Equal(t, res.Summary, again.Summary)
}

// runSimCommand runs `hetbench sim -quick -trials TRIALS -out DIR EXP`,
// requires it to succeed and to have written every one of files (non-empty)
// under DIR/EXP, and returns what it printed.
func runSimCommand(t *testing.T, exp string, trials int, files ...string) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := SimCommand([]string{"-quick", "-trials", strconv.Itoa(trials), "-out", dir, exp}, &out, &errb)
	require.Equal(t, bench.ExitOK, code, errb.String())
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, exp, f))
		require.NoError(t, err)
		require.Positive(t, st.Size(), f)
	}
	return out.String(), errb.String()
}

func TestSimAlltoallCommand(t *testing.T) {
	stdout, stderr := runSimCommand(t, "alltoall", 2, "fig9_small.csv", "fig9_small.json", "fig9_small.png", "summary.csv")
	require.Contains(t, stdout, "## fig12_servers")
	require.Contains(t, stderr, "alltoall: ")
}

func TestAlltoallPatterns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{5, 10, 13, 50} {
		b := alltoallServers(rng, n)
		servers := max(1, (n+2)/5)
		// A server sends 1 MB to every client and nothing else large;
		// every other message is 1 kB.
		isServer := map[int]bool{}
		for i := range b {
			require.Zero(t, b[i][i])
			for j := range b[i] {
				if b[i][j] == alltoallMB {
					isServer[i] = true
				} else if i != j {
					require.Equal(t, int64(alltoallKB), b[i][j])
				}
			}
		}
		require.Len(t, isServer, servers)
		for i := range b {
			for j := range b[i] {
				if i != j {
					want := int64(alltoallKB)
					if isServer[i] && !isServer[j] {
						want = alltoallMB
					}
					require.Equal(t, want, b[i][j], "%d->%d (servers %v)", i, j, isServer)
				}
			}
		}

		for _, m := range []*collective.Model{alltoallGustoModel(rng, n), alltoallSitePairModel(rng, n)} {
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
	// Site-pair links are exactly the tables' pairs.
	m := alltoallSitePairModel(rng, 20)
	for i := 0; i < 20; i++ {
		for j := 0; j < 20; j++ {
			if i != j {
				require.Contains(t, gustoSitePairs[:], [2]float64{m.Latency[i][j] * 1000, m.Bandwidth[i][j] * 8 / 1000})
			}
		}
	}
}

func TestAlltoallCaterpillarBarrier(t *testing.T) {
	// Three ranks, cost = bytes (no latency, 1 byte/s). Step 1: 0->1 (5),
	// 1->2 (1), 2->0 (1); step 2: 0->2 (1), 1->0 (4), 2->1 (1).
	// With barriers: 5 + 4 = 9. Without (the caterpillar plan): 1->0 waits
	// only for 1->2 (ends 1) and 2->0 (ends 1), so it runs [1, 5]; 0->2
	// waits for 0->1 [0, 5]: [5, 6]; 2->1 waits for 0->1: [5, 6]. So 6.
	b := [][]int64{{0, 5, 1}, {4, 0, 1}, {1, 1, 0}}
	m := &collective.Model{Latency: collective.Matrix(3, 0), Bandwidth: collective.Matrix(3, 1)}
	require.Equal(t, 9.0, alltoallCaterpillarBarrier(m, b))
	p, err := collective.PlanExchange(m, &collective.Exchange{Bytes: b}, collective.Caterpillar, collective.Options{})
	require.NoError(t, err)
	require.Equal(t, 6.0, p.Predicted)
	require.Equal(t, 6.0, p.LowerBound) // rank 0 sends 5 + 1
	// A pair without bytes sends nothing and holds no step up.
	b[0][1] = 0
	require.Equal(t, 1.0+4.0, alltoallCaterpillarBarrier(m, b))
}
