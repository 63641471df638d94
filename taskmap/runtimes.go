package taskmap

import (
	"fmt"
	"math/rand/v2"
)

// RunTimes are the values one execution really takes, where the planners
// only know the expected values.
type RunTimes struct {
	// Exec[i][j] is the run-time execution time of subtask i if it runs
	// on machine j.
	Exec [][]float64 `json:"exec"`
	// Comm[d] multiplies the modelled transfer time of data item d,
	// whichever machines it travels between (1: as modelled). nil means 1
	// for every item.
	Comm []float64 `json:"comm,omitempty"`
}

// Validate checks the shape and values against the problem.
func (rt *RunTimes) Validate(p *Problem) error {
	if rt == nil {
		return invalid("nil run-time values")
	}
	if len(rt.Exec) != p.n {
		return invalid("run-time values for %d tasks, the problem has %d", len(rt.Exec), p.n)
	}
	for i, row := range rt.Exec {
		if len(row) != p.m {
			return invalid("run-time values of %s: %d machines, want %d", p.g.taskName(i), len(row), p.m)
		}
		for j, e := range row {
			if !finiteNonNeg(e) {
				return invalid("run-time execution time of %s on machine %d is %v", p.g.taskName(i), j, e)
			}
		}
	}
	if rt.Comm != nil {
		if len(rt.Comm) != len(p.g.Items) {
			return invalid("run-time communication factors for %d items, the problem has %d", len(rt.Comm), len(p.g.Items))
		}
		for d, f := range rt.Comm {
			if !finiteNonNeg(f) {
				return invalid("run-time communication factor of %s is %v", p.g.itemName(d), f)
			}
		}
	}
	return nil
}

func (rt *RunTimes) values(p *Problem) *values {
	return &values{p: p, exec: rt.Exec, commScale: rt.Comm}
}

// Expected returns run-time values equal to the expected ones.
func Expected(p *Problem) *RunTimes {
	rt := &RunTimes{Exec: make([][]float64, p.n)}
	for i := range rt.Exec {
		rt.Exec[i] = append([]float64(nil), p.g.Tasks[i].Exec...)
	}
	return rt
}

// DistKind names a distribution of run-time values (section 4.3).
type DistKind string

// The distributions of section 4.3.
const (
	// Erlang2 draws an Erlang distribution of shape 2 (the sum of two
	// exponentials) with the expected value as its mean. The paper's
	// default.
	Erlang2 DistKind = "erlang2"
	// Uniform draws tau*(100 - a + 2a*u)/100, u uniform in [0,1], with a
	// = Distribution.Neg (= Pos).
	Uniform DistKind = "uniform"
	// Skewed draws tau*(100 - a1 + (a1 + a2)*u)/100 with a1 =
	// Distribution.Neg and a2 = Distribution.Pos, the negative and
	// positive percentage deviations. Its mean is above tau when a2 > a1.
	Skewed DistKind = "skewed"
)

// Distribution says how run-time values deviate from expected ones.
// The zero value is Erlang(2).
type Distribution struct {
	Kind DistKind `json:"kind"`
	// Neg and Pos are the negative and positive percentage deviations of
	// Uniform and Skewed (Uniform uses Neg for both and Pos must be 0 or
	// equal). Each is in [0, 100] for Neg and >= 0 for Pos.
	Neg float64 `json:"neg,omitempty"`
	Pos float64 `json:"pos,omitempty"`
}

// Validate checks the distribution's parameters.
func (d Distribution) Validate() error {
	switch d.Kind {
	case "", Erlang2:
		if d.Neg != 0 || d.Pos != 0 {
			return invalid("erlang2 takes no deviations")
		}
	case Uniform:
		if d.Pos != 0 && d.Pos != d.Neg {
			return invalid("uniform distribution with different deviations %v and %v (use skewed)", d.Neg, d.Pos)
		}
		if !(d.Neg >= 0 && d.Neg <= 100) {
			return invalid("uniform deviation %v%% is outside [0, 100]", d.Neg)
		}
	case Skewed:
		if !(d.Neg >= 0 && d.Neg <= 100) || !finiteNonNeg(d.Pos) {
			return invalid("skewed deviations -%v%%/+%v%%: want 0 <= neg <= 100 and pos >= 0", d.Neg, d.Pos)
		}
	default:
		return invalid("unknown distribution %q", d.Kind)
	}
	return nil
}

// String names the distribution.
func (d Distribution) String() string {
	switch d.Kind {
	case "", Erlang2:
		return "erlang2"
	case Uniform:
		return fmt.Sprintf("uniform(±%g%%)", d.Neg)
	default:
		return fmt.Sprintf("skewed(-%g%%,+%g%%)", d.Neg, d.Pos)
	}
}

// Sample draws one run-time value around the expected value tau.
func (d Distribution) Sample(rng *rand.Rand, tau float64) float64 {
	switch d.Kind {
	case Uniform:
		return tau * (100 - d.Neg + 2*d.Neg*rng.Float64()) / 100
	case Skewed:
		return tau * (100 - d.Neg + (d.Neg+d.Pos)*rng.Float64()) / 100
	default:
		return tau / 2 * (rng.ExpFloat64() + rng.ExpFloat64())
	}
}

// Draw draws run-time values for every subtask on every machine and a
// communication factor for every data item from the distribution, around
// the expected values (section 4.3).
func Draw(p *Problem, d Distribution, rng *rand.Rand) (*RunTimes, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	rt := &RunTimes{Exec: make([][]float64, p.n), Comm: make([]float64, len(p.g.Items))}
	for i := range rt.Exec {
		rt.Exec[i] = make([]float64, p.m)
		for j := range rt.Exec[i] {
			rt.Exec[i][j] = d.Sample(rng, p.g.Tasks[i].Exec[j])
		}
	}
	for k := range rt.Comm {
		rt.Comm[k] = d.Sample(rng, 1)
	}
	return rt, nil
}
