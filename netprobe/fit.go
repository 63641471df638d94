package netprobe

import (
	"errors"
	"math"
	"sort"

	"github.com/hetcomm/hetcomm/collective"
)

// Sample is one measurement: a transfer of Bytes bytes took Seconds.
type Sample struct {
	Bytes   int64
	Seconds float64
}

// Fit is a fitted cost line: a message of m bytes costs Latency + m/Bandwidth.
type Fit struct {
	Latency   float64 // seconds
	Bandwidth float64 // bytes per second
}

// ErrFit reports samples that cannot be fitted.
var ErrFit = errors.New("netprobe: cannot fit the samples")

// FitLine fits t = T + m/B to the samples robustly:
//
//  1. for each size it keeps the fastest repetition (noise only ever adds
//     time: queueing, scheduling, a retransmission);
//  2. the slope (1/B) is the Theil-Sen estimator, the median of the slopes
//     between every pair of sizes, which ignores a minority of outliers;
//  3. the intercept T is the median of t - m/B over the sizes, clamped at 0.
//
// It needs at least two distinct sizes. A non-positive slope (a link so
// fast that the sizes used cannot see its rate) yields an infinite
// bandwidth, which callers should clamp.
func FitLine(samples []Sample) (Fit, error) {
	best := map[int64]float64{}
	for _, s := range samples {
		if s.Seconds <= 0 || math.IsNaN(s.Seconds) || math.IsInf(s.Seconds, 0) || s.Bytes < 0 {
			continue
		}
		if t, ok := best[s.Bytes]; !ok || s.Seconds < t {
			best[s.Bytes] = s.Seconds
		}
	}
	if len(best) < 2 {
		return Fit{}, ErrFit
	}
	sizes := make([]int64, 0, len(best))
	for m := range best {
		sizes = append(sizes, m)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	var slopes []float64
	for a := 0; a < len(sizes); a++ {
		for b := a + 1; b < len(sizes); b++ {
			dm := float64(sizes[b] - sizes[a])
			slopes = append(slopes, (best[sizes[b]]-best[sizes[a]])/dm)
		}
	}
	slope := collective.Median(slopes)
	var icpts []float64
	for _, m := range sizes {
		icpts = append(icpts, best[m]-slope*float64(m))
	}
	f := Fit{Latency: math.Max(0, collective.Median(icpts))}
	if slope <= 0 {
		f.Bandwidth = math.Inf(1)
	} else {
		f.Bandwidth = 1 / slope
	}
	return f, nil
}
