package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// This file is the application-independent part of the load balancer of
// Cermele, Colajanni and Necci (sections 4.1 and 4.2 of the paper): the
// relative capacities, the four decision policies and the balancing
// equation. It does no I/O; protocol.go runs it on the master.

// Policy is a decision policy: whether to reconfigure, given the
// relative capacities now and at the earlier check points.
type Policy string

// The paper's four centralised decision policies.
const (
	SAI  Policy = "sai"  // system average imbalance
	SMI  Policy = "smi"  // system maximum imbalance
	NINC Policy = "ninc" // number of imbalanced nodes, current load
	NINP Policy = "ninp" // number of imbalanced nodes, current and past load
)

// PolicyConfig holds a policy and its thresholds.
type PolicyConfig struct {
	Policy Policy
	// Theta is the policy's threshold: the average imbalance (SAI), the
	// largest imbalance (SMI), or the fraction of imbalanced nodes (NINC,
	// NINP) above which the master reconfigures.
	Theta float64
	// Lambda is the imbalance above which NINC and NINP count a node as
	// imbalanced.
	Lambda float64
	// History is NINP's h: how many check points (the current one
	// included) its decayed average covers.
	History int
}

// DefaultTheta returns the default threshold of a policy.
func DefaultTheta(p Policy) float64 {
	switch p {
	case SAI:
		return 0.10
	case SMI:
		return 0.25
	default:
		return 0.20
	}
}

// Validate rejects unknown policies and nonsense thresholds.
func (c PolicyConfig) Validate() error {
	switch c.Policy {
	case SAI, SMI, NINC, NINP:
	default:
		return fmt.Errorf("unknown policy %q (want sai, smi, ninc or ninp)", c.Policy)
	}
	if c.Theta < 0 || c.Lambda < 0 || math.IsNaN(c.Theta) || math.IsNaN(c.Lambda) {
		return fmt.Errorf("thresholds must not be negative")
	}
	if c.Policy == NINP && c.History < 1 {
		return fmt.Errorf("NINP needs a history of at least 1 check point")
	}
	return nil
}

func (c PolicyConfig) String() string {
	switch c.Policy {
	case NINC:
		return fmt.Sprintf("%s(lambda=%.2f, theta=%.2f)", strings.ToUpper(string(c.Policy)), c.Lambda, c.Theta)
	case NINP:
		return fmt.Sprintf("%s(lambda=%.2f, theta=%.2f, h=%d)", strings.ToUpper(string(c.Policy)), c.Lambda, c.Theta, c.History)
	}
	return fmt.Sprintf("%s(theta=%.2f)", strings.ToUpper(string(c.Policy)), c.Theta)
}

// relative normalises capacities to relative capacities chi_i, which sum
// to 1. A capacity that is not positive counts as tiny, so that a node
// that measured nothing gets (almost) no rows rather than a division by
// zero.
func relative(c []float64) []float64 {
	out := make([]float64, len(c))
	sum := 0.0
	for i, v := range c {
		if !(v > 0) || math.IsInf(v, 0) {
			v = 1e-12
		}
		out[i] = v
		sum += v
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// imbalance is the paper's Delta_i = |chi_i(now) - chi_i(t_i)|, taken
// relative to chi_i(t_i): the paper's thresholds (0.4, 0.45) are larger
// than any relative capacity of its six-node platform, so they only make
// sense as relative changes.
func imbalance(now, ref []float64) []float64 {
	d := make([]float64, len(now))
	for i := range now {
		d[i] = math.Abs(now[i]-ref[i]) / ref[i]
	}
	return d
}

// Decider is the master's decision state: the relative capacities at the
// last reconfiguration (t_i in the paper) and the ones measured at the
// check points since.
type Decider struct {
	cfg     PolicyConfig
	ref     []float64   // chi(t_i): what the current partition is based on
	history [][]float64 // chi at the check points since, newest last
}

// NewDecider returns a decider whose current partition is based on the
// relative capacities ref.
func NewDecider(cfg PolicyConfig, ref []float64) *Decider {
	return &Decider{cfg: cfg, ref: append([]float64(nil), ref...)}
}

// Decision is what the master tells every node: whether to reconfigure,
// the imbalance factor Delta that the policy compared with its
// threshold, and the relative capacities the new partition follows.
type Decision struct {
	Reconfigure bool
	Factor      float64
	Chi         []float64
}

// Decide runs the policy on the capacities measured at this check point
// and, if it reconfigures, makes them the new reference.
func (d *Decider) Decide(capacities []float64) Decision {
	chi := relative(capacities)
	d.history = append(d.history, chi)
	var factor float64
	switch d.cfg.Policy {
	case SAI:
		factor = mean(imbalance(chi, d.ref))
	case SMI:
		factor = maxOf(imbalance(chi, d.ref))
	case NINC:
		factor = fractionAbove(imbalance(chi, d.ref), d.cfg.Lambda)
	case NINP:
		factor = fractionAbove(d.decayedImbalance(), d.cfg.Lambda)
	}
	dec := Decision{Factor: factor, Chi: chi}
	if factor > d.cfg.Theta {
		dec.Reconfigure = true
		d.ref = chi
		d.history = nil
	}
	return dec
}

// decayedImbalance is NINP's per-node measure: the imbalance at the last
// h check points since the last reconfiguration, the current one first,
// weighted by f(j) = exp(-j/2)/G (G normalises the h weights to 1); check
// points that did not happen yet count as balanced. A step change of the
// capacity is thus seen in full only if it lasts: f(0) = 0.46 for h = 4,
// so NINP reacts one or two check points after NINC, and not at all to a
// change that vanishes before, which is the behaviour the paper reports.
// (Read literally, the paper's sum of f(j)|chi(now) - chi(t_j)| over the
// earlier check points sees a fresh step change in full at once, because
// every earlier point differs from now; that contradicts its own
// description, so we weight the imbalance against the reference instead.)
func (d *Decider) decayedImbalance() []float64 {
	h := d.cfg.History
	g := 0.0
	for j := 0; j < h; j++ {
		g += math.Exp(-float64(j) / 2)
	}
	out := make([]float64, len(d.ref))
	for j := 0; j < h && j < len(d.history); j++ {
		w := math.Exp(-float64(j)/2) / g
		for i, v := range imbalance(d.history[len(d.history)-1-j], d.ref) {
			out[i] += w * v
		}
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

func fractionAbove(xs []float64, lambda float64) float64 {
	k := 0
	for _, x := range xs {
		if x > lambda {
			k++
		}
	}
	return float64(k) / float64(len(xs))
}

// partition applies the balancing equation to a 1-D decomposition whose
// grain is one row: node i gets about m * chi_i^(2/C) rows (the weights
// normalised so that the rows add up to m, since they do not for C != 2),
// at least one, rounded by largest remainder. It returns the first row of
// every node and m at the end.
func partition(m int, chi []float64, complexity float64) []int {
	p := len(chi)
	if m < p {
		panic(fmt.Sprintf("partition: %d rows for %d nodes", m, p))
	}
	w := make([]float64, p)
	sum := 0.0
	for i, x := range chi {
		w[i] = math.Pow(x, 2/complexity)
		sum += w[i]
	}
	// Every node gets one row; the other m-p are shared by weight.
	free := m - p
	rows := make([]int, p)
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, p)
	given := 0
	for i := range w {
		share := float64(free) * w[i] / sum
		rows[i] = 1 + int(share)
		given += int(share)
		rems[i] = rem{i, share - math.Floor(share)}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < free; k++ {
		rows[rems[k%p].i]++
		given++
	}
	bounds := make([]int, p+1)
	for i, r := range rows {
		bounds[i+1] = bounds[i] + r
	}
	return bounds
}

// transfer is one piece of a data migration: rows lo..hi-1 go from node
// from to node to.
type transfer struct {
	from, to, lo, hi int
}

// migration lists the rows that change owner when the partition old
// becomes new: for every pair of nodes, the rows in the old block of one
// and the new block of the other. With contiguous blocks in node order
// most pieces go between neighbours, as in the paper's figure 2.a.
func migration(old, new []int) []transfer {
	var out []transfer
	p := len(old) - 1
	for from := 0; from < p; from++ {
		for to := 0; to < p; to++ {
			if from == to {
				continue
			}
			lo, hi := max(old[from], new[to]), min(old[from+1], new[to+1])
			if lo < hi {
				out = append(out, transfer{from, to, lo, hi})
			}
		}
	}
	return out
}
