package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/internal/roottest"
	"github.com/stretchr/testify/require"
)

// scaleReport is what testdata/scalecheck prints from rank 0.
type scaleReport struct {
	Ranks             int                `json:"ranks"`
	InProcess         bool               `json:"in_process"`
	StartS            float64            `json:"start_s"`
	OpS               map[string]float64 `json:"op_s"`
	MaxRSSMBPerRank   float64            `json:"max_rss_mb_per_rank"`
	GoroutinesPerRank float64            `json:"goroutines_per_rank"`
	FDsPerRank        float64            `json:"fds_per_rank"`
}

var (
	scaleOnce sync.Once
	scaleBin  string
	scaleErr  error
)

// scalecheck builds testdata/scalecheck (without the race detector, which
// would multiply a 256-rank world's memory several times).
func scalecheck(t *testing.T) string {
	t.Helper()
	dir := binaries(t)
	scaleOnce.Do(func() {
		scaleBin = filepath.Join(dir, "scalecheck")
		cmd := exec.Command("go", "build", "-o", scaleBin, "./internal/e2e/testdata/scalecheck")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			scaleErr = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, scaleErr)
	return scaleBin
}

func parseScale(t *testing.T, r result) scaleReport {
	t.Helper()
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	var rep scaleReport
	line := r.stdout[strings.LastIndex(strings.TrimSpace(r.stdout), "\n")+1:]
	line = strings.TrimPrefix(strings.TrimSpace(line), "[0] ")
	require.NoError(t, json.Unmarshal([]byte(line), &rep), "report: %q", line)
	for _, op := range []string{"alltoallv", "bcast", "allreduce"} {
		require.Contains(t, rep.OpS, op, "every operation ran and verified")
	}
	t.Logf("%d ranks (in process: %v): start %.2f s, ops %v, peak RSS %.1f MB, %.0f goroutines and %.1f descriptors per rank",
		rep.Ranks, rep.InProcess, rep.StartS, rep.OpS, rep.MaxRSSMBPerRank, rep.GoroutinesPerRank, rep.FDsPerRank)
	// The budget is 64 MB per rank; twice that fails, so that a
	// regression shows without a busy machine failing the test.
	require.Less(t, rep.MaxRSSMBPerRank, 128.0, "memory per rank")
	return rep
}

// TestScaleInProcess: a world of 256 ranks in one process (mem transport,
// an emulated fabric of mixed NICs) starts and runs Alltoallv, Bcast and
// Allreduce, verified (issue 15).
func TestScaleInProcess(t *testing.T) {
	roottest.Require(t, "runs 256 ranks in one process: a large run kept for .ci/run, not every go test")
	r := run(t, 5*time.Minute, cleanEnv(), scalecheck(t), "-inproc", "256")
	rep := parseScale(t, r)
	require.Equal(t, 256, rep.Ranks)
	require.True(t, rep.InProcess)
}

// TestScaleLaunched: a job of 64 processes on loopback, started by hetrun
// with the default probe, runs the same (issue 15). Descriptors and
// goroutines per rank grow with P, not P squared.
func TestScaleLaunched(t *testing.T) {
	roottest.Require(t, "runs 64 processes: a large run kept for .ci/run, not every go test")
	env := append(cleanEnv(), "HETCOMM_CACHE_DIR="+t.TempDir())
	r := run(t, 5*time.Minute, env, filepath.Join(binaries(t), "hetrun"), "-n", "64", scalecheck(t))
	rep := parseScale(t, r)
	require.Equal(t, 64, rep.Ranks)
	require.False(t, rep.InProcess)
	require.Less(t, rep.FDsPerRank, 4*64.0, "descriptors per rank")
	require.Less(t, rep.GoroutinesPerRank, 8*64.0, "goroutines per rank")
}
