package netprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/hetcomm/hetcomm/collective"
)

// Ranks that all run on one host share its CPUs and memory: no network
// lies between them, every pair is alike, and measuring pairs says more
// about the scheduler than about links. Above oneHostAll ranks the probe
// measures one pair (ranks 0 and 1, a sweep each way) and gives every
// pair the mean. Measuring them all took longer than the start-up timeout
// with 64 ranks on two cores: each flow waited for CPU among 64
// processes. Up to oneHostAll ranks every pair is still measured, as
// before.
const oneHostAll = 8

// oneHost reports whether cfg.Hosts puts all n ranks on one named host.
func oneHost(cfg Config, n int) bool {
	if len(cfg.Hosts) != n || n == 0 || cfg.Hosts[0] == "" {
		return false
	}
	for _, h := range cfg.Hosts {
		if h != cfg.Hosts[0] {
			return false
		}
	}
	return true
}

// probeOneHost measures ranks 0 and 1 against each other and returns the
// model in which every pair has their mean start-up time and rate. The
// ranks share one clock, so every offset is 0.
func probeOneHost(ctx context.Context, p Port, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	n, me := p.Size(), p.Rank()
	start := time.Now()
	if err := p.Barrier(ctx); err != nil {
		return nil, err
	}
	var fits []Fit
	if me <= 1 {
		buf := make([]byte, cfg.MaxBytes)
		peer := 1 - me
		for _, sender := range []int{0, 1} {
			if sender == me {
				f, _, err := measure(ctx, p, peer, cfg, buf)
				if err != nil {
					return nil, fmt.Errorf("netprobe: probing %d->%d: %w", me, peer, err)
				}
				fits = append(fits, f)
			} else if _, err := echo(ctx, p, peer, buf); err != nil {
				return nil, fmt.Errorf("netprobe: echoing %d->%d: %w", peer, me, err)
			}
		}
	}
	var dir []byte
	if me == 1 {
		b, err := json.Marshal(fits)
		if err != nil {
			return nil, err
		}
		if err := p.Send(ctx, 0, tagData, b); err != nil {
			return nil, err
		}
	}
	if me == 0 {
		b, err := p.Recv(ctx, 1, tagData)
		if err != nil {
			return nil, err
		}
		var theirs []Fit
		if err := json.Unmarshal(b, &theirs); err != nil || len(theirs) != 1 {
			return nil, fmt.Errorf("netprobe: rank 1 sent a malformed measurement")
		}
		res := oneHostResult(n, append(fits, theirs...))
		res.Seconds = time.Since(start).Seconds()
		if dir, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	dir, err := p.Bcast(ctx, 0, dir)
	if err != nil {
		return nil, err
	}
	return DecodeResult(dir, n)
}

// oneHostResult is the model of n ranks of one host whose pairs all
// behave as the mean of fits. A rate too fast to measure (infinite) is
// left to fixRates (10 GB/s when nothing else was seen).
func oneHostResult(n int, fits []Fit) *Result {
	lat, rate, k := 0.0, 0.0, 0
	for _, f := range fits {
		lat += f.Latency
		if !math.IsInf(f.Bandwidth, 0) && f.Bandwidth > 0 {
			rate += f.Bandwidth
			k++
		}
	}
	lat /= float64(len(fits))
	if k > 0 {
		rate /= float64(k)
	}
	m := &collective.Model{Latency: collective.Matrix(n, lat), Bandwidth: collective.Matrix(n, rate)}
	fixRates(m)
	return &Result{Model: m, Offsets: make([]float64, n)}
}
