package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/freeport"
	"github.com/hetcomm/hetcomm/internal/roottest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// repoRoot is the module root (two levels above this file).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// binaries builds hetrun and the examples once per test binary.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "hetcomm-e2e-")
		if buildErr != nil {
			return
		}
		os.Chmod(binDir, 0o755)
		for _, pkg := range []string{"cmd/hetrun", "examples/alltoallv", "examples/pingpong", "bench/cmd/hetbench", "internal/e2e/testdata/refreshwatch", "internal/e2e/testdata/bigsend"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, filepath.Base(pkg)), "./"+pkg)
			cmd.Dir = repoRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = repoRoot()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	require.NoError(t, ctx.Err(), "%s %v timed out\nstdout:\n%s\nstderr:\n%s", name, args, r.stdout, r.stderr)
	return r
}

// leftovers lists processes still running a binary from dir.
func leftovers(dir string) []string {
	out, _ := exec.Command("pgrep", "-af", dir).Output()
	var procs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			procs = append(procs, l)
		}
	}
	return procs
}

func TestHetrunAlltoallv(t *testing.T) {
	bin := binaries(t)
	type tc struct{ transport, algo string }
	var cases []tc
	for _, a := range append(collective.Algorithms(collective.KindAlltoall), "auto", "naive") {
		cases = append(cases, tc{"tcp", string(a)})
	}
	for _, tr := range []string{"quic", "udp", "tls"} {
		cases = append(cases, tc{tr, "auto"}, tc{tr, "openshop"})
	}
	if testing.Short() {
		cases = []tc{{"tcp", "openshop"}, {"quic", "auto"}}
	}
	for _, c := range cases {
		t.Run(c.transport+"/"+c.algo, func(t *testing.T) {
			r := run(t, 2*time.Minute, nil, filepath.Join(bin, "hetrun"), "-n", "4", "--transport", c.transport,
				filepath.Join(bin, "alltoallv"), "-seed", "1", "-max", "1048576", "-iters", "3", "-algo", c.algo)
			require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, "[0] alltoallv: OK: 4 ranks, 3 iterations, algo "+c.algo)
		})
	}
}

func TestHetrunFailRank(t *testing.T) {
	bin := binaries(t)
	r := run(t, time.Minute, nil, filepath.Join(bin, "hetrun"), "-n", "4",
		filepath.Join(bin, "alltoallv"), "-seed", "1", "-max", "1048576", "-fail-rank", "2")
	require.NotEqual(t, 0, r.code)
	require.Less(t, r.elapsed, 15*time.Second)
	require.Contains(t, r.stderr, "rank 2 exited with status 3")
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, leftovers(bin), "processes left behind")
}

func TestHetrunGoPackage(t *testing.T) {
	bin := binaries(t)
	r := run(t, 2*time.Minute, nil, filepath.Join(bin, "hetrun"), "-n", "2", "./examples/pingpong", "-max", "1024", "-iters", "20", "-warmup", "2")
	require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
	require.Contains(t, r.stdout, "[0] # Size")
	require.Contains(t, r.stdout, "Avg Latency(us)")
}

func freeAddr(t *testing.T) string {
	addr, err := freeport.Loopback()
	require.NoError(t, err)
	return addr
}

// startRanks starts one process per environment and waits for them.
func startRanks(t *testing.T, timeout time.Duration, envs [][]string, prog string, args ...string) []result {
	t.Helper()
	res := make([]result, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Add(1)
		go func(i int, env []string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog, args...)
			cmd.Env = append(cleanEnv(), env...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			err := cmd.Run()
			res[i] = result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
			if ee, ok := err.(*exec.ExitError); ok {
				res[i].code = ee.ExitCode()
			} else if err != nil {
				res[i].code = -1
				res[i].stderr += err.Error()
			}
		}(i, env)
	}
	wg.Wait()
	return res
}

// cleanEnv is the test's environment without any launcher variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HETCOMM_") || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMI_") ||
			k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" || k == "JOB_COMPLETION_INDEX" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func TestWrongSecretByHand(t *testing.T) {
	bin := binaries(t)
	coord := freeAddr(t)
	envs := [][]string{
		{"HETCOMM_RANK=0", "HETCOMM_SIZE=2", "HETCOMM_COORD=" + coord, "HETCOMM_SECRET=the-right-secret-0123456789", "HETCOMM_TIMEOUT=4s"},
		{"HETCOMM_RANK=1", "HETCOMM_SIZE=2", "HETCOMM_COORD=" + coord, "HETCOMM_SECRET=a-wrong-secret-9876543210", "HETCOMM_TIMEOUT=4s"},
	}
	res := startRanks(t, time.Minute, envs, filepath.Join(bin, "alltoallv"), "-max", "1000")
	require.NotEqual(t, 0, res[1].code)
	require.Contains(t, res[1].stderr, "authentication")
	require.NotEqual(t, 0, res[0].code)
	require.Contains(t, res[0].stderr, "rank 1")
	require.Contains(t, res[0].stderr, "missing ranks [1]")
	require.Less(t, res[0].elapsed, 10*time.Second, "rank 0 must give up within its HETCOMM_TIMEOUT")
	require.NotContains(t, res[0].stdout, "OK", "nothing may be exchanged")
}

func TestLauncherEnvironments(t *testing.T) {
	bin := binaries(t)
	const n = 4
	secret := "HETCOMM_SECRET=launcher-test-secret-abcdef"
	cases := map[string]func(i int, coord string) []string{
		"kubernetes": func(i int, coord string) []string {
			return []string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), fmt.Sprintf("HETCOMM_SIZE=%d", n), "HETCOMM_COORD=" + coord, secret}
		},
		"torchrun": func(i int, coord string) []string {
			host, port, _ := net.SplitHostPort(coord)
			var p int
			fmt.Sscan(port, &p)
			return []string{fmt.Sprintf("RANK=%d", i), fmt.Sprintf("WORLD_SIZE=%d", n), fmt.Sprintf("LOCAL_RANK=%d", i),
				"MASTER_ADDR=" + host, fmt.Sprintf("MASTER_PORT=%d", p-1), secret}
		},
		"openmpi": func(i int, coord string) []string {
			return []string{fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", i), fmt.Sprintf("OMPI_COMM_WORLD_SIZE=%d", n), "HETCOMM_COORD=" + coord, secret}
		},
		"mpich": func(i int, coord string) []string {
			return []string{fmt.Sprintf("PMI_RANK=%d", i), fmt.Sprintf("PMI_SIZE=%d", n), "HETCOMM_COORD=" + coord, secret}
		},
	}
	for name, envOf := range cases {
		t.Run(name, func(t *testing.T) {
			coord := freeAddr(t)
			envs := make([][]string, n)
			for i := range envs {
				envs[i] = envOf(i, coord)
			}
			res := startRanks(t, time.Minute, envs, filepath.Join(bin, "alltoallv"), "-max", "65536")
			for i, r := range res {
				require.Equal(t, 0, r.code, "rank %d stderr:\n%s", i, r.stderr)
			}
			require.Contains(t, res[0].stdout, "alltoallv: OK: 4 ranks")
		})
	}
}

// TestSlurm runs the example under a real one-node Slurm, setting nothing
// but what docs/launchers.md tells a Slurm user to set (HETCOMM_SECRET).
func TestSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the Slurm test starts a cluster")
	}
	roottest.Require(t, "starts a local Slurm cluster: munged, slurmctld and slurmd", "slurmctld", "slurmd", "srun", "sbatch", "munged")
	bin := binaries(t)
	r := run(t, 3*time.Minute, []string{"HETCOMM_SECRET=slurm-test-secret-0123456789", "SLURM_LOCAL_TASKS=4"},
		filepath.Join(repoRoot(), ".ci", "slurm-local"), filepath.Join(bin, "alltoallv"), "-seed", "1", "-max", "1048576")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "alltoallv: OK: 4 ranks, 3 iterations")

	// The batch script of docs/launchers.md, as a user would submit it.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	script, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "examples", "slurm.sbatch"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.sbatch"), script, 0o755))
	exe, err := os.ReadFile(filepath.Join(bin, "alltoallv"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alltoallv"), exe, 0o755))
	r = run(t, 3*time.Minute, nil, filepath.Join(repoRoot(), ".ci", "slurm-local"), "--sbatch", filepath.Join(dir, "job.sbatch"))
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "alltoallv: OK: 8 ranks, 3 iterations")
}
