package netprobe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/hetcomm/hetcomm/collective"
)

// reprobe measures the suspects of the tournament again (see Suspects),
// in steps that rank 0 plans (reprobePlan) and broadcasts one at a time:
// a step is a set of directions that share no rank, measured at the same
// time with measureRate. It updates res (rank 0's; nil elsewhere) and
// returns the steps. It is collective.
func reprobe(ctx context.Context, p Port, res *Result, cfg Config, buf []byte) ([][]Pair, error) {
	me := p.Rank()
	var plan *reprobePlan
	if me == 0 {
		plan = newReprobePlan(res.Model, Schedule(p.Size()), cfg)
	}
	var steps [][]Pair
	for {
		step, err := shareStep(ctx, p, func() []reprobeItem { return plan.Next() }, "re-probe step")
		if err != nil {
			return nil, err
		}
		if len(step) == 0 {
			return steps, nil
		}
		fits := make([]Fit, len(step))
		for k, it := range step {
			switch me {
			case it.A:
				f, err := measureRate(ctx, p, it.B, cfg, buf, it.Bytes)
				if err != nil {
					return nil, fmt.Errorf("netprobe: probing %d->%d again: %w", me, it.B, err)
				}
				if me == 0 {
					fits[k] = f
				} else {
					var b [16]byte
					binary.LittleEndian.PutUint64(b[:], math.Float64bits(f.Latency))
					binary.LittleEndian.PutUint64(b[8:], math.Float64bits(f.Bandwidth))
					if err := p.Send(ctx, 0, tagFix, b[:]); err != nil {
						return nil, err
					}
				}
			case it.B:
				if _, err := echo(ctx, p, it.A, buf); err != nil {
					return nil, fmt.Errorf("netprobe: echoing %d->%d again: %w", it.A, me, err)
				}
			}
		}
		var pairs []Pair
		for _, it := range step {
			pairs = append(pairs, Pair{it.A, it.B})
		}
		steps = append(steps, pairs)
		if me != 0 {
			continue
		}
		for k, it := range step {
			if it.A == 0 {
				continue
			}
			b, err := p.Recv(ctx, it.A, tagFix)
			if err != nil {
				return nil, err
			}
			if len(b) != 16 {
				return nil, fmt.Errorf("netprobe: rank %d sent a malformed rate", it.A)
			}
			fits[k] = Fit{Latency: math.Float64frombits(binary.LittleEndian.Uint64(b)), Bandwidth: math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))}
		}
		plan.Done(pairs, fits)
	}
}

// reprobeItem is one direction of a re-probe step and the size its sweep
// should end with.
type reprobeItem struct {
	A, B  int
	Bytes int64
}

// reprobePlan decides, at rank 0, the steps that measure the suspects
// again. The tournament measured a suspect at the same time as the other
// probes of its round, and those are the ones it may have collided with
// (two clusters behind a backbone: the pairs of one round that crossed it
// together); so the suspects are first measured in steps that hold no two
// directions of one round and no rank twice. A step's result stands for a
// direction if the direction agrees with its ends now (it is no longer a
// suspect), or if it is still faster than they are and confirms its
// first measurement within 10% (sharing a link slows a probe, never
// speeds it up). Every other direction, and any the steps cannot hold
// together, is then measured alone, and that result stands. So a rate in
// the model was measured alone, or agrees with the rest of the model.
// Once more results of steps have fallen than stood, the suspects collide
// with one another more often than not, and the rest are measured alone
// at once.
type reprobePlan struct {
	m       *collective.Model
	cfg     Config
	round   map[Pair]int // the tournament round of each pair (A < B)
	first   map[Pair]float64
	pending []Pair // suspects not measured again yet
	alone   []Pair // to be measured alone
	// Results of directions measured at the same time as others that
	// stood, and that did not.
	stood, fell int
}

func newReprobePlan(m *collective.Model, rounds [][]Pair, cfg Config) *reprobePlan {
	pl := &reprobePlan{m: m, cfg: cfg.withDefaults(), round: map[Pair]int{}, first: map[Pair]float64{}}
	for ri, round := range rounds {
		for _, pr := range round {
			pl.round[Pair{min(pr.A, pr.B), max(pr.A, pr.B)}] = ri
		}
	}
	pl.pending = Suspects(m)
	for _, d := range pl.pending {
		pl.first[d] = m.Bandwidth[d.A][d.B]
	}
	return pl
}

// Next returns the next step (empty when done).
func (pl *reprobePlan) Next() []reprobeItem {
	var step []Pair
	if pl.fell > pl.stood {
		// The suspects collide with one another more often than not
		// (a core link that carries only one of their flows): steps
		// would only add to the directions measured alone.
		pl.alone, pl.pending = append(pl.alone, pl.pending...), nil
	}
	if len(pl.pending) > 0 {
		busy, rounds := map[int]bool{}, map[int]bool{}
		var rest []Pair
		for _, d := range pl.pending {
			r := pl.round[Pair{min(d.A, d.B), max(d.A, d.B)}]
			if busy[d.A] || busy[d.B] || rounds[r] {
				rest = append(rest, d)
				continue
			}
			busy[d.A], busy[d.B], rounds[r] = true, true, true
			step = append(step, d)
		}
		pl.pending = rest
	} else if len(pl.alone) > 0 {
		step, pl.alone = pl.alone[:1], pl.alone[1:]
	}
	items := make([]reprobeItem, 0, len(step))
	for _, d := range step {
		items = append(items, reprobeItem{A: d.A, B: d.B, Bytes: pl.largest(d)})
	}
	return items
}

// largest is the size that should take Config.MinTime (with a margin) at
// the rate the direction is expected to have: its ends' (expected), or
// what it showed if faster.
func (pl *reprobePlan) largest(d Pair) int64 {
	rate := max(expected(pl.m, d.A, d.B), pl.m.Bandwidth[d.A][d.B])
	if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
		return pl.cfg.MaxBytes
	}
	size := min(rate*pl.cfg.MinTime.Seconds()*1.2, rate*pl.cfg.Budget.Seconds())
	return min(max(int64(size), pl.cfg.MinLargest), pl.cfg.MaxBytes)
}

// Done records the results of the step Next returned last.
func (pl *reprobePlan) Done(step []Pair, fits []Fit) {
	for k, d := range step {
		bw := fits[k].Bandwidth
		if math.IsInf(bw, 0) || math.IsNaN(bw) || bw < 0 {
			bw = 0 // too fast to see: fixRates fills it in
		}
		pl.m.Bandwidth[d.A][d.B] = bw
		// The tiny round trips of the tournament may have queued behind
		// other probes' transfers: keep the shorter.
		if l := fits[k].Latency; l > 0 && l < pl.m.Latency[d.A][d.B] {
			pl.m.Latency[d.A][d.B] = l
		}
	}
	if len(step) < 2 {
		return
	}
	for _, d := range step {
		if pl.stands(d) {
			pl.stood++
		} else {
			pl.fell++
			pl.alone = append(pl.alone, d)
		}
	}
}

// stands tells whether a direction's rate, measured at the same time as
// others, can stand.
func (pl *reprobePlan) stands(d Pair) bool {
	if !suspect(pl.m, d.A, d.B) {
		return true
	}
	bw, ref, first := pl.m.Bandwidth[d.A][d.B], expected(pl.m, d.A, d.B), pl.first[d]
	return bw > 1.1*ref && first > 1.1*ref && bw >= first/1.1 && bw <= first*1.1
}
