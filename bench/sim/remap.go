package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/taskmap"
)

// The hybrid remapper study of Maheswaran and Siegel (section 4, Figures
// 5-10): random task graphs on random heterogeneous suites, the static
// baseline against the hybrid remapper variants, Generational Scheduling
// and the "ideal" (the baseline computed from the run-time values).
//
// Choices the paper leaves open, made here (see taskmap.RandomConfig):
//
//   - Graphs are layered: round(N / per-block) blocks (per-block defaults
//     to sqrt(N), so that both the number of blocks and their size grow
//     with N, as the paper says of its graphs); every subtask has one
//     predecessor in the block before it and one more, on average, in an
//     earlier block; at most four successors where the layering allows.
//   - e_ij is uniform in [10, 100] s, independently per subtask and
//     machine; data items are 1 KiB to 1 MiB; per pair of machines a
//     latency and a per-byte time, each 0.5 to 1.5 times its mean, scaled
//     so that the mean execution time over the mean transfer time of an
//     item is the computation/communication ratio, drawn per problem from
//     the "medium" range [10, 200] unless the figure varies it (low [1,
//     10], high [200, 4000]).
//   - Run-time values are drawn per subtask and machine, and per data item
//     (a factor on its transfer time), from Erlang(2) unless the figure
//     varies the distribution. The skewed distribution of Figure 8(b) has
//     a negative deviation half the positive one.
//   - Every algorithm runs on the same problem and the same run-time
//     values in a trial. A data point is the mean completion time over
//     the trials; "gain" is 1 - mean(algorithm) / mean(baseline).
//   - Remapping times (Figure 9) are the wall-clock time of each CD block
//     remapping, measured around taskmap's pure remapper inside the
//     simulation; the paper's machine was a 165 MHz UltraSPARC.

func init() {
	Register(Experiment{
		Name:        "remap",
		Description: "hybrid remapper PS/CS/CD vs static baseline, GS and ideal on random task graphs (Maheswaran & Siegel, Figures 5-10)",
		Run:         runRemap,
	})
}

// remapPoint is one data point of a sweep.
type remapPoint struct {
	x    float64 // the plotted parameter
	cfg  taskmap.RandomConfig
	dist taskmap.Distribution
}

// remapResult is the outcome of one data point.
type remapResult struct {
	mean      map[taskmap.Algorithm]float64
	blocks    float64 // mean number of blocks
	cdVsGS    float64 // mean over trials of (gs - cd) / gs
	cdVsGSCI  float64 // 95% half-width of that mean
	remapUS   float64 // mean CD remapping time per block, microseconds
	remapMax  float64 // largest, microseconds
	perBlock  float64 // mean subtasks per block
	remapsCD  float64 // mean number of remapping events of CD
	remapsGS  float64
	lowerBnd  float64
	trialsRun int
}

func (r *remapResult) gain(a taskmap.Algorithm) float64 {
	return 100 * (1 - r.mean[a]/r.mean[taskmap.Static])
}

var remapAlgos = []taskmap.Algorithm{taskmap.Static, taskmap.PS, taskmap.CS, taskmap.CD, taskmap.GS, taskmap.Ideal}

// runRemapPoint simulates trials random instances of one point with every
// algorithm in algos (Static must be one). With timed, CD's remappings
// are timed.
func runRemapPoint(cfg SimConfig, sweep, idx int, pt remapPoint, trials int, algos []taskmap.Algorithm, timed bool, prog *Progress) (*remapResult, error) {
	res := &remapResult{mean: map[taskmap.Algorithm]float64{}}
	var rel []float64
	var remapTotal time.Duration
	remaps := 0
	for trial := 0; trial < trials; trial++ {
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(sweep)<<48|uint64(idx)<<32|uint64(trial)))
		g, model, err := taskmap.Random(pt.cfg, rng)
		if err != nil {
			return nil, err
		}
		p, err := taskmap.NewProblem(g, model, nil)
		if err != nil {
			return nil, err
		}
		rt, err := taskmap.Draw(p, pt.dist, rng)
		if err != nil {
			return nil, err
		}
		res.blocks += float64(len(p.Blocks()))
		res.perBlock += float64(p.Tasks()) / float64(len(p.Blocks()))
		lb, err := taskmap.LowerBound(p, rt)
		if err != nil {
			return nil, err
		}
		res.lowerBnd += lb
		base := taskmap.Baseline(p)
		span := map[taskmap.Algorithm]float64{}
		for _, a := range algos {
			opt := taskmap.SimOptions{Initial: base}
			if timed && a == taskmap.CD {
				opt.Wrap = func(block int, remap func()) {
					t0 := time.Now()
					remap()
					d := time.Since(t0)
					remapTotal += d
					remaps++
					res.remapMax = max(res.remapMax, float64(d.Nanoseconds())/1e3)
				}
			}
			s, err := taskmap.Simulate(p, rt, a, opt)
			if err != nil {
				return nil, fmt.Errorf("%s, trial %d: %w", a, trial, err)
			}
			if s.Makespan < lb*(1-1e-9) {
				return nil, fmt.Errorf("%s, trial %d: completion %v below the lower bound %v", a, trial, s.Makespan, lb)
			}
			span[a] = s.Makespan
			res.mean[a] += s.Makespan
			switch a {
			case taskmap.CD:
				res.remapsCD += float64(s.Remaps)
			case taskmap.GS:
				res.remapsGS += float64(s.Remaps)
			}
		}
		if gs, ok := span[taskmap.GS]; ok {
			if cd, ok := span[taskmap.CD]; ok {
				rel = append(rel, (gs-cd)/gs)
			}
		}
		prog.Step(1)
	}
	n := float64(trials)
	for a := range res.mean {
		res.mean[a] /= n
	}
	res.blocks /= n
	res.perBlock /= n
	res.remapsCD /= n
	res.remapsGS /= n
	res.lowerBnd /= n
	res.trialsRun = trials
	if remaps > 0 {
		res.remapUS = float64(remapTotal.Nanoseconds()) / 1e3 / float64(remaps)
	}
	if len(rel) > 0 {
		s := bench.Summarize(rel)
		res.cdVsGS = 100 * s.Mean
		if len(rel) > 1 {
			v := 0.0
			for _, r := range rel {
				v += (r - s.Mean) * (r - s.Mean)
			}
			res.cdVsGSCI = 100 * 1.96 * math.Sqrt(v/float64(len(rel)-1)/float64(len(rel)))
		}
	}
	return res, nil
}

// remapSweep is one sweep of a parameter, feeding one or more figures.
type remapSweep struct {
	name, xlabel string
	points       []remapPoint
	labels       []string // x labels for the tables (nil: the number)
	algos        []taskmap.Algorithm
	timed        bool
}

// runRemap runs the study's six sweeps and draws Figures 5 to 10 from
// them.
func runRemap(cfg SimConfig) (*SimResult, error) {
	trials, sweeps := remapSweeps(cfg)
	results, err := runRemapSweeps(cfg, trials, sweeps)
	if err != nil {
		return nil, err
	}
	res := &SimResult{Plots: map[string]*bench.LinePlot{}}
	add := func(t *bench.Table, lp *bench.LinePlot) {
		res.Tables = append(res.Tables, t)
		res.Plots[t.Name+".png"] = lp
	}
	versus := func(name, title string, si int, variant taskmap.Algorithm) {
		add(remapVersus(name, title, sweeps[si], results[si], variant))
	}
	versus("fig5a_ps_subtasks", "Figure 5(a): PS vs baseline, 10 machines", 0, taskmap.PS)
	versus("fig5b_cs_subtasks", "Figure 5(b): CS vs baseline, 10 machines", 0, taskmap.CS)
	versus("fig6a_cd_subtasks", "Figure 6(a): CD vs baseline, 10 machines", 0, taskmap.CD)
	versus("fig6b_cd_machines", "Figure 6(b): CD vs baseline, 200 subtasks", 1, taskmap.CD)
	versus("fig7a_cd_ratio", "Figure 7(a): CD vs baseline by computation/communication ratio", 2, taskmap.CD)
	versus("fig7b_cd_perblock", "Figure 7(b): CD vs baseline by subtasks per block", 3, taskmap.CD)
	versus("fig8a_cd_uniform", "Figure 8(a): CD vs baseline, uniform run-time values", 4, taskmap.CD)
	versus("fig8b_cd_skewed", "Figure 8(b): CD vs baseline, skewed uniform run-time values", 5, taskmap.CD)
	add(remapTimeFigure("fig9a_remap_time_subtasks", "Figure 9(a): CD remapping time per block, 10 machines", sweeps[0], results[0]))
	add(remapTimeFigure("fig9b_remap_time_machines", "Figure 9(b): CD remapping time per block, 200 subtasks", sweeps[1], results[1]))
	add(remapCDvsGS(sweeps, results))
	res.Summary = remapSummary(cfg, trials, sweeps, results)
	return res, nil
}

// remapSweeps returns the trials per point and the study's sweeps: the
// paper's, or small ones with cfg.Quick. Sweeps 0 and 1 (subtasks,
// machines) time CD's remappings.
func remapSweeps(cfg SimConfig) (int, []remapSweep) {
	trials := 100 // the paper's
	subtasks := []int{50, 100, 200, 300, 400, 500}
	machines := []int{5, 10, 20, 30, 40, 50}
	perBlock := []float64{2, 5, 10, 20, 50}
	uniform := []float64{10, 25, 50, 75, 100}
	skewed := []float64{20, 50, 100, 150, 200}
	if cfg.Quick {
		trials = 4
		subtasks = []int{50, 200}
		machines = []int{5, 20}
		perBlock = []float64{2, 20}
		uniform = []float64{25, 100}
		skewed = []float64{50, 200}
	}
	if cfg.Trials > 0 {
		trials = cfg.Trials
	}
	all := remapAlgos
	cdOnly := []taskmap.Algorithm{taskmap.Static, taskmap.CD, taskmap.GS, taskmap.Ideal}

	var sweeps []remapSweep
	sw := remapSweep{name: "subtasks", xlabel: "subtasks (10 machines)", algos: all, timed: true}
	for _, n := range subtasks {
		sw.points = append(sw.points, remapPoint{x: float64(n), cfg: taskmap.RandomConfig{Tasks: n, Machines: 10}})
	}
	sweeps = append(sweeps, sw)
	sw = remapSweep{name: "machines", xlabel: "machines (200 subtasks)", algos: cdOnly, timed: true}
	for _, m := range machines {
		sw.points = append(sw.points, remapPoint{x: float64(m), cfg: taskmap.RandomConfig{Tasks: 200, Machines: m}})
	}
	sweeps = append(sweeps, sw)
	sw = remapSweep{name: "ratio", xlabel: "computation/communication ratio (100 subtasks, 10 machines)", algos: cdOnly,
		labels: []string{"low 1-10", "medium 10-200", "high 200-4000"}}
	for k, r := range [][2]float64{{1, 10}, {10, 200}, {200, 4000}} {
		sw.points = append(sw.points, remapPoint{x: float64(k), cfg: taskmap.RandomConfig{Tasks: 100, Machines: 10, RatioMin: r[0], RatioMax: r[1]}})
	}
	sweeps = append(sweeps, sw)
	sw = remapSweep{name: "perblock", xlabel: "average subtasks per block (100 subtasks, 10 machines)", algos: cdOnly}
	for _, b := range perBlock {
		sw.points = append(sw.points, remapPoint{x: b, cfg: taskmap.RandomConfig{Tasks: 100, Machines: 10, PerBlock: b}})
	}
	sweeps = append(sweeps, sw)
	sw = remapSweep{name: "uniform", xlabel: "uniform deviation +-% (200 subtasks, 20 machines)", algos: cdOnly}
	for _, a := range uniform {
		sw.points = append(sw.points, remapPoint{x: a, cfg: taskmap.RandomConfig{Tasks: 200, Machines: 20}, dist: taskmap.Distribution{Kind: taskmap.Uniform, Neg: a}})
	}
	sweeps = append(sweeps, sw)
	sw = remapSweep{name: "skewed", xlabel: "skewed positive deviation % (negative = half; 200 subtasks, 20 machines)", algos: cdOnly}
	for _, a := range skewed {
		sw.points = append(sw.points, remapPoint{x: a, cfg: taskmap.RandomConfig{Tasks: 200, Machines: 20}, dist: taskmap.Distribution{Kind: taskmap.Skewed, Neg: a / 2, Pos: a}})
	}
	sweeps = append(sweeps, sw)
	return trials, sweeps
}

// runRemapSweeps simulates every point of every sweep: results[sweep][point].
func runRemapSweeps(cfg SimConfig, trials int, sweeps []remapSweep) ([][]*remapResult, error) {
	total := 0
	for _, s := range sweeps {
		total += len(s.points) * trials
	}
	prog := NewProgress(cfg.Progress, "remap", total)
	results := make([][]*remapResult, len(sweeps))
	for si, s := range sweeps {
		for pi, pt := range s.points {
			r, err := runRemapPoint(cfg, si, pi, pt, trials, s.algos, s.timed, prog)
			if err != nil {
				return nil, fmt.Errorf("remap %s point %v: %w", s.name, pt.x, err)
			}
			results[si] = append(results[si], r)
		}
	}
	return results, nil
}

// xval is point i's value in the tables: its label, or its x.
func (s remapSweep) xval(i int) any {
	if s.labels != nil {
		return s.labels[i]
	}
	return s.points[i].x
}

// remapVersus is a figure comparing variant with the baseline (and the
// ideal) over sweep s, like Figures 5 to 8: its table, named name, and its
// plot.
func remapVersus(name, title string, s remapSweep, results []*remapResult, variant taskmap.Algorithm) (*bench.Table, *bench.LinePlot) {
	t := &bench.Table{Name: name, Columns: []string{s.name, "blocks", "baseline", string(variant), "ideal", "gain_pct", "ideal_gain_pct", "gs", "gs_gain_pct"}}
	lp := &bench.LinePlot{Title: title, XLabel: s.xlabel, YLabel: "mean completion time (s)"}
	ser := []bench.Series{{Name: "baseline"}, {Name: string(variant)}, {Name: "ideal"}}
	for i, r := range results {
		t.Add(s.xval(i), r.blocks, r.mean[taskmap.Static], r.mean[variant], r.mean[taskmap.Ideal], r.gain(variant), r.gain(taskmap.Ideal), r.mean[taskmap.GS], r.gain(taskmap.GS))
		for k, a := range []taskmap.Algorithm{taskmap.Static, variant, taskmap.Ideal} {
			ser[k].X = append(ser[k].X, s.points[i].x)
			ser[k].Y = append(ser[k].Y, r.mean[a])
		}
	}
	lp.Series = ser
	return t, lp
}

// remapTimeFigure is one of Figure 9's: CD's remapping time per block
// (mean and largest) over a timed sweep s.
func remapTimeFigure(name, title string, s remapSweep, results []*remapResult) (*bench.Table, *bench.LinePlot) {
	t := &bench.Table{Name: name, Columns: []string{s.name, "blocks", "subtasks_per_block", "remap_mean_us", "remap_max_us"}}
	lp := &bench.LinePlot{Title: title, XLabel: s.xlabel, YLabel: "microseconds per block"}
	ser := []bench.Series{{Name: "mean"}, {Name: "max"}}
	for i, r := range results {
		t.Add(s.xval(i), r.blocks, r.perBlock, r.remapUS, r.remapMax)
		ser[0].X, ser[0].Y = append(ser[0].X, s.points[i].x), append(ser[0].Y, r.remapUS)
		ser[1].X, ser[1].Y = append(ser[1].X, s.points[i].x), append(ser[1].Y, r.remapMax)
	}
	lp.Series = ser
	return t, lp
}

// remapCDvsGS is Figure 10 (CD against GS by subtasks, sweep 0), with a
// table of CD against GS everywhere it was run.
func remapCDvsGS(sweeps []remapSweep, results [][]*remapResult) (*bench.Table, *bench.LinePlot) {
	cdgs := &bench.Table{Name: "fig10_cd_gs", Columns: []string{"sweep", "x", "cd", "gs", "cd_better_pct", "ci95_pct", "cd_remaps", "gs_remaps"}}
	lp := &bench.LinePlot{Title: "Figure 10: CD vs Generational Scheduling, 10 machines", XLabel: sweeps[0].xlabel, YLabel: "mean completion time (s)"}
	ser := []bench.Series{{Name: "cd"}, {Name: "gs"}}
	for si, s := range sweeps {
		for i, r := range results[si] {
			cdgs.Add(s.name, s.xval(i), r.mean[taskmap.CD], r.mean[taskmap.GS], r.cdVsGS, r.cdVsGSCI, r.remapsCD, r.remapsGS)
			if si == 0 {
				ser[0].X, ser[0].Y = append(ser[0].X, s.points[i].x), append(ser[0].Y, r.mean[taskmap.CD])
				ser[1].X, ser[1].Y = append(ser[1].X, s.points[i].x), append(ser[1].Y, r.mean[taskmap.GS])
			}
		}
	}
	lp.Series = ser
	return cdgs, lp
}

// remapSummary checks the paper's three claims against the results.
func remapSummary(cfg SimConfig, trials int, sweeps []remapSweep, results [][]*remapResult) string {
	var b strings.Builder
	verdict := func(ok bool) string {
		if ok {
			return "holds"
		}
		return "does not hold"
	}
	sub := results[0]
	fmt.Fprintf(&b, "Hybrid remapper, %d random problems per point, seed %d, Erlang(2) unless stated.\n", trials, cfg.Seed)
	fmt.Fprintf(&b, "Gain over the static baseline by subtasks (10 machines):\n")
	for _, a := range []taskmap.Algorithm{taskmap.PS, taskmap.CS, taskmap.CD, taskmap.GS, taskmap.Ideal} {
		fmt.Fprintf(&b, "  %-5s", a)
		for i, r := range sub {
			fmt.Fprintf(&b, "  %3.0f: %+5.1f%%", sweeps[0].points[i].x, r.gain(a))
		}
		fmt.Fprintln(&b)
	}
	first, last := sub[0], sub[len(sub)-1]
	best := math.Inf(-1)
	for _, r := range sub {
		for _, a := range []taskmap.Algorithm{taskmap.PS, taskmap.CS, taskmap.CD} {
			best = max(best, r.gain(a))
		}
	}
	grows := last.gain(taskmap.CD) > first.gain(taskmap.CD)
	fmt.Fprintf(&b, "paper: the remapper's gain grows with the subtasks, up to about 15%%: grows for CD (%+.1f%% -> %+.1f%%): %s; best variant gain %.1f%%\n",
		first.gain(taskmap.CD), last.gain(taskmap.CD), verdict(grows), best)
	worst, bestCD := math.Inf(1), math.Inf(-1)
	var where string
	for si, s := range sweeps {
		for i, r := range results[si] {
			if r.cdVsGS < worst {
				worst = r.cdVsGS
				where = fmt.Sprintf("%s=%v", s.name, s.points[i].x)
			}
			bestCD = max(bestCD, r.cdVsGS)
		}
	}
	fmt.Fprintf(&b, "paper: CD 3-4%% better than GS: CD vs GS ranges from %+.1f%% (%s) to %+.1f%%; at %.0f subtasks %+.1f%% +- %.1f: %s\n",
		worst, where, bestCD, sweeps[0].points[len(sub)-1].x, last.cdVsGS, last.cdVsGSCI, verdict(last.cdVsGS >= 0))
	for si, s := range sweeps {
		if s.name != "uniform" && s.name != "skewed" {
			continue
		}
		fmt.Fprintf(&b, "  CD vs GS, %s:", s.name)
		for i, r := range results[si] {
			fmt.Fprintf(&b, " %v: %+.1f%%", s.points[i].x, r.cdVsGS)
		}
		fmt.Fprintln(&b)
	}
	slowest := 0.0
	for _, si := range []int{0, 1} {
		for _, r := range results[si] {
			slowest = max(slowest, r.remapUS)
		}
	}
	fmt.Fprintf(&b, "paper: remapping a block takes hundreds of milliseconds at 50 machines and 500 subtasks: the slowest mean here is %.0f us per block: well under: %s",
		slowest, verdict(slowest < 100e3))
	return b.String()
}
