package live

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/hetcomm/hetcomm/internal/launch"
)

// mpiPeerCollectives are the collectives -peer mpi runs, and mpiOps the
// MPI operation that runs each of the ones whose PATTERN is their name.
var (
	mpiPeerCollectives = []string{"alltoallv", "multicast", "redistribute", "bcast", "allgather", "allreduce", "reducescatter"}
	mpiOps             = map[string]string{"bcast": "MPI_Bcast", "allgather": "MPI_Allgather", "allreduce": "MPI_Allreduce", "reducescatter": "MPI_Reduce_scatter_block"}
)

// mpiPeerSupports says whether -peer mpi runs a collective.
func mpiPeerSupports(collective string) bool {
	return slices.Contains(mpiPeerCollectives, collective)
}

// runMPIPeer builds bench/peer/alltoallv.c with mpicc and runs it with
// Open MPI's TCP transport on the same ranks and pattern: MPI_Alltoallv for
// an Alltoallv and for a redistribution (the groups hetcomm used, from its
// records), one MPI_Ibcast per message on its own sub-communicator for a
// multiple multicast, MPI_Bcast from rank 0, MPI_Allgather and
// MPI_Allreduce (MPI_SUM of size/8 doubles) for those.
func runMPIPeer(ctx context.Context, lf liveFlags, n int, hosts, rsh, ifInclude string, own []LiveRecord, stderr io.Writer) ([]LiveRecord, error) {
	src := filepath.Join(benchDir(), "peer", "alltoallv.c")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("cannot find %s (run hetbench from the source tree)", src)
	}
	dir, err := os.MkdirTemp("", "hetbench-mpi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	exe := filepath.Join(dir, "alltoallv")
	if out, err := exec.CommandContext(ctx, "mpicc", "-O2", "-o", exe, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mpicc (install openmpi-bin and libopenmpi-dev): %v\n%s", err, out)
	}
	sizes, _ := lf.sizes()
	var recs []LiveRecord
	for _, size := range sizes {
		pattern, algoName, err := mpiPattern(lf, n, size, own, dir)
		if err != nil {
			return nil, err
		}
		args := []string{"--allow-run-as-root", "--oversubscribe", "-n", strconv.Itoa(n), "--bind-to", "none",
			"--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", ifInclude, "--mca", "oob_tcp_if_include", ifInclude}
		if hosts != "" {
			args = append(args, "--host", mpiHosts(hosts, n), "--map-by", "node", "--mca", "plm_rsh_agent", rsh, "--mca", "plm_rsh_no_tree_spawn", "1")
		}
		args = append(args, exe, pattern, strconv.FormatInt(size, 10), strconv.FormatUint(lf.seed, 10), strconv.Itoa(lf.iters), strconv.Itoa(lf.warmup))
		cmd := exec.CommandContext(ctx, "mpirun", args...)
		if hosts != "" {
			// mpirun's daemons connect back to it: it must run where the
			// hosts can reach it, so start it through the agent on the
			// first host (in a testbed the launcher's own host is not on
			// the lab network).
			line := "mpirun"
			for _, a := range args {
				line += " " + launch.ShellQuote(a)
			}
			cmd = exec.CommandContext(ctx, rsh, strings.Split(hosts, ",")[0], line)
		}
		cmd.Stdin = nil
		cmd.Stderr = stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("mpirun: %v", err)
		}
		r, err := parseMPIResult(string(out))
		if err != nil {
			return nil, err
		}
		r.Collective, r.Algorithm, r.Pattern, r.Iters = lf.collective, algoName, lf.pattern, lf.iters
		recs = append(recs, r)
	}
	return recs, nil
}

// mpiPattern returns the MPI peer's PATTERN argument for one size (an
// Alltoallv pattern name, bcast, allgather, allreduce or reducescatter, or @FILE with the
// bytes written out) and the MPI operation it runs.
func mpiPattern(lf liveFlags, n int, size int64, own []LiveRecord, dir string) (string, string, error) {
	var b strings.Builder
	switch lf.collective {
	case "bcast", "allgather", "allreduce", "reducescatter":
		return lf.collective, mpiOps[lf.collective], nil
	case "alltoallv":
		if lf.pattern == "" {
			return "uniform", "MPI_Alltoallv", nil
		}
		return lf.pattern, "MPI_Alltoallv", nil
	case "multicast":
		pat, err := MulticastPattern(lf.pattern, n, size, lf.seed)
		if err != nil {
			return "", "", err
		}
		fmt.Fprintf(&b, "multicast %d\n", len(pat.Messages))
		for _, m := range pat.Messages {
			fmt.Fprintf(&b, "%d %d %d", m.Source, m.Bytes, len(m.Dests))
			for _, d := range m.Dests {
				fmt.Fprintf(&b, " %d", d)
			}
			b.WriteString("\n")
		}
	case "redistribute":
		var groups [][]int
		for _, r := range own {
			if r.Bytes == size && len(r.Groups) == 2 {
				groups = r.Groups
			}
		}
		if groups == nil {
			return "", "", fmt.Errorf("no hetcomm redistribution of %d bytes to take the groups from", size)
		}
		bytes := RedistributionSizes(len(groups[0]), len(groups[1]), size, lf.seed)
		mat := make([][]int64, n)
		for i := range mat {
			mat[i] = make([]int64, n)
		}
		for i, s := range groups[0] {
			for j, r := range groups[1] {
				mat[s][r] = bytes[i][j]
			}
		}
		fmt.Fprintf(&b, "matrix %d\n", n)
		for _, row := range mat {
			for j, x := range row {
				if j > 0 {
					b.WriteString(" ")
				}
				fmt.Fprint(&b, x)
			}
			b.WriteString("\n")
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", lf.collective, size))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	name := "MPI_Alltoallv"
	if lf.collective == "multicast" {
		name = "MPI_Ibcast"
	}
	return "@" + path, name, nil
}

// mpiHosts turns a host list into Open MPI's host:slots form.
func mpiHosts(hosts string, n int) string {
	hs := strings.Split(hosts, ",")
	slots := map[string]int{}
	var order []string
	for r := 0; r < n; r++ {
		h := hs[r%len(hs)]
		if slots[h] == 0 {
			order = append(order, h)
		}
		slots[h]++
	}
	var parts []string
	for _, h := range order {
		parts = append(parts, fmt.Sprintf("%s:%d", h, slots[h]))
	}
	return strings.Join(parts, ",")
}

// parseMPIResult reads the RESULT line rank 0 of the MPI peer prints.
func parseMPIResult(out string) (LiveRecord, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "RESULT ") {
			continue
		}
		r := LiveRecord{System: "openmpi"}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "pattern":
				r.Pattern = v
			case "bytes":
				r.Bytes = int64(x)
			case "ranks":
				r.Ranks = int(x)
			case "median":
				r.MedianS = x
			case "min":
				r.MinS = x
			case "max":
				r.MaxS = x
			case "avg":
				r.AvgS = x
			case "p99":
				r.P99S = x
			}
		}
		return r, nil
	}
	return LiveRecord{}, fmt.Errorf("no RESULT line in the MPI peer's output:\n%s", out)
}

// printMPIRecords completes the MPI peer's records with the fabric bound
// hetcomm's records of the same size have (it depends on the pattern and
// the model, not on the algorithm) and prints them as rows of the live
// table.
func printMPIRecords(w io.Writer, lf liveFlags, n int, ifInclude string, mpi, own []LiveRecord) {
	fmt.Fprintf(w, "# Open MPI %s, %d ranks, btl tcp on %s, %d iterations (+%d warm-up)\n", lf.collective, n, ifInclude, lf.iters, lf.warmup)
	liveHeader(w)
	for i := range mpi {
		for _, r := range own {
			if r.Bytes == mpi[i].Bytes && r.FabricBound > 0 {
				mpi[i].FabricBound, mpi[i].BoundBy = r.FabricBound, r.BoundBy
				mpi[i].Note = joinNote("", r.BoundBy)
				break
			}
		}
		printLiveRow(w, mpi[i], mpi[i].Algorithm)
	}
}

// printRatios prints hetcomm's median over Open MPI's for each size.
func printRatios(w io.Writer, recs []LiveRecord) {
	mpi := map[int64]LiveRecord{}
	for _, r := range recs {
		if r.System == "openmpi" {
			mpi[r.Bytes] = r
		}
	}
	fmt.Fprintf(w, "# %-10s %-12s %16s %16s %14s\n", "Size", "Algorithm", "hetcomm P50(us)", "OpenMPI P50(us)", "hetcomm/MPI")
	for _, r := range recs {
		if m, ok := mpi[r.Bytes]; ok && r.System == "hetcomm" {
			fmt.Fprintf(w, "  %-10d %-12s %16.1f %16.1f %14.3f\n", r.Bytes, r.Algorithm, r.MedianS*1e6, m.MedianS*1e6, r.MedianS/m.MedianS)
		}
	}
}

// benchDir is the bench directory in the source tree (the parent of this
// package's), which holds peer/.
func benchDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}
