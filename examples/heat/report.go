package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// report is what rank 0 prints at the end.
type report struct {
	p, nx, ny, iters, done int
	converged              bool
	tol, lastChange        float64

	lb       lbConfig
	master   int
	emulate  string
	rate     float64
	speeds   []float64
	slows    []slowdown
	initial  []int
	final    []int
	initMode string

	ends             []float64
	warmup, settle   int
	overruns         int
	kernels          int
	rowsSent         int
	bal              *balancer
	tMonitor, tCheck float64
	tMigrate         float64
	elapsed          float64

	verified bool
	maxDiff  float64
	ok       bool
}

// rateOver is the iteration rate over iterations a..b-1, from rank 0's
// clock; NaN if the window is empty.
func (r *report) rateOver(a, b int) float64 {
	b = min(b, len(r.ends))
	if a < 0 || b-a < 1 {
		return math.NaN()
	}
	t0 := 0.0
	if a > 0 {
		t0 = r.ends[a-1]
	}
	return float64(b-a) / (r.ends[b-1] - t0)
}

// totalSpeed is the sum of the ranks' emulated speeds at iteration it.
func (r *report) totalSpeed(it int) float64 {
	s := 0.0
	for rank := range r.speeds {
		s += speedAt(r.speeds, r.slows, rank, it)
	}
	return s
}

func (r *report) print(w io.Writer) {
	status := "OK"
	if !r.ok {
		status = "FAILED"
	}
	stop := fmt.Sprintf("%d iterations (fixed)", r.done)
	if r.tol > 0 {
		if r.converged {
			stop = fmt.Sprintf("converged in %d iterations (largest change %.2e < %.0e)", r.done, r.lastChange, r.tol)
		} else {
			stop = fmt.Sprintf("%d iterations, not converged (largest change %.2e, tol %.0e)", r.done, r.lastChange, r.tol)
		}
	}
	fmt.Fprintf(w, "heat: %s: %d ranks, %dx%d grid, %s, %.2f s\n", status, r.p, r.nx, r.ny, stop, r.elapsed)
	switch {
	case !r.verified:
		fmt.Fprintf(w, "heat: check skipped (grid too large for the serial solution; -verify on forces it)\n")
	case r.ok:
		fmt.Fprintf(w, "heat: check: equal to the serial solution after %d iterations (largest difference %.1e)\n", r.done, r.maxDiff)
	default:
		fmt.Fprintf(w, "heat: check FAILED: differs from the serial solution by up to %.3g\n", r.maxDiff)
	}

	em := fmt.Sprintf("sleep emulation, %.3g points/s at speed 1, %d of %d kernels overran their emulated time", r.rate, r.overruns, r.kernels)
	if r.emulate == "work" {
		em = "work emulation (the kernel repeated 1/speed times)"
	}
	var sl []string
	for _, s := range r.slows {
		sl = append(sl, s.String())
	}
	if len(sl) == 0 {
		sl = []string{"no slowdown"}
	}
	fmt.Fprintf(w, "heat: speeds %v, %s; %s\n", r.speeds, em, strings.Join(sl, "; "))

	lbDesc := "off (static partition)"
	if r.lb.protocol != protoOff {
		mon := fmt.Sprintf("capacity micro-benchmark of %d points", r.lb.probePoints)
		if r.lb.monitor == "passive" {
			mon = "passive monitoring (kernel times)"
		}
		lbDesc = fmt.Sprintf("%s, %s, every %d iterations", strings.ToUpper(r.lb.protocol), r.lb.policy, r.lb.interval)
		if r.lb.protocol == protoAASR {
			lbDesc += fmt.Sprintf(" (lag %d)", r.lb.lag)
		}
		lbDesc += fmt.Sprintf(", %s, master rank %d", mon, r.master)
	}
	fmt.Fprintf(w, "heat: load balancing: %s\n", lbDesc)
	fmt.Fprintf(w, "heat: rows: initial %v (%s), final %v; %d checks, %d reconfigurations at iterations %v, %d rows moved\n",
		rowCounts(r.initial), r.initMode, rowCounts(r.final), r.bal.checks, r.bal.reconfigs, r.bal.reconfAt, r.rowsSent)
	if r.lb.protocol != protoOff {
		fmt.Fprintf(w, "heat: load-balancing time (slowest rank): monitoring %.3f s, checks %.3f s, migration %.3f s\n", r.tMonitor, r.tCheck, r.tMigrate)
	}

	// Rates: before the first slowdown (after the warm-up), after it (all
	// of it, and once settled), and the ideal rate after it: the rate
	// before times the fraction of the total speed that is left, which a
	// perfectly balanced partition with no overheads would reach.
	from, until := len(r.ends), len(r.ends)
	if len(r.slows) > 0 {
		from = r.slows[0].from
		for _, s := range r.slows {
			from = min(from, s.from)
		}
		until = len(r.ends)
		for _, s := range r.slows {
			if s.from == from && s.until >= 0 {
				until = min(until, s.until)
			}
		}
	}
	before := r.rateOver(min(r.warmup, from-1), from)
	after := r.rateOver(from, until)
	settled := r.rateOver(from+r.settle, until)
	ideal := math.NaN()
	if r.emulate == "sleep" && from < len(r.ends) {
		ideal = before * r.totalSpeed(from) / r.totalSpeed(min(r.warmup, from-1))
	}
	if len(r.slows) == 0 || from >= len(r.ends) {
		fmt.Fprintf(w, "heat: iteration rate %.2f it/s (iterations %d..%d)\n", before, min(r.warmup, from-1), from-1)
	} else {
		fmt.Fprintf(w, "heat: iteration rate: before the slowdown %.2f it/s (iterations %d..%d); after %.2f it/s (%d..%d), settled %.2f it/s (%d..%d); ideal after %.2f it/s\n",
			before, min(r.warmup, from-1), from-1, after, from, until-1, settled, from+r.settle, until-1, ideal)
		fmt.Fprintf(w, "heat: after/before %.3f, settled/before %.3f, after/ideal %.3f, settled/ideal %.3f\n",
			after/before, settled/before, after/ideal, settled/ideal)
	}
	policy := "-"
	if r.lb.protocol != protoOff {
		policy = string(r.lb.policy.Policy)
	}
	fmt.Fprintf(w, "heat-result: lb=%s policy=%s monitor=%s before=%.4f after=%.4f settled=%.4f ideal=%.4f reconfigs=%d checks=%d overruns=%d ok=%v\n",
		r.lb.protocol, policy, r.lb.monitor, before, after, settled, ideal, r.bal.reconfigs, r.bal.checks, r.overruns, r.ok)
}
