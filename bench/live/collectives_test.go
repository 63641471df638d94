package live

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/internal/worldtest"
)

func TestLiveAlgorithmsBcastAllgatherAllreduce(t *testing.T) {
	for _, tc := range []struct {
		coll, algos string
		want        []collective.Algorithm
	}{
		{"bcast", "", []collective.Algorithm{collective.Auto, collective.BcastBinomial, collective.BcastPipeline}},
		{"bcast", "all", []collective.Algorithm{collective.Auto, collective.BcastBinomial, collective.BcastPipeline}},
		{"bcast", "pipeline, auto", []collective.Algorithm{collective.BcastPipeline, collective.Auto}},
		{"allgather", "", []collective.Algorithm{collective.Auto, collective.AllgatherRing, collective.AllgatherMesh}},
		{"allgather", "mesh", []collective.Algorithm{collective.AllgatherMesh}},
		{"allreduce", "", []collective.Algorithm{collective.Auto, collective.AllreduceTree, collective.AllreduceRSAG}},
		{"allreduce", "rsag", []collective.Algorithm{collective.AllreduceRSAG}},
	} {
		lf := liveFlags{collective: tc.coll, algos: tc.algos}
		got, err := lf.algorithms()
		require.NoError(t, err, "%s -algo %q", tc.coll, tc.algos)
		require.Equal(t, tc.want, got, "%s -algo %q", tc.coll, tc.algos)
	}
	for _, tc := range []struct{ coll, algos string }{
		{"bcast", "rsag"}, {"bcast", "default"}, {"bcast", "binomial,openshop"},
		{"allreduce", "pipeline"}, {"allreduce", "naive"},
		{"allgather", "default"}, {"allgather", "tree"},
		{"reduce", ""},
	} {
		lf := liveFlags{collective: tc.coll, algos: tc.algos}
		_, err := lf.algorithms()
		require.Error(t, err, "%s -algo %q", tc.coll, tc.algos)
	}
	// The defaults the flags say are the ones used.
	lf := liveFlags{collective: "bcast"}
	lf.defaults()
	require.Equal(t, "auto,binomial,pipeline", lf.algos)
	lf = liveFlags{collective: "allreduce"}
	lf.defaults()
	require.Equal(t, "auto,tree,rsag", lf.algos)
}

// The ranks get the launcher's flags back as they were.
func TestLiveFlagsArgsRoundTrip(t *testing.T) {
	for _, coll := range []string{"bcast", "allgather", "allreduce", "reducescatter"} {
		fs := flag.NewFlagSet("live", flag.ContinueOnError)
		var lf liveFlags
		lf.register(fs)
		require.NoError(t, fs.Parse([]string{"-collective", coll, "-bytes", "64KiB,1MiB", "-iters", "7", "-warmup", "2"}))
		fs2 := flag.NewFlagSet("live-rank", flag.ContinueOnError)
		var back liveFlags
		back.register(fs2)
		require.NoError(t, fs2.Parse(lf.args()))
		require.Equal(t, lf, back)
		sizes, err := back.sizes()
		require.NoError(t, err)
		require.Equal(t, []int64{64 << 10, 1 << 20}, sizes)
	}
}

func TestMPIPeerCollectives(t *testing.T) {
	for coll, op := range map[string]string{"bcast": "MPI_Bcast", "allgather": "MPI_Allgather", "allreduce": "MPI_Allreduce", "reducescatter": "MPI_Reduce_scatter_block"} {
		dir := t.TempDir()
		pat, name, err := mpiPattern(liveFlags{collective: coll}, 4, 1<<20, nil, dir)
		require.NoError(t, err)
		require.Equal(t, coll, pat, "the C peer's PATTERN is the collective's name")
		require.Equal(t, op, name)
		files, _ := os.ReadDir(dir)
		require.Empty(t, files, "no pattern file")
	}
	// -peer mpi runs every collective hetbench live has.
	for _, coll := range []string{"alltoallv", "multicast", "redistribute", "bcast", "allgather", "allreduce", "reducescatter"} {
		_, err := (&liveFlags{collective: coll}).algorithms()
		require.NoError(t, err)
		require.True(t, mpiPeerSupports(coll), coll)
	}
	require.False(t, mpiPeerSupports("reduce"))
}

// Bad flags are refused before any rank starts.
func TestLiveCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-collective", "allreduce", "-algo", "pipeline"},
		{"-collective", "bcast", "-algo", "tree"},
		{"-collective", "bcast", "-peer", "mpich"},
		{"-collective", "scan"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, bench.ExitUsage, LiveCommand(args, &out, &errb), "%v", args)
		require.NotEmpty(t, errb.String())
	}
}

func TestFillAndDiffBytes(t *testing.T) {
	a := fillBytes(make([]byte, 1000), 7)
	require.Equal(t, a, fillBytes(make([]byte, 1000), 7))
	require.NotEqual(t, a, fillBytes(make([]byte, 1000), 8))
	// Pieces of the message differ from each other: a piece delivered in
	// the wrong place shows.
	require.NotEqual(t, a[:100], a[100:200])
	require.Equal(t, a[:13], fillBytes(make([]byte, 13), 7), "a prefix of the same seed")
	require.Empty(t, diffBytes(a, bytes.Clone(a), "x"))
	b := bytes.Clone(a)
	b[517] ^= 1
	require.Contains(t, diffBytes(b, a, "the message"), "byte 517")
	require.Contains(t, diffBytes(a[:999], a, "the message"), "999 bytes, want 1000")
	require.Empty(t, diffBytes(nil, []byte{}, "empty"))
}

func TestAllreduceCheck(t *testing.T) {
	const n, elems = 5, 600
	sum := make([]float64, elems)
	for r := 0; r < n; r++ {
		for i := range sum {
			sum[i] += allreduceElem(r, i)
		}
	}
	require.Empty(t, diffSums(sum, n))
	sum[300]++
	require.Contains(t, diffSums(sum, n), "element 300")
	require.NotEmpty(t, diffSums(sum[:10], n+1), "a different rank count")
}

func TestAllreducePrediction(t *testing.T) {
	p := collective.AllreducePlan{Algorithm: collective.AllreduceTree, Tree: 2, RSAG: 1.5}
	require.Equal(t, 2.0, allreducePrediction(p, collective.AllreduceTree))
	require.Equal(t, 1.5, allreducePrediction(p, collective.AllreduceRSAG))
	require.Equal(t, 2.0, allreducePrediction(p, collective.Auto), "auto: what it chose")
	p.Algorithm = collective.AllreduceRSAG
	require.Equal(t, 1.5, allreducePrediction(p, collective.Auto))
	// The planner's own choice is what the prediction follows.
	m := collective.NewUniformModel(8, 50e-6, 1e9)
	for _, elems := range []int{1, 1 << 10, 1 << 20} {
		ap := collective.PlanAllreduce(m, elems, 8, collective.Auto)
		want := ap.Tree
		if ap.Algorithm == collective.AllreduceRSAG {
			want = ap.RSAG
		}
		require.Equal(t, want, allreducePrediction(ap, collective.Auto))
	}
}

func TestTableCells(t *testing.T) {
	require.Equal(t, "-", micros(0))
	require.Equal(t, "1.5", micros(1.5e-6))
	require.Equal(t, "whole", pieces(1, 1<<20))
	require.Equal(t, "16 pieces of 64 KiB", pieces(16, 64<<10))
	require.Equal(t, "4 pieces of 1 MiB", pieces(4, 1<<20))
	require.Equal(t, "3 pieces of 1000 B", pieces(3, 1000))
	require.Equal(t, "bound: rank 0 egress", joinNote("", "rank 0 egress"))
	require.Equal(t, "pipeline tree, whole; bound: rank 0 egress", joinNote("pipeline tree, whole", "rank 0 egress"))
	require.Equal(t, "x", joinNote("x", ""))
}

// The MPI peer's rows carry hetcomm's fabric bound of the same size.
func TestPrintMPIRecords(t *testing.T) {
	own := []LiveRecord{
		{System: "hetcomm", Algorithm: "auto", Bytes: 1024, FabricBound: 2e-6, BoundBy: "rank 1 ingress"},
		{System: "hetcomm", Algorithm: "auto", Bytes: 2048, FabricBound: 4e-6, BoundBy: "rank 1 ingress"},
	}
	mpi := []LiveRecord{{System: "openmpi", Algorithm: "MPI_Bcast", Bytes: 2048, MedianS: 8e-6}}
	var out bytes.Buffer
	printMPIRecords(&out, liveFlags{collective: "bcast"}, 4, "lo", mpi, own)
	require.Equal(t, 4e-6, mpi[0].FabricBound)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[2], "MPI_Bcast")
	require.Contains(t, lines[2], " 2.000 ")
	require.Contains(t, lines[2], "bound: rank 1 ingress")
}

// The C peer builds (when mpicc is installed).
func TestMPIPeerBuilds(t *testing.T) {
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Skip("no mpicc")
	}
	if testing.Short() {
		t.Skip("short")
	}
	exe := filepath.Join(t.TempDir(), "alltoallv")
	cmd := exec.Command("mpicc", "-O2", "-Wall", "-o", exe, filepath.Join(benchDir(), "peer", "alltoallv.c"))
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	require.NoError(t, cmd.Run(), errb.String())
	require.Empty(t, errb.String(), "warnings")
}

// Every case checks its own result as right on in-process ranks, and
// has the bound and prediction of the model.
func TestLiveCasesCheck(t *testing.T) {
	const n = 4
	m := collective.NewUniformModel(n, 50e-6, 1e9)
	comms := worldtest.Start(t, n, nil, func(_ int, c *comm.Config) { c.Model = m })
	ctx := context.Background()
	for _, coll := range []string{"bcast", "allgather", "allreduce", "reducescatter"} {
		lf := liveFlags{collective: coll, seed: 3, iters: 2, warmup: 1}
		algos, err := lf.algorithms()
		require.NoError(t, err)
		for _, size := range []int64{0, 1000, 300 << 10} {
			for _, algo := range algos {
				cases := make([]liveCase, n)
				errs := commtest.Errors(comms, func(_ int, c *comm.Comm) error {
					lc, err := liveOp(ctx, c, lf, nil, size, algo)
					if err != nil {
						return err
					}
					cases[c.Rank()] = lc
					if err := checkLiveOp(ctx, c, lf, lc, size, algo); err != nil {
						return err
					}
					_, err = timeLiveOp(ctx, c, lf, lc.run, size, algo)
					return err
				})
				for r, err := range errs {
					require.NoError(t, err, "%s %s %d rank %d", coll, algo, size, r)
				}
				lc := cases[0]
				require.NotNil(t, lc.check)
				if size > 0 {
					require.Positive(t, lc.fabric, "%s %d: bound", coll, size)
					require.NotEmpty(t, lc.boundBy)
				}
				if size >= 8 {
					require.Positive(t, lc.pred, "%s %s %d: prediction", coll, algo, size)
				}
				if coll == "bcast" {
					p, err := collective.PlanBcast(m, bcastRoot, size, algo)
					require.NoError(t, err)
					require.Equal(t, p.Predicted, lc.pred)
					require.Equal(t, p.Chunks, lc.chunks)
				}
				if algo == collective.Auto {
					require.NotEmpty(t, lc.chosen, "%s %d: what auto chose", coll, size)
				}
			}
		}
	}
}

// A wrong result on one rank fails every rank, before anything is timed.
func TestCheckLiveOpFailsEveryRank(t *testing.T) {
	const n = 4
	comms := worldtest.Start(t, n, nil, nil)
	ctx := context.Background()
	lf := liveFlags{collective: "bcast"}
	errs := commtest.Errors(comms, func(_ int, c *comm.Comm) error {
		lc := liveCase{check: func(context.Context) (string, error) {
			if c.Rank() == 2 {
				return "byte 5 differs", nil
			}
			return "", nil
		}}
		return checkLiveOp(ctx, c, lf, lc, 100, collective.Auto)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if r == 2 {
			require.Contains(t, err.Error(), "wrong result: byte 5 differs")
		} else {
			require.Contains(t, err.Error(), "rank 2 got a wrong result")
		}
	}
}
