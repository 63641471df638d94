// Command lu-dag factors a matrix A = L U by tiles, as a graph of
// factor, triangular-solve and update tasks mapped onto the ranks by the
// static baseline, generational scheduling (GS) and the hybrid remapper
// (CD), and prints their completion times side by side.
//
//	hetrun -n 4 ./examples/lu-dag
//	hetrun -n 4 ./examples/lu-dag -speeds 1,1,0.5,1
//	hetrun -n 4 ./examples/lu-dag -slow-rank 2 -slow-speed 0.5 -slow-after 150ms -repeat 5
//
// The matrix is diagonally dominant, so no pivoting is needed. Tile (i,
// j) of A is a function of the seed, i and j; the tasks of the first step
// generate the tiles they read. Every run is verified: rank 0 collects L
// and U and checks that ||A - L U||_F / ||A||_F is below 1e-10; the exit
// status is non-zero otherwise.
//
// Rank speeds are emulated (see README.md): a kernel computes its real
// result, then sleeps until its work takes -pace per tile update divided
// by the rank's current speed. -pace 0 repeats the real kernel instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
	"github.com/hetcomm/hetcomm/taskmap/taskrun"
)

type options struct {
	tiles, b   int
	seed       int64
	algos      []taskmap.Algorithm
	speeds     []float64
	slowRank   int
	slowSpeed  float64
	slowAfter  time.Duration
	pace       time.Duration
	adapt      bool
	repeat     int
	maxResidue float64
}

func parseFlags() (*options, error) {
	o := &options{}
	flag.IntVar(&o.tiles, "tiles", 8, "tiles per dimension")
	flag.IntVar(&o.b, "b", 64, "tile size (the matrix is tiles*b square)")
	flag.Int64Var(&o.seed, "seed", 1, "seed of the matrix")
	algos := flag.String("algos", "static,gs,cd", "mappers to run, in order: static, ps, cs, cd, gs")
	speeds := flag.String("speeds", "", "per-rank speed factors, e.g. 1,1,0.5,1 (default: all 1)")
	flag.IntVar(&o.slowRank, "slow-rank", -1, "rank that slows down during every run (-1: none)")
	flag.Float64Var(&o.slowSpeed, "slow-speed", 0.5, "the slowed rank's speed factor, relative to its -speeds value")
	flag.DurationVar(&o.slowAfter, "slow-after", 150*time.Millisecond, "when the slow-down starts, after the start of each run")
	flag.DurationVar(&o.pace, "pace", 10*time.Millisecond, "emulated time of one tile update (2b^3 flops) at speed 1; 0: real kernels, repeated 1/speed times")
	flag.BoolVar(&o.adapt, "adapt", true, "let GS and CD rescale a rank's expected times by its measured speed (false: the paper's algorithms, completion times only)")
	flag.IntVar(&o.repeat, "repeat", 1, "runs of each mapper (interleaved); the table shows medians")
	flag.Float64Var(&o.maxResidue, "max-residual", 1e-10, "largest accepted ||A - LU||_F / ||A||_F")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n N lu-dag [flags]\n\nTiled LU factorisation as a task graph, mapped by the static baseline, GS and the\nhybrid remapper (CD); prints their completion times side by side.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.tiles < 1 || o.b < 1 || o.repeat < 1 || !(o.slowSpeed > 0) || o.pace < 0 {
		return nil, fmt.Errorf("-tiles, -b and -repeat must be >= 1, -slow-speed > 0 and -pace >= 0")
	}
	for _, a := range strings.Split(*algos, ",") {
		al := taskmap.Algorithm(strings.TrimSpace(a))
		switch al {
		case taskmap.Static, taskmap.PS, taskmap.CS, taskmap.CD, taskmap.GS:
			o.algos = append(o.algos, al)
		default:
			return nil, fmt.Errorf("-algos: unknown mapper %q", a)
		}
	}
	if *speeds != "" {
		for _, s := range strings.Split(*speeds, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || !(v > 0) {
				return nil, fmt.Errorf("-speeds: %q is not a positive number", s)
			}
			o.speeds = append(o.speeds, v)
		}
	}
	return o, nil
}

// rankSpeed emulates this rank's speed: a base factor, times slowSpeed
// once slowAfter has passed since the current run started.
type rankSpeed struct {
	base      float64
	slow      bool
	slowSpeed float64
	slowAfter time.Duration
	runStart  atomic.Int64 // unix nanoseconds
}

func (s *rankSpeed) at(t time.Time) float64 {
	if s.slow && t.Sub(time.Unix(0, s.runStart.Load())) >= s.slowAfter {
		return s.base * s.slowSpeed
	}
	return s.base
}

// kernel runs f, which does `units` tile updates of work, at the emulated
// speed: with a pace it sleeps until units*pace/speed has passed; without,
// it runs f round(1/speed) times (f must start from its inputs each time).
func (o *options) kernel(sp *rankSpeed, units float64, f func()) {
	t0 := time.Now()
	v := sp.at(t0)
	if o.pace == 0 {
		for k := 0; k < max(1, int(math.Round(1/v))); k++ {
			f()
		}
		return
	}
	f()
	target := time.Duration(units * float64(o.pace) / v)
	if d := target - time.Since(t0); d > 0 {
		time.Sleep(d)
	}
}

func main() {
	log.SetFlags(0)
	o, err := parseFlags()
	if err != nil {
		log.Fatalf("lu-dag: %v", err)
	}
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("lu-dag: %v", err)
	}
	defer c.Close()
	me, n := c.Rank(), c.Size()
	if o.speeds == nil {
		o.speeds = slices.Repeat([]float64{1}, n)
	}
	if len(o.speeds) != n {
		log.Fatalf("lu-dag: -speeds has %d factors for %d ranks", len(o.speeds), n)
	}
	sp := &rankSpeed{base: o.speeds[me], slow: me == o.slowRank, slowSpeed: o.slowSpeed, slowAfter: o.slowAfter}
	sp.runStart.Store(time.Now().Add(time.Hour).UnixNano()) // not slowed while probing

	// Expected times: every rank times one tile update (at its emulated
	// speed), once, and shares the result.
	spu, err := probe(ctx, c, o, sp)
	if err != nil {
		log.Fatalf("lu-dag: rank %d: %v", me, err)
	}

	type run struct {
		algo     taskmap.Algorithm
		res      *taskrun.Result
		residual float64
	}
	var runs []run
	bad := 0
	for rep := 0; rep < o.repeat; rep++ {
		for _, a := range o.algos {
			g, collect := buildGraph(o, sp)
			if err := c.Barrier(ctx); err != nil {
				log.Fatalf("lu-dag: %v", err)
			}
			sp.runStart.Store(time.Now().UnixNano())
			res, err := taskrun.Run(ctx, c, g, &taskrun.Config{Algorithm: a, Adapt: o.adapt, SecondsPerUnit: spu, Collect: collect.all()})
			if err != nil {
				log.Fatalf("lu-dag: rank %d: %s: %v", me, a, err)
			}
			residual := 0.0
			if me == 0 {
				residual, err = collect.residual(o, res.Items)
				if err != nil {
					log.Fatalf("lu-dag: %s: %v", a, err)
				}
				if !(residual < o.maxResidue) {
					bad++
				}
			}
			runs = append(runs, run{a, res, residual})
		}
	}
	verdict, err := comm.BcastSlice(ctx, c, 0, []int64{int64(bad)})
	if err != nil {
		log.Fatalf("lu-dag: %v", err)
	}

	if me == 0 {
		N := o.tiles * o.b
		fmt.Printf("# lu-dag: %dx%d matrix, %dx%d tiles of %d, %d tasks, %d ranks\n", N, N, o.tiles, o.tiles, o.b, len(runs[0].res.Schedule.Machine), n)
		fmt.Printf("# speeds %v", o.speeds)
		if o.slowRank >= 0 {
			fmt.Printf(", rank %d slowed to %gx after %v of every run", o.slowRank, o.slowSpeed, o.slowAfter)
		}
		if o.pace > 0 {
			fmt.Printf("; pace %v per tile update at speed 1", o.pace)
		} else {
			fmt.Printf("; real kernels")
		}
		fmt.Printf("; adapt %v; %d run(s) each, medians\n", o.adapt, o.repeat)
		fmt.Printf("# %-7s %14s %14s %8s %10s  %-22s %s\n", "mapper", "completion(s)", "predicted(s)", "remaps", "remap(ms)", "tasks per rank", "max residual")
		var staticMed float64
		for _, a := range o.algos {
			var spans, remapMS []float64
			var last *taskrun.Result
			maxRes := 0.0
			for _, r := range runs {
				if r.algo == a {
					spans = append(spans, r.res.Makespan)
					remapMS = append(remapMS, 1e3*r.res.RemapSeconds)
					maxRes = max(maxRes, r.residual)
					last = r.res
				}
			}
			med := collective.Median(spans)
			if a == taskmap.Static {
				staticMed = med
			}
			fmt.Printf("  %-7s %14.3f %14.3f %8d %10.2f  %-22s %.1e\n", a, med, last.Predicted, last.Remaps, collective.Median(remapMS), fmt.Sprint(last.TasksPerRank), maxRes)
			if o.repeat > 1 {
				fmt.Printf("  %-7s runs: %s\n", "", fmtList(spans))
			}
		}
		if staticMed > 0 {
			for _, a := range o.algos {
				if a == taskmap.Static {
					continue
				}
				var spans []float64
				for _, r := range runs {
					if r.algo == a {
						spans = append(spans, r.res.Makespan)
					}
				}
				fmt.Printf("# %s finishes %.1f%% sooner than static\n", a, 100*(1-collective.Median(spans)/staticMed))
			}
		}
		if verdict[0] == 0 {
			fmt.Printf("lu-dag: OK: every factorisation has ||A - LU||_F / ||A||_F < %g\n", o.maxResidue)
		} else {
			fmt.Printf("lu-dag: FAILED: %d factorisations above the residual bound %g\n", verdict[0], o.maxResidue)
		}
	}
	if verdict[0] != 0 {
		c.Close()
		os.Exit(1)
	}
}

// probe measures seconds per tile update on every rank.
func probe(ctx context.Context, c *comm.Comm, o *options, sp *rankSpeed) ([]float64, error) {
	a, b, x := tile(o.seed, 0, 0, o.b, o.tiles), tile(o.seed, 0, 1, o.b, o.tiles), tile(o.seed, 1, 0, o.b, o.tiles)
	best := math.Inf(1)
	for k := 0; k < 3; k++ {
		t0 := time.Now()
		o.kernel(sp, 1, func() { gemm(x, a, b, o.b) })
		best = min(best, time.Since(t0).Seconds())
	}
	all, err := comm.AllgathervSlice(ctx, c, []float64{best})
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(all))
	for r, v := range all {
		out[r] = v[0]
	}
	return out, nil
}

func fmtList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(s, " ")
}
