package netprobe

import (
	"fmt"
	"math"
	"time"

	"github.com/hetcomm/hetcomm/collective"
)

// Estimate is what the fabric probe would do on a network (SimulateProbe):
// its rounds of pings, steps of flows and segment tests, and an estimate
// of its time.
type Estimate struct {
	PingRounds int
	Steps      int // steps of concurrent flows
	Flows      int
	Cuts       int // rounds of segment tests (each tests one cut or several at once)
	Seconds    float64
	// Worst is the largest relative error of an inferred pair rate
	// against what the pair reaches alone on the network (both capped by
	// the segments between its ends, as Probe's segment tests find them).
	Worst float64
}

// Per-part costs of the fabric probe, as measured on racks32 (32 hosts,
// load average about 10): the pings took 0.5-0.8 s in 31 rounds, the
// flows 4-5 s in 12-13 steps, the segment tests 2.7-3.2 s for four cuts.
const (
	estPingRound = 20 * time.Millisecond
	estStep      = 350 * time.Millisecond
	estCut       = 750 * time.Millisecond
)

// SimulateProbe runs the fabric probe's plan (MethodFabric) against a
// network described by m (its pair rates; its segments capped by what
// crosses them at once), with the segment probe testing cuts (comm passes
// the subnets), and estimates how long the probe takes there. A step's
// flows get their rates from collective's flow simulator on
// collective.FabricFromModel(m): max-min fair shares of every NIC and
// segment. Nothing is sent; it is for studies of large worlds (`hetbench
// sim scale`).
func SimulateProbe(m *collective.Model, cuts [][]int) (Estimate, error) {
	if err := m.Validate(); err != nil {
		return Estimate{}, err
	}
	n := m.Size()
	f := collective.FabricFromModel(m)
	cfg := Config{Cuts: cuts}.withDefaults()
	// The pings: a sample where the model of pings.go holds for the
	// network's latencies (else the tournament's rounds besides).
	groups := rankGroups(n, cuts)
	pp := planPings(n, groups, nil, cfg)
	est := Estimate{PingRounds: len(pp.rounds)}
	if !pp.all {
		lat := make([][]float64, n)
		for i := range lat {
			lat[i] = make([]float64, n)
		}
		for _, round := range pp.rounds {
			for _, pr := range round {
				lat[pr.A][pr.B], lat[pr.B][pr.A] = m.Latency[pr.A][pr.B], m.Latency[pr.A][pr.B]
			}
		}
		if fitPings(lat, groups, nil, pp) == nil {
			est.PingRounds += len(Tournament(n))
		}
	}
	plan := newFabricPlan(n, groups, cfg)
	plan.latency = m.Latency
	for {
		items := plan.Next()
		if len(items) == 0 {
			break
		}
		if est.Steps > 4*n+16 {
			return est, fmt.Errorf("netprobe: the simulated probe did not end after %d steps", est.Steps)
		}
		flows := make([]collective.Flow, len(items))
		for k, it := range items {
			flows[k] = collective.Flow{Src: it.A, Dst: it.B, Bytes: 1 << 20}
		}
		times, err := f.SimulateFlows(flows)
		if err != nil {
			return est, err
		}
		rates := make([]float64, len(items))
		fanBytes, fanTime := map[int]float64{}, map[int]float64{}
		for k, it := range items {
			d := times[k].End - times[k].Start - f.StartUp(it.A, it.B)
			rates[k] = float64(flows[k].Bytes) / max(d, 1e-12)
			if it.Fan {
				fanBytes[it.A] += float64(flows[k].Bytes)
				fanTime[it.A] = max(fanTime[it.A], d)
			}
		}
		// A fan-out's aggregate: everything it sent, until its last flow
		// ended.
		fans := map[int]float64{}
		for a, b := range fanBytes {
			fans[a] = b / max(fanTime[a], 1e-12)
		}
		plan.Done(items, rates, fans)
		est.Steps++
		est.Flows += len(items)
	}
	// Every pair against what it reaches alone: the model's rate, capped
	// by the segments between its ends (which the probe's segment tests
	// find, and which then cap the inferred rate too).
	got := plan.Rates()
	side := make([][]int8, len(m.Segments))
	for s, seg := range m.Segments {
		side[s] = make([]int8, n)
		for _, r := range seg.A {
			side[s][r] = 1
		}
		for _, r := range seg.B {
			side[s][r] = 2
		}
	}
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			want, inferred := m.Rate(i, j), got[i][j]
			for s, seg := range m.Segments {
				switch {
				case side[s][i] == 1 && side[s][j] == 2:
					want, inferred = min(want, seg.AB), min(inferred, seg.AB)
				case side[s][i] == 2 && side[s][j] == 1:
					want, inferred = min(want, seg.BA), min(inferred, seg.BA)
				}
			}
			est.Worst = max(est.Worst, math.Abs(inferred-want)/want)
		}
	}
	if sides := groupCuts(n, cuts, nil); len(sides) > 1 {
		est.Cuts = len(cutBatches(n, sides))
	}
	est.Seconds = (time.Duration(est.PingRounds)*estPingRound + time.Duration(est.Steps)*estStep + time.Duration(est.Cuts)*estCut).Seconds()
	return est, nil
}
