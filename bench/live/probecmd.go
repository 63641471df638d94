package live

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/netprobe"
)

// ModelFile is what `hetbench probe -out` writes: the model's fields
// (latency and bandwidth, row = sender, as in hetbench plan's alltoall
// input; send and receive overheads as in its multicast input) plus the
// clock offsets and how long the probe took.
type ModelFile struct {
	Ranks int `json:"ranks"`
	*collective.Model
	Offsets []float64 `json:"offsets"`
	Hosts   []string  `json:"hosts,omitempty"`
	Seconds float64   `json:"probe_seconds"`
	// Reprobes are the steps that measured the tournament's suspects
	// again (netprobe.Result.Reprobes): the directions of a step at the
	// same time.
	Reprobes [][]netprobe.Pair `json:"reprobes,omitempty"`
	// Cuts records the segment probe's tests (netprobe.CutProbe); what
	// it found is in the model's segments.
	Cuts []netprobe.CutProbe `json:"cuts,omitempty"`
	// Flows are the fabric probe's flows, step by step
	// (netprobe.FlowRecord): what each pair rate was inferred from.
	Flows []netprobe.FlowRecord `json:"flows,omitempty"`
}

// ProbeCommand implements `hetbench probe`.
func ProbeCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lc launchFlags
	lc.register(fs, ": each is probed", "rail policy the top-level costs sum the rails up under (default auto)")
	out := fs.String("out", "", "write the model JSON here")
	pairwise := fs.Bool("pairwise", os.Getenv(bootstrap.EnvProbe) == string(netprobe.ModePairwise),
		"measure every ordered pair in a round-robin tournament instead of the fabric probe (default from "+bootstrap.EnvProbe+"=pairwise)")
	check := fs.String("check", "", "a netlab topology the ranks run on: compare the probed model with its shaping (every pair and every backbone, within 10%) and print the comparison")
	checkNIC := fs.Int("check-nic", 0, "with -check: which NIC of every host the ranks run on (0: the first)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: hetbench probe [flags]

Starts N ranks, probes the network between them and prints the latency and
bandwidth matrices, each rank's send and receive overheads and the shared
segments found. By default it runs the fabric probe (every pair's latency
from tiny round trips, each NIC's egress and ingress from steps of
concurrent flows, pair rates inferred and measured where in doubt, then the
segments between subnets); -pairwise measures every ordered pair in a
round-robin tournament (a size sweep per direction fitted to T + m/B).
The probe always runs (the cache is refreshed, never read). -out writes
the model, which hetbench plan, hetbench live -model and HETCOMM_MODEL read.
-check compares the model with a netlab topology's shaping: each pair's
rate with what it reaches alone, each backbone with the segment found
across it (with -rails, only the segments). It reports; the exit status
says only whether the probe ran.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := bench.ParseFlags(fs, "probe", args, false, stderr); !ok {
		return code
	}
	if *lc.n < 2 {
		fmt.Fprintln(stderr, "hetbench probe: needs at least 2 ranks")
		return bench.ExitUsage
	}
	var topo *netlab.Topology
	if *check != "" {
		t, err := netlab.Load(*check)
		if err != nil {
			fmt.Fprintln(stderr, "hetbench probe: -check:", err)
			return bench.ExitUsage
		}
		topo = t
	}
	tmp, err := os.MkdirTemp("", "hetbench-probe-")
	if err != nil {
		fmt.Fprintln(stderr, "hetbench probe:", err)
		return bench.ExitError
	}
	defer os.RemoveAll(tmp)
	outAbs := ""
	switch {
	case *out != "":
		outAbs, _ = filepath.Abs(*out)
	case topo != nil:
		outAbs = filepath.Join(tmp, "model.json")
	}
	env, _, code, ok := lc.env("probe", tmp, stderr)
	if !ok {
		return code
	}
	mode := netprobe.ModeFull
	if *pairwise {
		mode = netprobe.ModePairwise
	}
	env = append(env, bootstrap.EnvProbe+"="+string(mode))
	ctx, stop := interruptContext()
	defer stop()
	// With -check and no -out, the model goes to a file of tmp, which is
	// gone by the end: the ranks do not name it.
	if err := lc.launch(ctx, env, []string{"probe-rank", "-out", outAbs, fmt.Sprintf("-say-out=%v", *out != "")}, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "hetbench probe:", err)
		return bench.ExitError
	}
	if topo != nil {
		mf, err := ReadModelFile(outAbs)
		if err != nil {
			fmt.Fprintln(stderr, "hetbench probe: -check:", err)
			return bench.ExitError
		}
		CheckModel(topo, mf.Hosts, *checkNIC, *lc.rails == "", mf.Bandwidth, mf.Segments).Report(stdout)
	}
	return bench.ExitOK
}

// ReadModelFile reads what `hetbench probe -out` wrote.
func ReadModelFile(path string) (*ModelFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mf := &ModelFile{}
	if err := json.Unmarshal(b, mf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if mf.Model == nil || len(mf.Bandwidth) != mf.Ranks || len(mf.Hosts) != mf.Ranks {
		return nil, fmt.Errorf("%s: not a model of %d ranks with their hosts", path, mf.Ranks)
	}
	return mf, nil
}

// ProbeRankCommand is the rank side of `hetbench probe` (hidden
// subcommand probe-rank).
func ProbeRankCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe-rank", flag.ContinueOnError)
	out := fs.String("out", "", "")
	sayOut := fs.Bool("say-out", true, "")
	if err := fs.Parse(args); err != nil {
		return bench.ExitUsage
	}
	start := time.Now()
	c, err := comm.Init(context.Background(), nil)
	if err != nil {
		fmt.Fprintln(stderr, "hetbench probe:", err)
		return bench.ExitError
	}
	defer c.Close()
	res := c.ProbeResult()
	hostname, _ := os.Hostname()
	hosts, err := c.Gatherv(context.Background(), 0, []byte(hostname))
	if err != nil {
		fmt.Fprintln(stderr, "hetbench probe:", err)
		return bench.ExitError
	}
	if c.Rank() != 0 {
		return bench.ExitOK
	}
	if res == nil {
		fmt.Fprintln(stderr, "hetbench probe: no probe result")
		return bench.ExitError
	}
	fmt.Fprintf(stdout, "# probe of %d ranks: %.3f s (start-up included: %.3f s)\n", c.Size(), res.Seconds, time.Since(start).Seconds())
	if len(res.Flows) > 0 {
		steps, fan := 0, 0
		for _, f := range res.Flows {
			steps = max(steps, f.Step+1)
			if f.Fan {
				fan++
			}
		}
		fmt.Fprintf(stdout, "# fabric probe: %d steps of %d flows (%d of them in fan-outs)\n", steps, len(res.Flows), fan)
	}
	PrintModel(stdout, res)
	if *out != "" {
		mf := ModelFile{Ranks: c.Size(), Model: res.Model, Offsets: res.Offsets, Seconds: res.Seconds, Reprobes: res.Reprobes, Cuts: res.Cuts, Flows: res.Flows}
		for _, h := range hosts {
			mf.Hosts = append(mf.Hosts, string(h))
		}
		b, _ := json.MarshalIndent(mf, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "hetbench probe:", err)
			return bench.ExitError
		}
		if *sayOut {
			fmt.Fprintf(stdout, "# model written to %s\n", *out)
		}
	}
	return bench.ExitOK
}

// PrintModel prints a probed model as tables.
func PrintModel(w io.Writer, res *netprobe.Result) {
	m := res.Model
	n := m.Size()
	matrix := func(title string, a [][]float64, scale float64, format string) {
		fmt.Fprintf(w, "\n# %s (row = sender)\n%8s", title, "")
		for j := 0; j < n; j++ {
			fmt.Fprintf(w, " %9s", fmt.Sprintf("to %d", j))
		}
		fmt.Fprintln(w)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "%8s", fmt.Sprintf("from %d", i))
			for j := 0; j < n; j++ {
				if i == j {
					fmt.Fprintf(w, " %9s", "-")
				} else {
					fmt.Fprintf(w, " "+format, a[i][j]*scale)
				}
			}
			fmt.Fprintln(w)
		}
	}
	for _, r := range m.Rails {
		matrix(r.Name+": latency, microseconds", r.Latency, 1e6, "%9.1f")
		matrix(r.Name+": bandwidth, MB/s", r.Bandwidth, 1e-6, "%9.2f")
	}
	effective := ""
	if len(m.Rails) > 1 {
		effective = fmt.Sprintf(" (the rails summed up: exact at 0 and %d bytes)", netprobe.RailRef)
	}
	matrix("latency, microseconds"+effective, m.Latency, 1e6, "%9.1f")
	matrix("bandwidth, MB/s"+effective, m.Bandwidth, 1e-6, "%9.2f")
	if len(res.Reprobes) > 0 {
		fmt.Fprintf(w, "\n# measured again after the tournament (steps; directions of a step at the same time):")
		for _, st := range res.Reprobes {
			sep := " "
			for _, d := range st {
				fmt.Fprintf(w, "%s%d->%d", sep, d.A, d.B)
				sep = ","
			}
			fmt.Fprint(w, " ;")
		}
		fmt.Fprintln(w)
	}
	printCut(w, res)
	fmt.Fprintf(w, "\n# overheads per rank: send = Sc + Sm*m, receive = Rc + Rm*m; clock offset to rank 0\n")
	fmt.Fprintf(w, "%6s %12s %12s %12s %12s %12s\n", "rank", "Sc(us)", "Sm(ns/B)", "Rc(us)", "Rm(ns/B)", "offset(us)")
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "%6d %12.2f %12.4f %12.2f %12.4f %12.1f\n", i, m.SendOverhead[i].Const*1e6, m.SendOverhead[i].PerByte*1e9,
			m.RecvOverhead[i].Const*1e6, m.RecvOverhead[i].PerByte*1e9, res.Offsets[i]*1e6)
	}
}

// printCut prints the segment probe's tests and the segments found.
func printCut(w io.Writer, res *netprobe.Result) {
	for _, c := range res.Cuts {
		paced := "unpaced"
		if c.Paced {
			paced = "paced"
		}
		fmt.Fprintf(w, "\n# segment probe: ranks %v <-> %v, %d bytes per flow (%s), NIC bound %.1f ms; a->b %.1f ms, b->a %.1f ms (a segment above %.2fx)",
			c.A, c.B, c.Bytes, paced, c.Bound*1e3, c.AB*1e3, c.BA*1e3, c.Threshold)
		if c.AB2 > 0 {
			fmt.Fprintf(w, "; measured again paced to 1.2x: a->b %.1f ms, b->a %.1f ms", c.AB2*1e3, c.BA2*1e3)
		}
	}
	if len(res.Cuts) > 0 {
		fmt.Fprintln(w)
		if len(res.Model.Segments) == 0 {
			fmt.Fprintln(w, "# no shared segment: the NICs explain every cut tested")
		}
	}
	for _, s := range res.Model.Segments {
		fmt.Fprintf(w, "# segment %s: %v -> %v %.2f MB/s, back %.2f MB/s\n", s.Name, s.A, s.B, s.AB*1e-6, s.BA*1e-6)
	}
}
