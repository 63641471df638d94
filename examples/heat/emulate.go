package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Heterogeneous and varying compute speeds are emulated, because the
// ranks of one machine share its cores (and, here, its 2 cores with
// other jobs).
//
// In the sleep mode (the default) a rank's kernel really computes its
// sweep and then sleeps until the sweep has taken points/(rate*speed)
// seconds, where speed is the rank's current relative speed: its -speeds
// entry divided by the factor of every -slow that is active. As long as
// the real computation is much shorter than that (the summary counts the
// overruns), iteration times follow the emulated speeds and the ranks do
// not compete for the CPU, so a 2-core machine can emulate 4 nodes.
//
// In the work mode the kernel is repeated round(1/speed) times, so a rank
// that is 2x slower does 2x the work; speeds are then real and only
// meaningful when every rank has a core of its own.

// slowdown makes one rank factor times slower from iteration from on,
// until iteration until (exclusive; -1: to the end).
type slowdown struct {
	rank        int
	factor      float64
	from, until int
}

func (s slowdown) String() string {
	until := ""
	if s.until >= 0 {
		until = fmt.Sprintf(" until iteration %d", s.until)
	}
	return fmt.Sprintf("rank %d %gx slower from iteration %d%s", s.rank, s.factor, s.from, until)
}

// parseSlow parses RANK:FACTOR:FROM[:UNTIL] items separated by commas.
func parseSlow(s string) ([]slowdown, error) {
	var out []slowdown
	if s == "" {
		return nil, nil
	}
	for _, item := range strings.Split(s, ",") {
		f := strings.Split(item, ":")
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("-slow %q: want RANK:FACTOR:FROM[:UNTIL]", item)
		}
		var sd slowdown
		var err error
		if sd.rank, err = strconv.Atoi(f[0]); err != nil || sd.rank < 0 {
			return nil, fmt.Errorf("-slow %q: bad rank %q", item, f[0])
		}
		if sd.factor, err = strconv.ParseFloat(f[1], 64); err != nil || !(sd.factor > 0) || math.IsInf(sd.factor, 0) {
			return nil, fmt.Errorf("-slow %q: bad factor %q (want a positive number, 2 = half speed)", item, f[1])
		}
		if sd.from, err = strconv.Atoi(f[2]); err != nil || sd.from < 0 {
			return nil, fmt.Errorf("-slow %q: bad first iteration %q", item, f[2])
		}
		sd.until = -1
		if len(f) == 4 {
			if sd.until, err = strconv.Atoi(f[3]); err != nil || sd.until <= sd.from {
				return nil, fmt.Errorf("-slow %q: bad last iteration %q (must exceed %d)", item, f[3], sd.from)
			}
		}
		out = append(out, sd)
	}
	return out, nil
}

// parseSpeeds parses the comma-separated relative speeds of the ranks;
// "" means 1 for every rank.
func parseSpeeds(s string, p int) ([]float64, error) {
	out := make([]float64, p)
	for i := range out {
		out[i] = 1
	}
	if s == "" {
		return out, nil
	}
	f := strings.Split(s, ",")
	if len(f) != p {
		return nil, fmt.Errorf("-speeds %q: %d values for %d ranks", s, len(f), p)
	}
	for i, x := range f {
		v, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("-speeds: bad value %q for rank %d", x, i)
		}
		out[i] = v
	}
	return out, nil
}

// speedAt is rank r's relative speed at iteration it.
func speedAt(speeds []float64, slows []slowdown, r, it int) float64 {
	s := speeds[r]
	for _, sd := range slows {
		if sd.rank == r && it >= sd.from && (sd.until < 0 || it < sd.until) {
			s /= sd.factor
		}
	}
	return s
}

// emulator runs this rank's kernels at its emulated speed.
type emulator struct {
	mode     string  // sleep or work
	rate     float64 // sleep mode: points per second at speed 1
	me       int
	speeds   []float64
	slows    []slowdown
	it       int // the current iteration, for the slowdowns
	overruns int // sleep mode: kernels whose real computation exceeded the emulated time
	kernels  int
}

func (e *emulator) speed() float64 { return speedAt(e.speeds, e.slows, e.me, e.it) }

// run runs kernel, which updates points grid points, at the emulated
// speed and returns how long it took.
func (e *emulator) run(points int, kernel func()) time.Duration {
	t0 := time.Now()
	e.kernels++
	switch e.mode {
	case "work":
		reps := max(1, int(math.Round(1/e.speed())))
		for k := 0; k < reps; k++ {
			kernel()
		}
	default:
		kernel()
		target := time.Duration(float64(points) / (e.rate * e.speed()) * float64(time.Second))
		if el := time.Since(t0); el < target {
			preciseSleep(target - el)
		} else {
			e.overruns++
		}
	}
	return time.Since(t0)
}

// probe is the capacity micro-benchmark (the paper's active load
// monitoring): a fixed Jacobi sweep of about points grid points on a
// scratch grid, run at the emulated speed, reps times; it returns the
// best measured capacity in points per second (the fastest repetition is
// the one least disturbed by the scheduler: a sleep only ever overshoots).
func (e *emulator) probe(points, reps int) float64 {
	const w = 130 // 128 interior columns
	rows := max(1, points/reps/(w-2))
	u := make([]float64, (rows+2)*w)
	v := make([]float64, (rows+2)*w)
	for j := range u[:w] {
		u[j] = topTemperature
	}
	best := 0.0
	for k := 0; k < reps; k++ {
		el := e.run(rows*(w-2), func() { sweepRows(u, v, w, 1, rows) })
		best = max(best, float64(rows*(w-2))/el.Seconds())
	}
	return best
}
