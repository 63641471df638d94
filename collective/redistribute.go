package collective

import (
	"fmt"
	"math"
)

// PlanRedistribution plans a cluster-to-cluster redistribution (the K-PBS
// problem of Jeannot and Wagner) with algo: GGP, OGGP, BruteForce or Auto.
//
// GGP and OGGP return synchronous steps of at most r.K transfers in which
// no sender and no receiver appears twice; a transfer may be split across
// steps (preemption), its pieces adding up exactly to r.Bytes[i][j]. The
// planners work on durations normalised by the setup time and rounded up
// to whole units of a byte quantum: one unit is round(r.Setup*r.Rate)
// bytes, at least one byte, and coarse enough that the normalised total
// stays below 2^40 units. So a transfer shorter than the setup time is
// never split, and with r.Setup = 0 the unit is one byte. Each piece of a
// unit count is mapped back to bytes proportionally, with floors of
// cumulative sums, so that no byte is lost or invented.
//
// A step lasts r.Setup plus its longest transfer computed from the real
// byte counts; Plan.Predicted is the sum of the steps and Plan.LowerBound
// is [RedistributionLowerBound]. GGP and OGGP are 2-approximations.
//
// BruteForce posts every transfer at once, ignoring k and the one-port
// rule: one step holding every non-zero pair, whose duration is the setup
// time plus the completion time of the fluid model described at
// [BruteForceGoodput]. It is a reference point, the way Gloo or a plain
// MPI_Alltoallv would move the data, not a K-PBS schedule, and only a plan
// labelled BruteForce may take that shape ([ValidateRedistribution]).
// Paced posts every transfer at once too, in one step, but paced: each
// transfer's Rate is its bytes over the bandwidth part of the K-PBS bound
// (the largest of any node's bytes and the total over k, at r.Rate), so
// that no node and not the backbone is ever asked for more than it
// carries, and every transfer ends together at that bound (the MADD
// allocation of coflow scheduling). Its step lasts r.Setup plus the bound.
// Auto keeps the plan with the lowest prediction: brute force wins when
// the setup time dominates the transfers; Auto does not consider Paced,
// which needs an executor that paces.
//
// All planners are deterministic; opt is not used.
func PlanRedistribution(r *Redistribution, algo Algorithm, opt Options) (*Plan, error) {
	if r == nil {
		return nil, fmt.Errorf("collective: nil redistribution")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if algo != Paced {
		if err := checkAlgo(KindRedistribute, algo); err != nil {
			return nil, err
		}
	}
	if algo == Auto {
		return planAuto(KindRedistribute, r.Senders+r.Receivers, func(a Algorithm) (*Plan, error) {
			return planRedistribution(r, a)
		})
	}
	return planRedistribution(r, algo)
}

func planRedistribution(r *Redistribution, algo Algorithm) (*Plan, error) {
	var steps [][]StepTransfer
	switch algo {
	case BruteForce, Paced:
		var all []StepTransfer
		for i, row := range r.Bytes {
			for j, b := range row {
				if b > 0 {
					all = append(all, StepTransfer{Src: i, Dst: j, Bytes: b})
				}
			}
		}
		if len(all) > 0 {
			steps = [][]StepTransfer{all}
		}
		if algo == Paced && len(all) > 0 {
			span := redistPacedSpan(r, all)
			for x := range all {
				all[x].Rate = pacedRate(all[x].Bytes, span)
			}
		}
	case GGP, OGGP:
		var err error
		if steps, err = kpbsSchedule(r, algo == OGGP); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("collective: algorithm %q does not plan redistributions", algo)
	}
	p := &Plan{Kind: KindRedistribute, Algorithm: algo, Ranks: r.Senders + r.Receivers,
		LowerBound: RedistributionLowerBound(r)}
	for _, ts := range steps {
		d := redistStepDuration(r, algo, ts)
		p.Steps = append(p.Steps, Step{Duration: d, Transfers: ts})
		p.Predicted += d
	}
	return p, nil
}

// redistStepDuration is the duration of one step: the setup time plus the
// longest transfer, or for brute force plus the fluid model's completion.
func redistStepDuration(r *Redistribution, algo Algorithm, ts []StepTransfer) float64 {
	switch algo {
	case BruteForce:
		return r.Setup + redistFluid(r.Senders, r.Receivers, r.K, r.Rate, ts)
	case Paced:
		return r.Setup + redistPacedSpan(r, ts)
	}
	var longest int64
	for _, t := range ts {
		longest = max(longest, t.Bytes)
	}
	return r.Setup + float64(longest)/r.Rate
}

// redistPacedSpan is the bandwidth part of the K-PBS bound of the
// transfers ts: the largest of any node's bytes and the total over k, at
// r.Rate, in seconds.
func redistPacedSpan(r *Redistribution, ts []StepTransfer) float64 {
	byS := make([]float64, r.Senders)
	byR := make([]float64, r.Receivers)
	total := 0.0
	for _, t := range ts {
		byS[t.Src] += float64(t.Bytes)
		byR[t.Dst] += float64(t.Bytes)
		total += float64(t.Bytes)
	}
	w := total / float64(r.K)
	for _, b := range byS {
		w = math.Max(w, b)
	}
	for _, b := range byR {
		w = math.Max(w, b)
	}
	return w / r.Rate
}

// RedistributionLowerBound returns the K-PBS lower bound of Cohen, Jeannot
// and Padoy in seconds:
//
//	beta * max(Delta(G), ceil(|E|/k)) + max(W(G), P(G)/k)
//
// where G is the bipartite graph of the non-zero transfers, Delta(G) its
// largest degree, |E| its number of edges, W(G) the largest total duration
// (bytes / rate) of any node's transfers and P(G) the total duration of
// all of them. Every schedule needs at least that many steps, each costing
// beta, and its steps' longest transfers add up to at least that much.
// It returns NaN when r is not valid.
func RedistributionLowerBound(r *Redistribution) float64 {
	if r == nil || r.Validate() != nil {
		return math.NaN()
	}
	degS := make([]int, r.Senders)
	degR := make([]int, r.Receivers)
	byS := make([]float64, r.Senders)
	byR := make([]float64, r.Receivers)
	edges, total := 0, 0.0
	for i, row := range r.Bytes {
		for j, b := range row {
			if b > 0 {
				edges++
				degS[i]++
				degR[j]++
				byS[i] += float64(b)
				byR[j] += float64(b)
				total += float64(b)
			}
		}
	}
	delta, w := 0, 0.0
	for i := range degS {
		delta = max(delta, degS[i])
		w = math.Max(w, byS[i])
	}
	for j := range degR {
		delta = max(delta, degR[j])
		w = math.Max(w, byR[j])
	}
	steps := max(delta, (edges+r.K-1)/r.K)
	return r.Setup*float64(steps) + math.Max(w, total/float64(r.K))/r.Rate
}

// SimulateRedistribution evaluates a redistribution plan: steps are
// synchronous and each costs the setup time plus its longest transfer at
// r.Rate (brute-force plans: plus the fluid model's completion). It
// returns a copy of p with every step duration, Predicted and LowerBound
// recomputed. It checks only what it needs to run the plan (indices in
// range, positive byte counts); [ValidateRedistribution] checks the rest.
func SimulateRedistribution(r *Redistribution, p *Plan) (*Plan, error) {
	if r == nil {
		return nil, fmt.Errorf("collective: nil redistribution")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := redistCheckShape(r, p); err != nil {
		return nil, err
	}
	q := *p
	q.Steps = nil
	q.Predicted = 0
	q.LowerBound = RedistributionLowerBound(r)
	for s, st := range p.Steps {
		for x, t := range st.Transfers {
			if err := redistCheckTransfer(r, s, x, t); err != nil {
				return nil, err
			}
		}
		ts := append([]StepTransfer(nil), st.Transfers...)
		d := redistStepDuration(r, p.Algorithm, ts)
		q.Steps = append(q.Steps, Step{Duration: d, Transfers: ts})
		q.Predicted += d
	}
	return &q, nil
}

// redistCheckShape checks a plan's header against r.
func redistCheckShape(r *Redistribution, p *Plan) error {
	if p == nil {
		return fmt.Errorf("collective: nil plan")
	}
	if p.Kind != KindRedistribute {
		return fmt.Errorf("collective: plan kind %q, want %q", p.Kind, KindRedistribute)
	}
	if KindOf(p.Algorithm) != KindRedistribute && p.Algorithm != Paced {
		return fmt.Errorf("collective: plan algorithm %q is not a redistribution planner (want one of %v)", p.Algorithm, Algorithms(KindRedistribute))
	}
	if p.Ranks != r.Senders+r.Receivers {
		return fmt.Errorf("collective: plan has %d ranks, want %d senders + %d receivers", p.Ranks, r.Senders, r.Receivers)
	}
	return nil
}

// redistCheckTransfer checks one transfer's indices and size.
func redistCheckTransfer(r *Redistribution, s, x int, t StepTransfer) error {
	switch {
	case t.Src < 0 || t.Src >= r.Senders:
		return fmt.Errorf("collective: step %d transfer %d: sender %d out of range [0,%d)", s, x, t.Src, r.Senders)
	case t.Dst < 0 || t.Dst >= r.Receivers:
		return fmt.Errorf("collective: step %d transfer %d: receiver %d out of range [0,%d)", s, x, t.Dst, r.Receivers)
	case t.Bytes <= 0:
		return fmt.Errorf("collective: step %d transfer %d (%d->%d): %d bytes, must be positive", s, x, t.Src, t.Dst, t.Bytes)
	}
	return nil
}

// pacedRate is the rate of a transfer of b bytes paced to end after span
// seconds; 0 (unpaced) when span is 0.
func pacedRate(b int64, span float64) float64 {
	if span <= 0 {
		return 0
	}
	return float64(b) / span
}

// redistClose reports whether a and b agree to a relative 1e-9.
func redistClose(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// ValidateRedistribution checks that p is a valid plan of r and returns a
// precise error when it is not:
//
//   - the header: kind redistribute, a redistribution algorithm, senders +
//     receivers ranks;
//   - every transfer: indices in range, a positive byte count;
//   - every step: not empty, at most r.K transfers, no sender and no
//     receiver twice (K-PBS plans only: a brute-force or paced plan is a
//     single step holding every non-zero pair once, whole);
//   - rates: a paced plan's transfers each at its bytes over the step's
//     span (see PlanRedistribution), every other plan's at 0;
//   - delivery: for every pair, the bytes of its pieces add up exactly to
//     the matrix entry (nothing missing, nothing duplicated, nothing for a
//     pair that has no data);
//   - times: every step's duration matches the byte counts (setup plus the
//     longest transfer at r.Rate; for brute force, setup plus the fluid
//     model), Predicted is their sum and LowerBound is
//     [RedistributionLowerBound], each to a relative 1e-9.
func ValidateRedistribution(r *Redistribution, p *Plan) error {
	if r == nil {
		return fmt.Errorf("collective: nil redistribution")
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if err := redistCheckShape(r, p); err != nil {
		return err
	}
	brute := p.Algorithm == BruteForce || p.Algorithm == Paced
	shape := "brute-force"
	if p.Algorithm == Paced {
		shape = "paced"
	}
	pairs := 0
	for _, row := range r.Bytes {
		for _, b := range row {
			if b > 0 {
				pairs++
			}
		}
	}
	if brute && len(p.Steps) != min(pairs, 1) {
		return fmt.Errorf("collective: %s plan has %d steps, want %d (every transfer at once)", shape, len(p.Steps), min(pairs, 1))
	}
	type pair struct{ src, dst int }
	got := make(map[pair]int64, pairs)
	total := 0.0
	senders := make(map[int]int)
	receivers := make(map[int]int)
	for s, st := range p.Steps {
		if len(st.Transfers) == 0 {
			return fmt.Errorf("collective: step %d has no transfers", s)
		}
		if !brute && len(st.Transfers) > r.K {
			return fmt.Errorf("collective: step %d has %d transfers, more than k = %d", s, len(st.Transfers), r.K)
		}
		clear(senders)
		clear(receivers)
		span := 0.0
		if p.Algorithm == Paced {
			span = redistPacedSpan(r, st.Transfers)
		}
		for x, t := range st.Transfers {
			if err := redistCheckTransfer(r, s, x, t); err != nil {
				return err
			}
			if want := pacedRate(t.Bytes, span); !redistClose(t.Rate, want) {
				return fmt.Errorf("collective: step %d transfer %d (%d->%d): rate %v, want %v", s, x, t.Src, t.Dst, t.Rate, want)
			}
			if !brute {
				if y, dup := senders[t.Src]; dup {
					return fmt.Errorf("collective: step %d: sender %d takes part in transfers %d and %d", s, t.Src, y, x)
				}
				if y, dup := receivers[t.Dst]; dup {
					return fmt.Errorf("collective: step %d: receiver %d takes part in transfers %d and %d", s, t.Dst, y, x)
				}
				senders[t.Src], receivers[t.Dst] = x, x
			}
			k := pair{t.Src, t.Dst}
			prev, seen := got[k]
			want := r.Bytes[t.Src][t.Dst]
			if brute && seen {
				return fmt.Errorf("collective: %s plan sends pair %d->%d twice (step %d transfer %d)", shape, t.Src, t.Dst, s, x)
			}
			if t.Bytes > want-prev {
				if want == 0 {
					return fmt.Errorf("collective: step %d transfer %d: pair %d->%d has no data in the matrix, plan sends %d bytes", s, x, t.Src, t.Dst, t.Bytes)
				}
				return fmt.Errorf("collective: step %d transfer %d: pair %d->%d receives %d bytes more than the matrix's %d (duplicated delivery)", s, x, t.Src, t.Dst, prev+t.Bytes-want, want)
			}
			got[k] = prev + t.Bytes
		}
		want := redistStepDuration(r, p.Algorithm, st.Transfers)
		if !redistClose(st.Duration, want) {
			return fmt.Errorf("collective: step %d: duration %v s inconsistent with its bytes (setup %v s + longest transfer: %v s)", s, st.Duration, r.Setup, want)
		}
		total += st.Duration
	}
	for i, row := range r.Bytes {
		for j, b := range row {
			if d := got[pair{i, j}]; d != b {
				return fmt.Errorf("collective: pair %d->%d: plan delivers %d of its %d bytes (%d missing)", i, j, d, b, b-d)
			}
		}
	}
	if !redistClose(p.Predicted, total) {
		return fmt.Errorf("collective: predicted completion %v s, but the steps add up to %v s", p.Predicted, total)
	}
	if lb := RedistributionLowerBound(r); !redistClose(p.LowerBound, lb) {
		return fmt.Errorf("collective: lower bound %v s, want %v s", p.LowerBound, lb)
	}
	return nil
}
