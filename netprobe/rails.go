package netprobe

import (
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

// The costs of a pair's rails: measured ones from a model that lists its
// rails, and the guess a RailSet starts with until the probe has run.

// RailRef is the message size at which a pair's rails are summed up as
// one (T, B) line for the planners (transport.RailModel.Effective): bulk
// transfers, exact at 0 and at this size.
const RailRef = 1 << 20

// guessedRail is the cost every rail is given before it is measured: all
// alike, so that traffic spreads evenly over them.
var guessedRail = transport.RailCost{Latency: 50e-6, Bandwidth: 100e6}

// RailCosts returns the costs of k rails from a to b: the first k rails of
// m, and measured true, when m lists at least k rails; otherwise k guessed
// costs, all alike, and measured false.
func RailCosts(m *collective.Model, a, b, k int) (costs []transport.RailCost, measured bool) {
	costs = make([]transport.RailCost, k)
	if m == nil || len(m.Rails) < k {
		for i := range costs {
			costs[i] = guessedRail
		}
		return costs, false
	}
	for i := range costs {
		r := m.Rails[i]
		costs[i] = transport.RailCost{Latency: r.Latency[a][b], Bandwidth: r.Bandwidth[a][b]}
	}
	return costs, true
}

// EffectiveRails sums up every rail of m from a to b under policy as one
// (T, B) pair, exact at 0 and RailRef bytes.
func EffectiveRails(m *collective.Model, a, b int, policy transport.RailPolicy) transport.RailCost {
	costs, _ := RailCosts(m, a, b, len(m.Rails))
	return transport.RailModel{Costs: costs, Policy: policy}.Effective(RailRef)
}
