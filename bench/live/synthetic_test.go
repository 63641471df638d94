package live

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/internal/roottest"
)

func TestPoisson(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 1))
	for _, lambda := range []float64{0.5, 8, 9.9, 10, 100, 2048, 20480} {
		const n = 40000
		var sum, sq float64
		for range n {
			k := float64(poisson(rng, lambda))
			require.GreaterOrEqual(t, k, 0.0)
			sum += k
			sq += k * k
		}
		mean := sum / n
		variance := sq/n - mean*mean
		// mean and variance of a Poisson law are both lambda
		require.InDelta(t, lambda, mean, 4*math.Sqrt(lambda/n)+1e-9, "mean for %v", lambda)
		require.InDelta(t, lambda, variance, 0.05*lambda+0.05, "variance for %v", lambda)
	}
}

func TestSynthWorkload(t *testing.T) {
	a := synthWorkload(SyntheticTypes[3], 1000, 3, 7)
	require.Equal(t, a, synthWorkload(SyntheticTypes[3], 1000, 3, 7), "reproducible for a seed")
	require.NotEqual(t, a, synthWorkload(SyntheticTypes[3], 1000, 3, 8))
	small, dests := 0, map[int]int{}
	for _, m := range a {
		if m.Size < 1000 {
			small++
		}
		dests[m.Dest]++
	}
	require.InDelta(t, 500, small, 60, "type D: half the messages have mean 8 B")
	require.Len(t, dests, 3)
}

func TestSyntheticFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, bench.ExitUsage, SyntheticCommand([]string{"-types", "AZ"}, &out, &errb))
	require.Contains(t, errb.String(), "unknown type")
	require.Equal(t, bench.ExitUsage, SyntheticCommand([]string{"-configs", "slow,warp"}, &out, &errb))
	require.Equal(t, bench.ExitUsage, SyntheticCommand([]string{"-rsh", "x"}, &out, &errb))
	require.Equal(t, bench.ExitOK, SyntheticCommand([]string{"-h"}, &out, &errb))
	require.Contains(t, errb.String(), "Figure 12")
}

// TestSyntheticLoopback runs a small benchmark in loopback mode, with the
// emulated rails, and checks the report and the files.
func TestSyntheticLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of emulated traffic")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := SyntheticCommand([]string{"-n", "40", "-runs", "1", "-types", "AF", "-slaves", "2",
		"-fast-delay", "1ms", "-out", dir}, &out, &errb)
	require.Equal(t, bench.ExitOK, code, "stderr: %s", errb.String())
	t.Log(out.String())
	require.Contains(t, out.String(), "| A |")
	require.Contains(t, out.String(), "| F |")
	for _, f := range []string{"figure12.csv", "figure12.json", "synthetic.csv", "synthetic.json", "synthetic-raw.json", "figure12.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	var rows []map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "figure12.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rows))
	require.Len(t, rows, 2)
	require.InDelta(t, 1.0, rows[0]["slow"], 1e-9, "normalised to the slow rail")
}

// TestSyntheticRankHelper is a rank of TestSyntheticRootDualNIC4, started
// inside a netlab host through the agent.
func TestSyntheticRankHelper(t *testing.T) {
	args := flag.Args()
	if len(args) == 0 || args[0] != "synthetic-rank" {
		t.Skip("helper process of TestSyntheticRootDualNIC4")
	}
	os.Exit(SyntheticRankCommand(args[1:], os.Stdout, os.Stderr))
}

// TestSyntheticRootDualNIC4 runs a short synthetic benchmark on two hosts
// of the dualnic4 netlab topology (only with HETCOMM_ROOT_TESTS=1, as
// root; skipped with -short).
func TestSyntheticRootDualNIC4(t *testing.T) {
	if testing.Short() {
		t.Skip("root netlab test: skipped with -short")
	}
	// netlab's tools (ip, tc, nft, unshare), and go to build the netlab
	// command.
	roottest.Require(t, "netlab: builds the dualnic4 lab", append(slices.Clone(netlab.Tools), "go")...)
	dir := t.TempDir()
	netlabCmd := filepath.Join(dir, "netlab")
	out, err := exec.Command("go", "build", "-o", netlabCmd, "../../internal/netlab/cmd/netlab").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lab := fmt.Sprintf("sy%d", os.Getpid()%100000)
	out, err = exec.Command(netlabCmd, "up", "--name", lab, "../topologies/dualnic4.json").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		if out, err := exec.Command(netlabCmd, "down", lab).CombinedOutput(); err != nil {
			t.Errorf("netlab down: %v: %s", err, out)
		}
	})
	self, err := os.Executable()
	require.NoError(t, err)
	o := synthOptions{N: 300, Runs: 1, Rsh: "/run/netlab/nl-" + lab + "/agent", Hosts: []string{"n1", "n2", "n3"},
		Port: 47600, MinChunk: 1024, SlowRate: 1, FastRate: 1, FastDelay: -1, Out: filepath.Join(dir, "out"),
		rankPrefix: []string{self, "-test.run=^TestSyntheticRankHelper$", "-test.count=1", "--", "synthetic-rank"}}
	require.NoError(t, o.finish("ADF", strings.Join(syntheticConfigs, ",")))
	var log bytes.Buffer
	res, err := runSynthetic(t.Context(), &o, &log)
	require.NoError(t, err, "log: %s", log.String())
	var rep bytes.Buffer
	require.NoError(t, res.report(&o, &rep))
	t.Log(rep.String())
	require.Equal(t, 2, res.Slaves)
	require.Len(t, res.Costs, 2)
	require.Greater(t, res.Costs[1].Bandwidth, 2*res.Costs[0].Bandwidth, "the fast NIC is faster")
	for _, typ := range []string{"A", "D", "F"} {
		for _, c := range syntheticConfigs {
			require.Len(t, res.Seconds[typ][c], 1)
		}
	}
}
