package netprobe

import (
	"math"
	"slices"

	"github.com/hetcomm/hetcomm/collective"
)

// Drift watches the rates a rank observes on its incoming links during
// collectives and proposes model updates when they drift from the model
// (the total-exchange paper's section 6.3: adapt when the network changes).
// Once MinSamples observations in a row find a source's rate off the
// model's by more than Threshold (relative), it proposes the median of
// that run's most recent observations: one sample that straddled the
// change (half at the old rate, half at the new) does not pull the
// proposal towards the old rate.
// It is pure: the caller feeds it observations and applies proposals.
type Drift struct {
	// Threshold is the relative difference that counts as drift
	// (0.3: 30%).
	Threshold float64
	// MinSamples is how many observations a proposal needs.
	MinSamples int
	// MinBytes and MinSeconds ignore transfers too small or too short to
	// measure a rate.
	MinBytes   int64
	MinSeconds float64

	links map[int]*driftLink
}

type driftLink struct {
	// rates of the current run of drifted observations, the most recent
	// MinSamples of them
	rates []float64
}

// NewDrift returns a detector with the documented defaults: 30%, 3
// samples, transfers of at least 256 KiB and 5 ms.
func NewDrift() *Drift {
	return &Drift{Threshold: 0.3, MinSamples: 3, MinBytes: 256 << 10, MinSeconds: 0.005}
}

// Observe records that bytes from src arrived in seconds (from the first
// payload byte to the last, so latency is not in it) while the model says
// the link's rate is model bytes/s. Observations that cannot measure a rate
// are ignored.
func (d *Drift) Observe(src int, bytes int64, seconds, model float64) {
	if bytes < d.MinBytes || seconds < d.MinSeconds || !(model > 0) || math.IsInf(model, 0) {
		return
	}
	rate := float64(bytes) / seconds
	if d.links == nil {
		d.links = map[int]*driftLink{}
	}
	l := d.links[src]
	if l == nil {
		l = &driftLink{}
		d.links[src] = l
	}
	if math.Abs(rate/model-1) <= d.Threshold {
		l.rates = l.rates[:0] // an observation that agrees with the model ends the run
		return
	}
	// Only the current run of drifted observations counts: the rate the
	// link has now, not a blend with what it had before.
	l.rates = append(l.rates, rate)
	if k := max(d.MinSamples, 1); len(l.rates) > k {
		l.rates = slices.Delete(l.rates, 0, len(l.rates)-k)
	}
}

// Proposals returns, per source whose rate drifted, the rate to put in the
// model, and forgets those sources (they start over against the new
// model).
func (d *Drift) Proposals() map[int]float64 {
	out := map[int]float64{}
	for src, l := range d.links {
		if len(l.rates) > 0 && len(l.rates) >= d.MinSamples {
			out[src] = collective.Median(l.rates)
			delete(d.links, src)
		}
	}
	return out
}
