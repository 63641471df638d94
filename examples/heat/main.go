// Command heat solves the 2-D heat equation (Jacobi relaxation of a plate
// with a hot top edge) on a grid split into row blocks, with dynamic load
// balancing by data migration after Cermele, Colajanni and Necci, "Dynamic
// Load Balancing of Distributed SPMD Computations with Explicit
// Message-Passing".
//
//	hetrun -n 4 ./examples/heat
//	hetrun -n 4 ./examples/heat -rows 1200 -cols 1000 -iters 300 -tol 0 -slow 3:2:100 -lb sasr -policy smi
//	hetrun -n 4 ./examples/heat -iters 300 -tol 0 -slow 3:2:100 -lb off     # the static partition
//
// Every iteration exchanges halo rows with Sendrecv and relaxes the
// rank's rows; every -conv-every iterations an Allreduce of the largest
// change decides convergence. At start-up every rank times a fixed kernel
// (the capacity probe) and the rows are dealt in proportion to the
// measured speeds. With -lb sasr or aasr the load balancer runs every
// -interval iterations: capacity probe (or passive measure), decision on
// the master by the SAI, SMI, NINC or NINP policy, and data migration to
// a partition proportional to the new capacities. Compute speeds are
// emulated (see emulate.go and the README); -slow makes a rank slower
// from some iteration on. Rank 0 prints the iteration rate before and
// after the slowdown, and checks the result against a serial solution on
// small grids; the exit status is 0 only if the check passed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	nx := flag.Int("rows", 200, "interior rows of the grid")
	ny := flag.Int("cols", 200, "interior columns of the grid")
	iters := flag.Int("iters", 5000, "largest number of iterations")
	tol := flag.Float64("tol", 1e-4, "stop when the largest change of an iteration is below this (0: run all -iters)")
	convEvery := flag.Int("conv-every", 10, "iterations between convergence tests (each an Allreduce)")
	verify := flag.String("verify", "auto", "compare with a serial solution: on, off, or auto (when rows*cols*iterations <= 4e8)")
	initPart := flag.String("init", "probe", "initial partition: probe (rows in proportion to the start-up capacity probe), equal, or speeds (in proportion to -speeds: an oracle without measurement noise)")

	var lb lbConfig
	flag.StringVar(&lb.protocol, "lb", "aasr", "dynamic load balancing protocol: aasr, sasr or off (static partition)")
	policy := flag.String("policy", "sai", "decision policy: sai, smi, ninc or ninp")
	theta := flag.Float64("theta", -1, "the policy's threshold (default: sai 0.10, smi 0.25, ninc and ninp 0.20)")
	flag.Float64Var(&lb.policy.Lambda, "lambda", 0.25, "NINC, NINP: imbalance above which a node counts as imbalanced")
	flag.IntVar(&lb.policy.History, "history", 4, "NINP: check points in its decayed average (h)")
	flag.IntVar(&lb.interval, "interval", 10, "iterations between load-balancer activations")
	flag.IntVar(&lb.lag, "lag", 1, "AASR: check_load(2) at the end of the activation's iteration + lag - 1")
	flag.StringVar(&lb.monitor, "monitor", "bench", "load monitoring: bench (capacity micro-benchmark) or passive (the kernel's own times)")
	flag.IntVar(&lb.probePoints, "probe-points", 0, "grid points of the capacity micro-benchmark, all repetitions together (0: a tenth of a rank's average share of the grid, at least 4096 and, with -emulate sleep, at least 1 ms per repetition)")
	flag.IntVar(&lb.probeReps, "probe-reps", 3, "repetitions of the capacity micro-benchmark; the fastest counts")
	flag.BoolVar(&lb.verbose, "v", false, "the master prints the relative capacities and the decision of every check")
	flag.Float64Var(&lb.complexity, "complexity", 2, "the computation's complexity C: a node gets rows in proportion to chi^(2/C)")

	emul := flag.String("emulate", "sleep", "speed emulation: sleep (pad each kernel to points/(rate*speed) seconds) or work (repeat the kernel 1/speed times)")
	rate := flag.Float64("rate", 10e6, "sleep emulation: grid points per second of a rank of speed 1")
	speedsFlag := flag.String("speeds", "", "relative speeds of the ranks, comma-separated (default all 1)")
	slowFlag := flag.String("slow", "", "RANK:FACTOR:FROM[:UNTIL],... make RANK FACTOR times slower from iteration FROM (until UNTIL)")
	warmup := flag.Int("warmup", 10, "iterations left out of the rate before the slowdown")
	settle := flag.Int("settle", 50, "iterations after the slowdown left out of the settled rate")
	trace := flag.String("trace", "", "rank 0 writes one CSV line per iteration (time, duration, partition) here")
	corrupt := flag.Int("corrupt", -1, "testing: this rank alters one value before the check, to show that the check fails")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n P heat [flags]\n\n2-D heat equation (Jacobi) on row blocks with dynamic load balancing by data migration.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)

	lb.policy.Policy = Policy(*policy)
	lb.policy.Theta = *theta
	if lb.policy.Theta < 0 {
		lb.policy.Theta = DefaultTheta(lb.policy.Policy)
	}
	if err := checkFlags(*nx, *ny, *iters, *convEvery, *verify, *initPart, *emul, *rate, lb); err != nil {
		log.Fatalf("heat: %v", err)
	}
	slows, err := parseSlow(*slowFlag)
	if err != nil {
		log.Fatalf("heat: %v", err)
	}

	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("heat: %v", err)
	}
	defer c.Close()
	me, p := c.Rank(), c.Size()
	fail := func(format string, args ...any) {
		log.Fatalf("heat: rank %d: "+format, append([]any{me}, args...)...)
	}
	if *nx < p {
		fail("%d rows for %d ranks: every rank needs a row", *nx, p)
	}
	speeds, err := parseSpeeds(*speedsFlag, p)
	if err != nil {
		log.Fatalf("heat: %v", err)
	}
	for _, s := range slows {
		if s.rank >= p {
			log.Fatalf("heat: -slow: rank %d does not exist (%d ranks)", s.rank, p)
		}
	}
	if p == 1 {
		lb.protocol = protoOff
	}
	if lb.probePoints == 0 {
		// About a tenth of an iteration's kernel, so that a probe every
		// -interval (10) iterations costs about 1%; but with the sleep
		// emulation each repetition lasts at least 1 ms at speed 1, or
		// the sleep's overshoot (about 0.1 ms) would dominate.
		lb.probePoints = max(4096, *nx**ny/p/10)
		if *emul == "sleep" {
			lb.probePoints = max(lb.probePoints, int(*rate*1e-3)*lb.probeReps)
		}
	}
	em := &emulator{mode: *emul, rate: *rate, me: me, speeds: speeds, slows: slows}

	// Start-up capacity probe: every rank times the fixed kernel; the
	// capacities are gathered everywhere; the rows follow them (or are
	// equal with -init equal), and the fastest node is the master.
	caps, err := comm.AllgathervSlice(ctx, c, []float64{em.probe(lb.probePoints, lb.probeReps)})
	if err != nil {
		fail("start-up probe: %v", err)
	}
	capacities := make([]float64, p)
	for r := range caps {
		capacities[r] = caps[r][0]
	}
	chi := relative(capacities)
	switch *initPart {
	case "equal":
		chi = relative(slices.Repeat([]float64{1}, p))
	case "speeds":
		chi = relative(speeds)
	}
	bounds := partition(*nx, chi, lb.complexity)
	initial := slices.Clone(bounds)
	master := 0
	for r := range capacities {
		if capacities[r] > capacities[master] {
			master = r
		}
	}
	blk := newBlock(*nx, *ny, me, bounds)
	bal := &balancer{cfg: lb, c: c, em: em, blk: blk, master: master}
	if me == master {
		bal.dec = NewDecider(lb.policy, chi)
	}

	if err := c.Barrier(ctx); err != nil {
		fail("%v", err)
	}
	start := time.Now()
	var ends []float64 // rank 0: seconds since start at the end of every iteration
	var traceBounds [][]int
	done, converged, lastChange := 0, false, math.Inf(1)
	for it := 0; it < *iters; it++ {
		em.it = it
		if lb.protocol == protoAASR && it > 0 && it%lb.interval == 0 && !bal.pending {
			if err := bal.activate(ctx, it); err != nil {
				fail("iteration %d: check_load(1): %v", it, err)
			}
		}
		if err := blk.exchange(ctx, c); err != nil {
			fail("iteration %d: halo exchange: %v", it, err)
		}
		var change float64
		d := em.run(blk.rows()*blk.ny, func() { change = blk.sweep() })
		bal.kernelDone(blk.rows()*blk.ny, d)
		blk.swap()
		done = it + 1
		last := done == *iters
		if *tol > 0 && (done%*convEvery == 0 || last) {
			m, err := comm.Allreduce(ctx, c, []float64{change}, comm.Max)
			if err != nil {
				fail("iteration %d: convergence test: %v", it, err)
			}
			lastChange = m[0]
			converged = m[0] < *tol
		}
		switch {
		case lb.protocol == protoSASR && done%lb.interval == 0 && !converged && !last:
			if err := bal.sync(ctx, it); err != nil {
				fail("iteration %d: check_load(0): %v", it, err)
			}
		case lb.protocol == protoAASR && bal.pending && (it >= bal.pendingAt || converged || last):
			if err := bal.complete(ctx, it, converged || last); err != nil {
				fail("iteration %d: check_load(2): %v", it, err)
			}
		}
		if me == 0 {
			ends = append(ends, time.Since(start).Seconds())
			if *trace != "" {
				traceBounds = append(traceBounds, slices.Clone(blk.bounds))
			}
		}
		if converged {
			break
		}
	}
	elapsed := time.Since(start).Seconds()

	// Statistics: the slowest rank's load-balancing times, and the
	// overruns of the emulation over all ranks.
	st, err := comm.Allreduce(ctx, c, []float64{bal.tMonitor.Seconds(), bal.tCheck.Seconds(), bal.tMigrate.Seconds(), elapsed}, comm.Max)
	if err != nil {
		fail("%v", err)
	}
	cnt, err := comm.Allreduce(ctx, c, []int64{int64(em.overruns), int64(em.kernels), int64(bal.rowsSent)}, comm.Sum)
	if err != nil {
		fail("%v", err)
	}

	// The check: gather the grid at rank 0 and compare with the serial
	// solution after the same number of iterations.
	doVerify := *verify == "on" || (*verify == "auto" && float64(*nx)*float64(*ny)*float64(done) <= 4e8)
	maxDiff := 0.0
	if doVerify {
		mine := blk.interior()
		if me == *corrupt && len(mine) > 0 {
			mine[len(mine)/2] += 1e-6
		}
		all, err := comm.GathervSlice(ctx, c, 0, mine)
		if err != nil {
			fail("gathering the grid: %v", err)
		}
		if me == 0 {
			var got []float64
			for _, part := range all {
				got = append(got, part...)
			}
			want := serial(*nx, *ny, done)
			if len(got) != len(want) {
				maxDiff = math.Inf(1)
			} else {
				for k := range want {
					maxDiff = math.Max(maxDiff, math.Abs(got[k]-want[k]))
				}
			}
		}
	}
	ok := maxDiff <= 1e-12
	if me == 0 {
		r := report{
			p: p, nx: *nx, ny: *ny, iters: *iters, done: done, converged: converged, tol: *tol, lastChange: lastChange,
			lb: lb, master: master, emulate: *emul, rate: *rate, speeds: speeds, slows: slows,
			initial: initial, final: blk.bounds, initMode: *initPart, ends: ends, warmup: *warmup, settle: *settle,
			overruns: int(cnt[0]), kernels: int(cnt[1]), rowsSent: int(cnt[2]), bal: bal,
			tMonitor: st[0], tCheck: st[1], tMigrate: st[2], elapsed: st[3],
			verified: doVerify, maxDiff: maxDiff, ok: ok,
		}
		r.print(os.Stdout)
		if *trace != "" {
			if err := writeTrace(*trace, ends, traceBounds, bal.reconfAt); err != nil {
				log.Printf("heat: -trace: %v", err)
			}
		}
	}
	if !ok {
		c.Close()
		os.Exit(1)
	}
}

func checkFlags(nx, ny, iters, convEvery int, verify, initPart, emul string, rate float64, lb lbConfig) error {
	switch {
	case nx < 1 || ny < 1:
		return fmt.Errorf("-rows and -cols must be at least 1")
	case iters < 1 || convEvery < 1:
		return fmt.Errorf("-iters and -conv-every must be at least 1")
	case verify != "on" && verify != "off" && verify != "auto":
		return fmt.Errorf("-verify %q: want on, off or auto", verify)
	case initPart != "probe" && initPart != "equal" && initPart != "speeds":
		return fmt.Errorf("-init %q: want probe, equal or speeds", initPart)
	case emul != "sleep" && emul != "work":
		return fmt.Errorf("-emulate %q: want sleep or work", emul)
	case !(rate > 0):
		return fmt.Errorf("-rate must be positive")
	case lb.protocol != protoOff && lb.protocol != protoSASR && lb.protocol != protoAASR:
		return fmt.Errorf("-lb %q: want aasr, sasr or off", lb.protocol)
	case lb.interval < 1 || lb.lag < 1:
		return fmt.Errorf("-interval and -lag must be at least 1")
	case lb.protocol == protoAASR && lb.lag > lb.interval:
		return fmt.Errorf("-lag %d exceeds -interval %d: the next check_load(1) would come before check_load(2)", lb.lag, lb.interval)
	case lb.monitor != "bench" && lb.monitor != "passive":
		return fmt.Errorf("-monitor %q: want bench or passive", lb.monitor)
	case lb.probePoints < 0 || lb.probeReps < 1:
		return fmt.Errorf("-probe-points must not be negative and -probe-reps must be at least 1")
	case !(lb.complexity > 0):
		return fmt.Errorf("-complexity must be positive")
	}
	if err := lb.policy.Validate(); err != nil {
		return fmt.Errorf("-policy: %w", err)
	}
	return nil
}

func rowCounts(b []int) []int {
	out := make([]int, len(b)-1)
	for i := range out {
		out[i] = b[i+1] - b[i]
	}
	return out
}

func writeTrace(path string, ends []float64, bounds [][]int, reconfAt []int) error {
	var sb strings.Builder
	sb.WriteString("iteration,end_s,duration_ms,rows,event\n")
	prev := 0.0
	for i, t := range ends {
		note := ""
		if slices.Contains(reconfAt, i) {
			note = "migration"
		}
		fmt.Fprintf(&sb, "%d,%.6f,%.3f,%s,%s\n", i, t, (t-prev)*1e3, strings.Trim(fmt.Sprint(rowCounts(bounds[i])), "[]"), note)
		prev = t
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}
