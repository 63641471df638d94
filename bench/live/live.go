package live

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/launch"
)

// LiveRecord is one line of `hetbench live -json`: one collective, algorithm
// and size.
type LiveRecord struct {
	System     string  `json:"system"` // "hetcomm" or the peer ("openmpi")
	Collective string  `json:"collective"`
	Algorithm  string  `json:"algorithm"`
	Pattern    string  `json:"pattern"`
	Transport  string  `json:"transport,omitempty"`
	Ranks      int     `json:"ranks"`
	Bytes      int64   `json:"bytes"` // the pattern's largest message
	Total      int64   `json:"total_bytes"`
	Iters      int     `json:"iters"`
	AvgS       float64 `json:"avg_s"`
	MedianS    float64 `json:"median_s"`
	MinS       float64 `json:"min_s"`
	MaxS       float64 `json:"max_s"`
	P99S       float64 `json:"p99_s"`
	LowerBound float64 `json:"lower_bound_s"`
	Predicted  float64 `json:"predicted_s"`
	// FabricBound is the bound on the fabric the model implies
	// (collective.Fabric.Bound): ranks limited by their interfaces, not
	// one message at a time, and flows by the segments they cross.
	FabricBound float64 `json:"fabric_bound_s,omitempty"`
	// BoundBy is the resource that sets FabricBound ("rank 0 egress").
	BoundBy string `json:"bound_by,omitempty"`
	// Chosen is what Auto resolved to.
	Chosen string `json:"chosen,omitempty"`
	// Chunks is the number of pieces a Bcast's plan sends the message in.
	Chunks int `json:"chunks,omitempty"`
	// Note says what the plan was (a Bcast's tree and pieces, an
	// Allreduce's predictions) and what sets the bound.
	Note string `json:"note,omitempty"`
	// Groups are a redistribution's senders and receivers.
	Groups [][]int `json:"groups,omitempty"`
	// Seed is the random pattern's seed: with Pattern, Ranks and Bytes it
	// gives the size matrix (PatternSizes).
	Seed uint64 `json:"seed,omitempty"`
	// Model is the cost model the ranks planned with (the probed one,
	// segments and rails included), so that a recorded run can be
	// replayed on the fabric it implies (collective.FabricFromModel).
	// Only Alltoallv records it.
	Model *collective.Model `json:"model,omitempty"`
}

// liveFlags are shared by the launcher and the ranks.
type liveFlags struct {
	collective string
	pattern    string
	bytes      string
	algos      string
	groups     string
	k          int
	iters      int
	warmup     int
	seed       uint64
}

func (f *liveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.collective, "collective", "alltoallv", "collective: alltoallv, multicast, redistribute, bcast (from rank 0), allgather, allreduce (a vector of bytes/8 float64s, summed) or reducescatter (the same, a block of it to each rank)")
	fs.StringVar(&f.pattern, "pattern", "", "pattern: alltoallv "+strings.Join(Patterns, ", ")+" (default uniform); multicast allbcast (default) or multi (25% of the ranks are sources, random destinations); redistribute random")
	fs.StringVar(&f.bytes, "bytes", "65536,1048576", "comma-separated message sizes (the pattern's largest message; bcast the message, allgather each rank's block, allreduce and reducescatter the vector)")
	fs.StringVar(&f.algos, "algo", "", "comma-separated algorithms, or all: alltoallv caterpillar, maxmatch, minmatch, greedy, openshop, auto, naive, paced (default openshop,naive); multicast fef ... rrsp, auto, naive (default rrp,naive); redistribute ggp, oggp, bruteforce, paced, each optionally +perpair (no barrier between steps) (default oggp,bruteforce); bcast auto, binomial, pipeline (default all three); allgather auto, ring, mesh (default all three); allreduce auto, tree, rsag (default all three); reducescatter auto")
	fs.StringVar(&f.groups, "groups", "", "redistribute: the two groups as ranks, e.g. 0,1,2,3:4,5,6,7 (default: collective.Clusters of the probed model, else the two halves)")
	fs.IntVar(&f.k, "k", 0, "redistribute: the backbone's concurrency k (0: measured with ProbeBackbone)")
	fs.IntVar(&f.iters, "iters", 20, "timed iterations per size and algorithm")
	fs.IntVar(&f.warmup, "warmup", 3, "untimed iterations first")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the random pattern")
}

func (f *liveFlags) args() []string {
	return []string{"-collective", f.collective, "-pattern", f.pattern, "-bytes", f.bytes, "-algo", f.algos,
		"-groups", f.groups, "-k", strconv.Itoa(f.k),
		"-iters", strconv.Itoa(f.iters), "-warmup", strconv.Itoa(f.warmup), "-seed", strconv.FormatUint(f.seed, 10)}
}

func (f *liveFlags) sizes() ([]int64, error) {
	var out []int64
	for _, s := range strings.Split(f.bytes, ",") {
		v, err := parseSize(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSize reads 4096, 64KiB, 1MiB, 2MB...
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}} {
		if strings.HasSuffix(s, u.suffix) {
			mult, s = u.m, strings.TrimSuffix(s, u.suffix)
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bench: bad size %q", s)
	}
	return v * mult, nil
}

// defaults fills in the collective's default pattern and algorithms.
func (f *liveFlags) defaults() {
	if f.pattern == "" {
		f.pattern = map[string]string{"alltoallv": "uniform", "multicast": "allbcast", "redistribute": "random"}[f.collective]
	}
	if f.algos == "" {
		f.algos = map[string]string{"alltoallv": "openshop,naive", "multicast": "rrp,naive", "redistribute": "oggp,bruteforce",
			"bcast": "auto,binomial,pipeline", "allgather": "auto,ring,mesh", "allreduce": "auto,tree,rsag", "reducescatter": "auto"}[f.collective]
	}
}

// algorithms returns the algorithms to run; redistribution algorithms may
// carry a "+perpair" suffix.
func (f *liveFlags) algorithms() ([]collective.Algorithm, error) {
	f.defaults()
	var kind collective.Kind
	switch f.collective {
	case "alltoallv":
		kind = collective.KindAlltoall
	case "multicast":
		kind = collective.KindMulticast
	case "redistribute":
		kind = collective.KindRedistribute
	case "bcast", "allgather", "allreduce", "reducescatter":
		return fixedAlgorithmsOf(f.collective, f.algos)
	default:
		return nil, fmt.Errorf("bench: unknown collective %q (want alltoallv, multicast, redistribute, bcast, allgather, allreduce or reducescatter)", f.collective)
	}
	if f.algos == "all" {
		all := collective.Algorithms(kind)
		if kind != collective.KindRedistribute {
			all = append(all, comm.Naive)
		}
		if kind != collective.KindMulticast {
			all = append(all, collective.Paced)
		}
		return all, nil
	}
	var out []collective.Algorithm
	for _, a := range strings.Split(f.algos, ",") {
		a = strings.TrimSpace(a)
		base := collective.Algorithm(strings.TrimSuffix(a, "+perpair"))
		ok := collective.KindOf(base) == kind || base == collective.Auto && kind != collective.KindRedistribute ||
			base == comm.Naive && kind != collective.KindRedistribute || base == collective.Paced && kind != collective.KindMulticast
		if !ok || strings.HasSuffix(a, "+perpair") && kind != collective.KindRedistribute {
			return nil, fmt.Errorf("bench: unknown %s algorithm %q", f.collective, a)
		}
		out = append(out, collective.Algorithm(a))
	}
	return out, nil
}

// LiveCommand implements `hetbench live`: it starts N ranks of this
// executable (through the same launcher as hetrun), which run the
// benchmark and report from rank 0; with -peer mpi it then runs the same
// pattern with the system's MPI and reports the ratio.
func LiveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("live", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf liveFlags
	lf.register(fs)
	var lc launchFlags
	lc.register(fs, "", "how messages use several rails: auto (default), single, mux, agg or muxagg")
	model := fs.String("model", "", "cost model JSON for planning and the lower bound (default: uniform)")
	jsonOut := fs.String("json", "", "write one JSON record per collective, algorithm and size here")
	timelineDir := fs.String("timeline", "", "directory for the predicted and measured timing diagrams (PNG and JSON) of each Alltoallv size and planner")
	peer := fs.String("peer", "", "also run the pattern with the system's MPI: mpi (Open MPI's mpirun, TCP transport)")
	peerIf := fs.String("peer-if", "lo", "network the MPI peer uses (btl_tcp_if_include), e.g. lo or 10.0.0.0/8")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: hetbench live [flags]

Runs collectives on N ranks and reports, OSU-style, the time of each size and
algorithm (the slowest rank's time per iteration; warm-up, then timed
iterations with a barrier between), with the lower bound and the planner's
prediction from the cost model. -peer mpi runs the same pattern with Open MPI.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := bench.ParseFlags(fs, "live", args, false, stderr); !ok {
		return code
	}
	if _, err := lf.sizes(); err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitUsage
	}
	if _, err := lf.algorithms(); err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitUsage
	}
	if *peer != "" {
		if *peer != "mpi" {
			fmt.Fprintf(stderr, "hetbench live: unknown -peer %q (want mpi)\n", *peer)
			return bench.ExitUsage
		}
		if !mpiPeerSupports(lf.collective) {
			fmt.Fprintln(stderr, "hetbench live: -peer mpi supports -collective "+strings.Join(mpiPeerCollectives, ", "))
			return bench.ExitUsage
		}
	}
	n, transport, hosts, rsh := lc.n, lc.transport, lc.hosts, lc.rsh
	if *n < 1 {
		fmt.Fprintln(stderr, "hetbench live: -n must be at least 1")
		return bench.ExitUsage
	}
	tmp, err := os.MkdirTemp("", "hetbench-live-")
	if err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitError
	}
	defer os.RemoveAll(tmp)
	recFile := filepath.Join(tmp, "records.json")
	rankArgs := append([]string{"live-rank"}, lf.args()...)
	rankArgs = append(rankArgs, "-records", recFile, "-transport-name", *transport)
	if *timelineDir != "" {
		abs, _ := filepath.Abs(*timelineDir)
		rankArgs = append(rankArgs, "-timeline", abs)
	}
	env, emulated, code, ok := lc.env("live", tmp, stderr)
	if !ok {
		return code
	}
	if *model != "" {
		abs, _ := filepath.Abs(*model)
		env = append(env, bootstrap.EnvModel+"="+abs)
	} else if emulated != "" {
		env = append(env, bootstrap.EnvModel+"="+emulated) // plan with the emulated network
	}
	ctx, stop := interruptContext()
	defer stop()
	if err := lc.launch(ctx, env, rankArgs, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitError
	}
	recs, err := readRecords(recFile)
	if err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitError
	}
	if *peer != "" {
		prec, err := runMPIPeer(ctx, lf, *n, *hosts, *rsh, *peerIf, recs, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "hetbench live: mpi peer:", err)
			return bench.ExitError
		}
		printMPIRecords(stdout, lf, *n, *peerIf, prec, recs)
		recs = append(recs, prec...)
		printRatios(stdout, recs)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(recs, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "hetbench live:", err)
			return bench.ExitError
		}
	}
	return bench.ExitOK
}

// launchSelf starts n ranks of this executable with args, locally or on
// hosts through rsh, with hetrun's launcher; rank 0's output is the
// report.
func launchSelf(ctx context.Context, n int, transport, hosts, rsh string, env, args []string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	spec := launch.Spec{N: n, Program: self, Args: args, Rsh: rsh, Transport: transport, Env: env, Stdout: stdout, Stderr: stderr, NoPrefix: true}
	if hosts != "" {
		spec.Hosts = strings.Split(hosts, ",")
	}
	return launch.Run(ctx, spec)
}

func readRecords(path string) ([]LiveRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rank 0 wrote no results: %w", err)
	}
	var recs []LiveRecord
	return recs, json.Unmarshal(b, &recs)
}

// LiveRankCommand is the rank side of `hetbench live` (hidden subcommand
// live-rank, started by LiveCommand).
func LiveRankCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("live-rank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf liveFlags
	lf.register(fs)
	records := fs.String("records", "", "where rank 0 writes the JSON records")
	timelineDir := fs.String("timeline", "", "where rank 0 writes timing diagrams")
	tname := fs.String("transport-name", "", "transport name for the records")
	if err := fs.Parse(args); err != nil {
		return bench.ExitUsage
	}
	sizes, err := lf.sizes()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return bench.ExitUsage
	}
	algos, err := lf.algorithms()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return bench.ExitUsage
	}
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(stderr, "hetbench live:", err)
		return bench.ExitError
	}
	defer c.Close()
	me, n := c.Rank(), c.Size()
	defer startCPUProfile(me)()
	var recs []LiveRecord
	if me == 0 {
		what := lf.collective
		if lf.pattern != "" {
			what += ", pattern " + lf.pattern
		}
		if lf.collective == "bcast" {
			what += fmt.Sprintf(" from rank %d", bcastRoot)
		}
		fmt.Fprintf(stdout, "# hetcomm %s, %d ranks, transport %s, %d iterations (+%d warm-up)\n", what, n, *tname, lf.iters, lf.warmup)
		liveHeader(stdout)
	}
	for _, size := range sizes {
		var sz [][]int64
		if lf.collective == "alltoallv" {
			if sz, err = PatternSizes(lf.pattern, n, size, lf.seed); err != nil {
				fmt.Fprintln(stderr, err)
				return bench.ExitUsage
			}
		}
		var total int64
		for _, row := range sz {
			for _, v := range row {
				total += v
			}
		}
		for _, algo := range algos {
			lc, err := liveOp(ctx, c, lf, sz, size, algo)
			if err != nil {
				fmt.Fprintln(stderr, "hetbench live:", err)
				return bench.ExitError
			}
			if lc.total > 0 {
				total = lc.total
			}
			if err := checkLiveOp(ctx, c, lf, lc, size, algo); err != nil {
				fmt.Fprintln(stderr, err)
				return bench.ExitError
			}
			times, err := timeLiveOp(ctx, c, lf, lc.run, size, algo)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return bench.ExitError
			}
			if *timelineDir != "" && lf.collective == "alltoallv" && algo != comm.Naive {
				if err := liveTimeline(ctx, c, *timelineDir, fmt.Sprintf("alltoallv-%s-%d-%s", lf.pattern, size, algo)); err != nil {
					fmt.Fprintln(stderr, "hetbench live: timeline:", err)
					return bench.ExitError
				}
			}
			if me != 0 {
				continue
			}
			r := LiveRecord{System: "hetcomm", Collective: lf.collective, Algorithm: string(algo), Pattern: lf.pattern, Transport: *tname,
				Ranks: n, Bytes: size, Total: total, Iters: lf.iters, LowerBound: lc.lb, Predicted: lc.pred, FabricBound: lc.fabric,
				BoundBy: lc.boundBy, Chosen: lc.chosen, Chunks: lc.chunks, Note: lc.note, Seed: lf.seed}
			if lf.collective == "alltoallv" {
				r.Model = c.Model()
			}
			recs = append(recs, reportLive(stdout, c, lf, r, times))
		}
	}
	if me == 0 && *records != "" {
		b, _ := json.Marshal(recs)
		if err := os.WriteFile(*records, b, 0o644); err != nil {
			fmt.Fprintln(stderr, "hetbench live:", err)
			return bench.ExitError
		}
	}
	return bench.ExitOK
}

// startCPUProfile starts this rank's CPU profile when
// HETBENCH_CPUPROFILE=PREFIX is set (the file PREFIX.RANK), for finding
// where a live run spends its time. It returns the function that stops
// the profile (a no-op when none was started).
func startCPUProfile(rank int) (stop func()) {
	prefix := os.Getenv("HETBENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, rank))
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// timeLiveOp runs one collective lf.warmup times untimed, then lf.iters
// times timed, with a barrier before each run. It returns each timed
// run's time on the slowest rank, in seconds. Its errors read as the
// command's messages.
func timeLiveOp(ctx context.Context, c *comm.Comm, lf liveFlags, run func(context.Context) error, size int64, algo collective.Algorithm) ([]float64, error) {
	var times []float64
	for it := 0; it < lf.warmup+lf.iters; it++ {
		if err := c.Barrier(ctx); err != nil {
			return nil, fmt.Errorf("hetbench live: %w", err)
		}
		t0 := time.Now()
		if err := run(ctx); err != nil {
			return nil, fmt.Errorf("hetbench live: rank %d: %s %s %d: %w", c.Rank(), lf.collective, algo, size, err)
		}
		dt := time.Since(t0).Seconds()
		slowest, err := comm.Allreduce(ctx, c, []float64{dt}, comm.Max)
		if err != nil {
			return nil, fmt.Errorf("hetbench live: %w", err)
		}
		if it >= lf.warmup {
			times = append(times, slowest[0])
		}
	}
	return times, nil
}

// liveTimeline gathers the predicted and measured timelines of the last
// collective and, on rank 0, writes them into dir as NAME.json and
// NAME.png (writeTimeline).
func liveTimeline(ctx context.Context, c *comm.Comm, dir, name string) error {
	pred, meas, err := c.Timeline(ctx)
	if err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	return writeTimeline(dir, name, pred, meas)
}

// reportLive completes rank 0's record r of one size and algorithm with
// the statistics of times (and, for an Alltoallv, what Auto chose; for a
// redistribution, the groups) and prints its row of the OSU-style table.
func reportLive(w io.Writer, c *comm.Comm, lf liveFlags, r LiveRecord, times []float64) LiveRecord {
	st := bench.Summarize(times)
	r.AvgS, r.MedianS, r.MinS, r.MaxS, r.P99S = st.Mean, st.Median, st.Min, st.Max, st.P99
	algo := collective.Algorithm(r.Algorithm)
	name := r.Algorithm
	if algo == collective.Auto && lf.collective == "alltoallv" {
		r.Chosen = string(c.LastAlgorithm())
	}
	if r.Chosen != "" {
		name += "=" + r.Chosen
	}
	if lf.collective == "redistribute" {
		s, rc, _ := liveGroups(c, lf.groups)
		r.Groups = [][]int{s, rc}
	}
	printLiveRow(w, r, name)
	return r
}

// liveHeader is the header of the OSU-style table.
func liveHeader(w io.Writer) {
	fmt.Fprintf(w, "# %-10s %-14s %14s %14s %14s %14s %14s %14s %14s %14s %8s  %s\n", "Size", "Algorithm", "Avg(us)", "Min(us)", "Max(us)", "P50(us)", "P99(us)", "LowerBnd(us)", "FabricBnd(us)", "Predicted(us)", "Meas/Bnd", "Plan")
}

// printLiveRow prints r's row of the table, its algorithm as name: the
// median over the fabric bound (else over the lower bound), "-" when
// neither is known.
func printLiveRow(w io.Writer, r LiveRecord, name string) {
	ratioS := "-"
	if b := r.FabricBound; b > 0 {
		ratioS = fmt.Sprintf("%.3f", r.MedianS/b)
	} else if b := r.LowerBound; b > 0 {
		ratioS = fmt.Sprintf("%.3f", r.MedianS/b)
	}
	fmt.Fprintf(w, "  %-10d %-14s %14.1f %14.1f %14.1f %14.1f %14.1f %14s %14s %14s %8s  %s\n", r.Bytes, name,
		r.AvgS*1e6, r.MinS*1e6, r.MaxS*1e6, r.MedianS*1e6, r.P99S*1e6, micros(r.LowerBound), micros(r.FabricBound), micros(r.Predicted), ratioS, r.Note)
}

// micros writes seconds as microseconds, and 0 (unknown) as "-".
func micros(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s*1e6)
}

// liveOp prepares one collective: the function that runs it once, the
// one that checks its result (Bcast, Allgather, Allreduce), the lower
// bound, the prediction (Alltoallv: on the fabric the model implies) and
// (Alltoallv, Bcast, Allgather) the bound on the fabric the comm's model
// implies (zero when no model is known), and the bytes it moves when the
// caller's matrix does not say.
func liveOp(ctx context.Context, c *comm.Comm, lf liveFlags, sz [][]int64, size int64, algo collective.Algorithm) (liveCase, error) {
	me, n := c.Rank(), c.Size()
	switch lf.collective {
	case "alltoallv":
		send := make([][]byte, n)
		bufs := make([][]byte, n) // reused every iteration, as MPI's receive buffer
		for j := range send {
			send[j] = make([]byte, sz[me][j])
			bufs[j] = make([]byte, sz[j][me])
		}
		var lb, pred, nicb float64
		var boundBy string
		if m := c.Model(); m != nil {
			x := &collective.Exchange{Bytes: sz}
			if fb, err := collective.FabricFromModel(m).Bound(x); err == nil {
				nicb, boundBy = fb.Seconds, fb.Resource
			}
			// The one-port bound of the total-exchange paper.
			if p, err := collective.PlanExchange(m, x, collective.OpenShop, collective.Options{Seed: 1}); err == nil {
				lb = p.LowerBound
			}
			// The prediction is the flow simulator's, on the fabric the
			// model implies, as comm plans (the plan auto picks there).
			if p, err := collective.PlanExchangeOn(m, nil, x, algo, collective.Options{Seed: 1}, collective.FlowOptions{NoPacing: true}); err == nil {
				pred = p.Predicted
			}
		}
		run := func(ctx context.Context) error {
			recv, err := c.AlltoallvWith(ctx, send, comm.AlltoallvOptions{Algorithm: algo, Recv: bufs})
			if err != nil {
				return err
			}
			for i := range recv {
				if int64(len(recv[i])) != sz[i][me] && i != me {
					return fmt.Errorf("received %d bytes from rank %d, want %d", len(recv[i]), i, sz[i][me])
				}
			}
			return nil
		}
		return liveCase{run: run, lb: lb, pred: pred, fabric: nicb, boundBy: boundBy, note: joinNote("", boundBy)}, nil
	case "multicast":
		pat, err := MulticastPattern(lf.pattern, n, size, lf.seed)
		if err != nil {
			return liveCase{}, err
		}
		msgs := make([]comm.MulticastMsg, len(pat.Messages))
		var total int64
		for k, m := range pat.Messages {
			msgs[k] = comm.MulticastMsg{Source: m.Source, Dests: m.Dests}
			if m.Source == me {
				msgs[k].Data = make([]byte, m.Bytes)
			}
			total += m.Bytes * int64(len(m.Dests))
		}
		var lb, pred float64
		if c.Model() != nil {
			if p, err := c.PlanMulticast(pat, algo); err == nil && algo != comm.Naive {
				lb, pred = p.LowerBound, p.Predicted
			} else if algo == comm.Naive {
				lb, _ = collective.MulticastLowerBound(c.Model(), pat)
			}
		}
		run := func(ctx context.Context) error {
			_, err := c.MulticastWith(ctx, msgs, comm.MulticastOptions{Algorithm: algo})
			return err
		}
		return liveCase{run: run, lb: lb, pred: pred, total: total}, nil
	case "redistribute":
		senders, receivers, err := liveGroups(c, lf.groups)
		if err != nil {
			return liveCase{}, err
		}
		bytes := RedistributionSizes(len(senders), len(receivers), size, lf.seed)
		var send [][]byte
		var total int64
		for i, s := range senders {
			for j := range receivers {
				total += bytes[i][j]
				if s == me {
					send = append(send, make([]byte, bytes[i][j]))
				}
			}
		}
		base := collective.Algorithm(strings.TrimSuffix(string(algo), "+perpair"))
		o := comm.RedistributeOptions{Algorithm: base, PerPair: strings.HasSuffix(string(algo), "+perpair"), K: lf.k}
		for j, r := range receivers {
			if r == me { // reused every iteration, as MPI's receive buffer
				o.Recv = make([][]byte, len(senders))
				for i := range senders {
					o.Recv[i] = make([]byte, bytes[i][j])
				}
			}
		}
		if o.K == 0 {
			// Measure the backbone once, here, so timings do not include it.
			if o.K, _, err = c.ProbeBackbone(ctx, senders, receivers); err != nil {
				return liveCase{}, err
			}
		}
		var lb, pred float64
		if c.Model() != nil {
			if p, err := c.PlanRedistribution(senders, receivers, bytes, o); err == nil {
				lb, pred = p.LowerBound, p.Predicted
			}
		}
		run := func(ctx context.Context) error {
			_, err := c.Redistribute(ctx, senders, receivers, send, o)
			return err
		}
		return liveCase{run: run, lb: lb, pred: pred, total: total}, nil
	case "bcast":
		return bcastCase(c, size, algo, lf.seed), nil
	case "allgather":
		return allgatherCase(c, size, algo, lf.seed), nil
	case "allreduce":
		return allreduceCase(c, size, algo), nil
	case "reducescatter":
		return reducescatterCase(c, size), nil
	}
	return liveCase{}, fmt.Errorf("unknown collective %q (want alltoallv, multicast, redistribute, bcast, allgather, allreduce or reducescatter)", lf.collective)
}

// liveGroups parses -groups, or finds two groups in the model.
func liveGroups(c *comm.Comm, spec string) ([]int, []int, error) {
	if spec == "" {
		if m := c.Model(); m != nil {
			if g := collective.Clusters(m); len(g) == 2 {
				return g[0], g[1], nil
			}
		}
		half := c.Size() / 2
		var a, b []int
		for r := 0; r < c.Size(); r++ {
			if r < half {
				a = append(a, r)
			} else {
				b = append(b, r)
			}
		}
		return a, b, nil
	}
	parts := strings.Split(spec, ":")
	if len(parts) != 2 {
		return nil, nil, fmt.Errorf("-groups %q: want SENDERS:RECEIVERS, e.g. 0,1:2,3", spec)
	}
	var out [2][]int
	for i, p := range parts {
		for _, f := range strings.Split(p, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil, nil, fmt.Errorf("-groups %q: %v", spec, err)
			}
			out[i] = append(out[i], r)
		}
	}
	return out[0], out[1], nil
}

// writeTimeline writes NAME.json (predicted and measured plans) and
// NAME.png (the two timing diagrams) into dir.
func writeTimeline(dir, name string, pred, meas *collective.Plan) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]*collective.Plan{"predicted": pred, "measured": meas}, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		return err
	}
	return TimingDiagram(pred, meas, filepath.Join(dir, name+".png"))
}
