package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/internal/roottest"
	"github.com/stretchr/testify/require"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpAndUsage(t *testing.T) {
	for _, sub := range []string{"up", "down", "status", "exec", "agent"} {
		code, _, stderr := runCLI(sub, "--help")
		require.Equal(t, 0, code, sub)
		require.Contains(t, stderr, "usage: netlab "+sub, sub)
	}
	code, stdout, _ := runCLI("--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "up TOPOLOGY.json")
	code, _, stderr := runCLI("frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "frobnicate"`)
	code, _, _ = runCLI()
	require.Equal(t, 2, code)
	code, _, _ = runCLI("up")
	require.Equal(t, 2, code)
	code, _, _ = runCLI("exec", "h1")
	require.Equal(t, 2, code)
	code, _, _ = runCLI("down", "--all", "extra")
	require.Equal(t, 2, code)
}

func topo(name string) string {
	return filepath.Join("..", "..", "..", "..", "bench", "topologies", name)
}

func TestDryRunAndBadTopology(t *testing.T) {
	code, stdout, _ := runCLI("up", "--dry-run", "--name", "other", topo("twoclusters.json"))
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "ip netns add nl-other_sw\n")
	// The backbone is shaped to its 200 Mbit/s with htb (pure ACKs first).
	require.Contains(t, stdout, "tc -n nl-other_sw qdisc add dev bb0a root handle 1: htb default 20\n")
	require.Contains(t, stdout, "tc -n nl-other_sw class add dev bb0a parent 1: classid 1:1 htb rate 200000000bit ceil 200000000bit")

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name": "x", "bridges": []}`), 0o644))
	code, _, stderr := runCLI("up", "--dry-run", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "netlab: topology: no bridges (in "+bad+")")
}

func TestRootCLI(t *testing.T) {
	roottest.Require(t, "netlab up/down: builds network namespaces", netlab.Tools...)
	name := fmt.Sprintf("cli%d", os.Getpid())
	t.Cleanup(func() { netlab.Down(context.Background(), name, netlab.Config{}) })
	file := topo("dualnic4.json")

	code, stdout, stderr := runCLI("up", "--name", name, file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "lab "+name+" is up")
	require.Contains(t, stdout, "--hosts 10.77.1.1,10.77.1.2,10.77.1.3,10.77.1.4 --rsh /run/netlab/nl-"+name+"/agent")

	code, stdout, _ = runCLI("up", "--name", name, file)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "lab "+name+" is already up")

	// Another topology under the same name: refused without --recreate.
	code, _, stderr = runCLI("up", "--name", name, topo("switch8.json"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "lab already exists")
	require.Contains(t, stderr, "--recreate")

	code, stdout, _ = runCLI("status", name)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "lab "+name+": 5 namespaces")
	require.Contains(t, stdout, "eth1 10.77.2.3 (fast, out 200 in 200 Mbit/s)")

	code, stdout, _ = runCLI("up", "--recreate", "--name", name, topo("switch8.json"))
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "h8")

	code, stdout, _ = runCLI("down", name)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "lab "+name+" is down")
	code, _, _ = runCLI("down", name)
	require.Equal(t, 0, code, "down twice")
	code, stdout, _ = runCLI("status", name)
	require.Equal(t, 1, code)
	require.True(t, strings.HasPrefix(stdout, "no lab "+name))
}
