package netprobe

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/collective"
)

// PacedPort is a Port that can pace what this rank sends to one peer.
// The segment probe paces its flows when it can: paced flows that share
// no bottleneck all end at the fabric bound, so a shared one shows
// clearly; unpaced TCP flows share NICs unevenly and end later anyway.
type PacedPort interface {
	Port
	// Pace limits what this rank sends to peer to rate bytes of payload
	// per second; 0 removes the limit.
	Pace(peer int, rate float64) error
}

// ErrProtocol reports a probe message that no rank sends.
var ErrProtocol = errors.New("netprobe: protocol error")

// tagCut tags the segment probe's flows.
const tagCut = 7

// CutProbe records one test of the segment probe: concurrent flows
// across a candidate cut, every rank of A sending to every rank of B and
// back at once, timed against the fabric bound the NIC rates alone give.
type CutProbe struct {
	A []int `json:"a"`
	B []int `json:"b"`
	// Bytes is what the largest flow carried (each flow carries its
	// share of its NICs: see cutExchange).
	Bytes int64 `json:"bytes"`
	// Paced says whether every flow was paced to its share of the bound.
	Paced bool `json:"paced"`
	// Bound is the fabric bound of the flows without a segment (seconds).
	Bound float64 `json:"bound"`
	// AB and BA are the measured times of each direction: the last
	// arrival at any rank of B (of A), from the common start.
	AB float64 `json:"ab"`
	BA float64 `json:"ba"`
	// AB2 and BA2 are the times of the second round, which measures a
	// segment found again with the flows paced to 1.2 times their shares
	// of its capacity (0 when no segment was found).
	AB2 float64 `json:"ab2,omitempty"`
	BA2 float64 `json:"ba2,omitempty"`
	// Threshold is the ratio to Bound above which a direction counts as
	// limited by a segment.
	Threshold float64 `json:"threshold"`
	// Elapsed and Elapsed2 are the times in which the ranks of A, then
	// those of B, received all they were sent, in the first round and in
	// the last round that measured again (seconds from the common start):
	// what the capacities were made of (carried).
	Elapsed  []float64 `json:"elapsed,omitempty"`
	Elapsed2 []float64 `json:"elapsed2,omitempty"`
	// Rounds has, for each round, what each direction (A to B, then B to
	// A) carried: the prefixes of whole arrivals (carried) and while
	// every flow ran (steadyRate), in bytes per second.
	Rounds []CutRound `json:"rounds,omitempty"`
}

// CutRound is what one round of a segment test measured.
type CutRound struct {
	Carried [2]float64 `json:"carried"`
	Steady  [2]float64 `json:"steady"`
}

// steady is direction dir's steady rate, or 0 when there is none or it
// is more than 1.5 times, or less than 1/1.5 of, what the round carried:
// such a round was disturbed. On racks32: 132 MB/s through a 55 MB/s
// uplink, in a round that carried 35 (a rank the machine starved read at
// once what had waited in its socket); and 17 MB/s into a 45 MB/s uplink
// in a round that carried 35, the first round having carried 40 (the
// flows stalled while the window was measured, and the mean with the
// first round's 46 made the uplink 12% slow).
func (r CutRound) steady(dir int) float64 {
	if s, c := r.Steady[dir], r.Carried[dir]; s <= 1.5*c && 1.5*s >= c {
		return s
	}
	return 0
}

// best is the most the round shows direction dir carries.
func (r CutRound) best(dir int) float64 { return max(r.Carried[dir], r.steady(dir)) }

// segmentThreshold is the ratio of the measured time to the NIC bound
// above which the cut is limited by something the NICs do not explain:
// paced flows end within a few percent of the bound on a plain switch;
// unpaced TCP flows, sharing NICs unevenly, within about 1.3 times it.
func segmentThreshold(paced bool) float64 {
	if paced {
		return 1.25
	}
	return 1.6
}

// probeSegments looks for a shared segment across the candidate cuts
// (see candidateCuts) with concurrent flows across each in turn, and
// returns the first one found, measured, with the probes it ran. It is
// collective; every rank returns the same result.
func probeSegments(ctx context.Context, p Port, m *collective.Model, offsets []float64, cfg Config) ([]collective.Segment, []CutProbe, error) {
	cfg = cfg.withDefaults()
	if cfg.SegmentTime < 0 || p.Size() < 4 {
		return nil, nil, nil
	}
	plain := *m
	plain.Segments = nil
	f := collective.FabricFromModel(&plain)
	var probes []CutProbe
	if cfg.Method != MethodPairwise {
		if cuts := groupCuts(p.Size(), cfg.Cuts, cfg.Hosts); len(cuts) > 1 {
			// Several groups (subnets: racks behind their uplinks): every
			// group's cut is tested, several at once when there are many
			// (cutBatches), and every segment found kept.
			var found []collective.Segment
			for _, batch := range cutBatches(p.Size(), cuts) {
				segs, cps, err := probeCuts(ctx, p, f, batch, offsets, cfg)
				if err != nil {
					return nil, nil, fmt.Errorf("netprobe: segment probe of %v: %w", batch[0].A, err)
				}
				probes = append(probes, cps...)
				for _, ss := range segs {
					for _, s := range ss {
						s.Name = fmt.Sprintf("cut%d", len(found)+1)
						found = append(found, s)
					}
				}
			}
			return found, probes, nil
		}
	}
	for _, a := range candidateCuts(m, cfg.Cuts, cfg.Hosts) {
		segs, cut, err := probeCut(ctx, p, f, a, offsets, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("netprobe: segment probe of %v: %w", a, err)
		}
		probes = append(probes, *cut)
		if len(segs) > 0 {
			return segs, probes, nil
		}
	}
	return nil, probes, nil
}

// candidateCuts lists the cuts the segment probe tests, each as one side
// (the ranks in increasing order), in this order and without repeats:
// the hints (comm passes the ranks of each subnet), the cut the pair
// rates suggest (Clusters: the slowest links between two groups), and
// the halving that launchers make of two equal clusters (ranks below
// n/2). Both sides need two ranks at least: with one, a segment cannot be
// told from that rank's NIC, whose pairwise rates already include it. A
// cut that puts ranks of one host (hosts, when known) on both sides is
// left out. At most three are tested.
func candidateCuts(m *collective.Model, hints [][]int, hosts []string) [][]int {
	n := m.Size()
	var out [][]int
	seen := cutSet{}
	splitsHost := func(in []bool) bool {
		side := map[string]bool{}
		for r := 0; r < n && r < len(hosts); r++ {
			if hosts[r] == "" {
				continue
			}
			if s, ok := side[hosts[r]]; ok && s != in[r] {
				return true
			}
			side[hosts[r]] = in[r]
		}
		return false
	}
	add := func(side []int) {
		in := make([]bool, n)
		var a []int
		for _, r := range side {
			if r >= 0 && r < n {
				in[r] = true
			}
		}
		for r := range in {
			if in[r] {
				a = append(a, r)
			}
		}
		if len(a) < 2 || n-len(a) < 2 || len(out) == 3 || splitsHost(in) || !seen.add(in) {
			return
		}
		out = append(out, a)
	}
	for _, h := range hints {
		add(h)
	}
	if g := collective.Clusters(m); len(g) == 2 {
		add(g[0])
	}
	half := make([]int, n/2)
	for r := range half {
		half[r] = r
	}
	add(half)
	return out
}

// groupCuts lists the cuts between every group of rankGroups(n, hints)
// and the other ranks, as candidateCuts would take them (both sides of
// two ranks at least, no host split, no cut twice).
func groupCuts(n int, hints [][]int, hosts []string) [][]int {
	groups := rankGroups(n, hints)
	members := map[int][]int{}
	for r, g := range groups {
		members[g] = append(members[g], r)
	}
	if len(members) < 2 {
		return nil
	}
	var sides [][]int
	for g := 0; g < len(members); g++ {
		sides = append(sides, members[g])
	}
	m := &collective.Model{Latency: collective.Matrix(n, 0), Bandwidth: collective.Matrix(n, 1)}
	var cuts [][]int
	seen := cutSet{}
	for _, side := range sides {
		// candidateCuts takes the hint first if it is a cut it would test.
		c := candidateCuts(m, [][]int{side}, hosts)
		if len(c) == 0 || !slices.Equal(c[0], side) {
			continue
		}
		in := make([]bool, n)
		for _, r := range side {
			in[r] = true
		}
		if seen.add(in) {
			cuts = append(cuts, side)
		}
	}
	return cuts
}

// capInferred caps the rates the fabric probe inferred (not measured) by
// the capacity of every segment on the pair's way. A segment carried the
// fastest single flow measured across it, so its capacity is at least
// that (the segment probe may underrate it on a busy machine).
func capInferred(res *Result, segs []collective.Segment) {
	measured := map[Pair]bool{}
	for _, f := range res.Flows {
		measured[Pair{f.A, f.B}] = true
	}
	m := res.Model
	for i := range segs {
		s := &segs[i]
		inA := map[int]bool{}
		for _, a := range s.A {
			inA[a] = true
		}
		inB := map[int]bool{}
		for _, b := range s.B {
			inB[b] = true
		}
		for _, f := range res.Flows {
			switch {
			case inA[f.A] && inB[f.B]:
				s.AB = max(s.AB, f.Rate)
			case inB[f.A] && inA[f.B]:
				s.BA = max(s.BA, f.Rate)
			}
		}
		for _, a := range s.A {
			for _, b := range s.B {
				if !measured[Pair{a, b}] {
					m.Bandwidth[a][b] = min(m.Bandwidth[a][b], s.AB)
				}
				if !measured[Pair{b, a}] {
					m.Bandwidth[b][a] = min(m.Bandwidth[b][a], s.BA)
				}
			}
		}
	}
}

// A cutPair is a cut under test: flows between the ranks of A and those
// of B. Rest is the other side of the segment the test looks for: every
// rank not in A. Tested alone, a cut's B is its rest; tested with others
// at once (cutBatches), B is a share of the rest.
type cutPair struct {
	A, B, Rest []int
}

// probeCut tests the cut between side and every other rank (probeCuts).
func probeCut(ctx context.Context, p Port, f *collective.Fabric, side []int, offsets []float64, cfg Config) ([]collective.Segment, *CutProbe, error) {
	rest := complement(f.Size(), side)
	segs, cuts, err := probeCuts(ctx, p, f, []cutPair{{A: side, B: rest, Rest: rest}}, offsets, cfg)
	if err != nil {
		return nil, nil, err
	}
	return segs[0], &cuts[0], nil
}

// complement lists the ranks below n not in side, in increasing order.
func complement(n int, side []int) []int {
	var out []int
	for r := range n {
		if !slices.Contains(side, r) {
			out = append(out, r)
		}
	}
	return out
}

// probeCuts runs concurrent flows across the cuts of pairs, all at once
// (their ranks must be disjoint), and judges each (see judgeCut). When a
// segment limits a direction, the next rounds measure its capacity again
// with the flows paced to 1.2 times their shares of what the round before
// found: flows offered at twice a segment's rate fill its queue and lose
// packets, so the first round sees TCP's recovery as much as the segment,
// which underrates it. It returns the segments found and the test of each
// pair.
func probeCuts(ctx context.Context, p Port, f *collective.Fabric, pairs []cutPair, offsets []float64, cfg Config) ([][]collective.Segment, []CutProbe, error) {
	n := f.Size()
	type test struct {
		pair         cutPair
		cut          *CutProbe
		x            *collective.Exchange
		bound        collective.FabricBound
		ab, ba       float64 // what the first round's flows carry each way
		seg          collective.Segment
		segs         []collective.Segment
		lowAB, lowBA float64 // what the directions were seen to carry at least
		remeasure    bool
		limited      [2]bool // the directions (A to B, B to A) the first round found limited
		x2           *collective.Exchange
		pAB, pBA     float64
	}
	tests := make([]*test, len(pairs))
	of := make([]int, n) // the test each rank takes part in (-1: none)
	for r := range of {
		of[r] = -1
	}
	for i, pr := range pairs {
		for _, r := range slices.Concat(pr.A, pr.B) {
			if r < 0 || r >= n || of[r] >= 0 {
				return nil, nil, fmt.Errorf("netprobe: segment probe: rank %d in two cuts or out of range", r)
			}
			of[r] = i
		}
		t := &test{pair: pr, cut: &CutProbe{A: pr.A, B: pr.B}}
		x, b, err := cutExchange(f, t.cut, cfg)
		if err != nil {
			return nil, nil, err
		}
		t.x, t.bound = x, b
		t.ab, t.ba = across(x, pr.A, pr.B), across(x, pr.B, pr.A)
		tests[i] = t
	}
	// size is what the flows of a round carry from one rank to another,
	// each flow in the exchange of its test.
	size := func(xs func(t *test) *collective.Exchange) func(from, to int) int64 {
		return func(from, to int) int64 {
			if i := of[from]; i >= 0 && of[to] == i {
				if x := xs(tests[i]); x != nil {
					return x.Bytes[from][to]
				}
			}
			return 0
		}
	}
	first := size(func(t *test) *collective.Exchange { return t.x })
	rows, err := cutRound(ctx, p, first, func(from, to int) float64 {
		return float64(first(from, to)) / tests[of[from]].bound.Bandwidth
	})
	if err != nil {
		return nil, nil, err
	}
	// share runs judge at rank 0 for every test that took part in the
	// round (all: the first) and broadcasts the verdicts; the others'
	// stand.
	share := func(all bool, judge func(t *test) ([]byte, error)) error {
		verdicts, err := shareCuts(ctx, p, len(tests), func() ([][]byte, error) {
			out := make([][]byte, len(tests))
			for i, t := range tests {
				if !all && t.x2 == nil {
					b, err := encodeCut(t.segs, t.cut)
					if err != nil {
						return nil, err
					}
					out[i] = b
					continue
				}
				b, err := judge(t)
				if err != nil {
					return nil, err
				}
				out[i] = b
			}
			return out, nil
		})
		if err != nil {
			return err
		}
		for i, v := range verdicts {
			tests[i].segs, tests[i].cut = v.Segments, v.Cut
		}
		return nil
	}
	if err := share(true, func(t *test) ([]byte, error) { return judgeCut(t.cut, rows, f, t.x, t.pair.Rest, offsets) }); err != nil {
		return nil, nil, err
	}
	// The next rounds scale every flow so that each direction takes
	// SegmentTime at the capacity found so far and pace it to 1.2 times
	// that: a segment offered much more than it carries loses packets,
	// so the first round underrates it. A direction whose flows kept
	// their pace was not limited at that rate: it is offered 1.2 times
	// more again (up to what the first round offered), at most
	// cutRounds times in all. What any round carried (carried: a lower
	// bound) stands against the later rounds: on racks32 a paced second
	// round into a 470 Mbit/s uplink carried 15% less than the first had.
	const pace = 1.2
	secs := cfg.SegmentTime.Seconds()
	for _, t := range tests {
		if t.remeasure = len(t.segs) > 0; t.remeasure {
			t.seg = t.segs[0]
			t.lowAB, t.lowBA = t.seg.AB, t.seg.BA
			t.limited = [2]bool{t.seg.AB < feed(f, t.pair.A, t.pair.Rest), t.seg.BA < feed(f, t.pair.Rest, t.pair.A)}
		}
	}
	for round := 0; round < cutRounds; round++ {
		any := false
		for _, t := range tests {
			t.x2 = nil
			if !t.remeasure {
				continue
			}
			any = true
			offerAB, offerBA := t.ab/t.bound.Bandwidth, t.ba/t.bound.Bandwidth
			scaleAB := min(t.seg.AB/offerAB, 1) * secs / t.bound.Bandwidth
			scaleBA := min(t.seg.BA/offerBA, 1) * secs / t.bound.Bandwidth
			x2 := &collective.Exchange{Bytes: make([][]int64, n)}
			for i := range x2.Bytes {
				x2.Bytes[i] = make([]int64, n)
			}
			for _, a := range t.pair.A {
				for _, b := range t.pair.B {
					if t.x.Bytes[a][b] > 0 {
						x2.Bytes[a][b] = max(int64(float64(t.x.Bytes[a][b])*scaleAB), minCutFlow)
					}
					if t.x.Bytes[b][a] > 0 {
						x2.Bytes[b][a] = max(int64(float64(t.x.Bytes[b][a])*scaleBA), minCutFlow)
					}
				}
			}
			t.x2 = x2
			t.pAB, t.pBA = t.seg.AB, t.seg.BA
		}
		if !any {
			break
		}
		next := size(func(t *test) *collective.Exchange { return t.x2 })
		rows, err = cutRound(ctx, p, next, func(from, to int) float64 {
			return pace * float64(next(from, to)) / secs
		})
		if err != nil {
			return nil, nil, err
		}
		if err := share(false, func(t *test) ([]byte, error) {
			return remeasureCut(t.cut, t.seg, rows, f, t.x2, t.pair.Rest, offsets)
		}); err != nil {
			return nil, nil, err
		}
		// A direction whose flows kept their pace (within 10%) carries at
		// least what they did, and is offered more next; one that fell
		// behind was measured by this round. Either way it carries at
		// least the most any round carried.
		for _, t := range tests {
			if !t.remeasure {
				continue
			}
			offerAB, offerBA := t.ab/t.bound.Bandwidth, t.ba/t.bound.Bandwidth
			seg := t.segs[0]
			keptAB := seg.AB >= 0.9*pace*t.pAB
			keptBA := seg.BA >= 0.9*pace*t.pBA
			t.lowAB, t.lowBA = max(t.lowAB, seg.AB), max(t.lowBA, seg.BA)
			seg.AB, seg.BA = max(seg.AB, t.lowAB), max(seg.BA, t.lowBA)
			t.seg, t.segs = seg, []collective.Segment{seg}
			t.remeasure = keptAB && pace*t.pAB < offerAB || keptBA && pace*t.pBA < offerBA
		}
	}
	segs := make([][]collective.Segment, len(tests))
	cuts := make([]CutProbe, len(tests))
	for i, t := range tests {
		if len(t.segs) > 0 {
			// The directions the first round found limited get their
			// capacity from every round (one that a disturbed round had
			// raised to what the NICs feed stays limited).
			seg := t.segs[0]
			feedAB, feedBA := feed(f, t.pair.A, t.pair.Rest), feed(f, t.pair.Rest, t.pair.A)
			if t.limited[0] {
				seg.AB = min(capacity(t.cut.Rounds, 0), feedAB)
			}
			if t.limited[1] {
				seg.BA = min(capacity(t.cut.Rounds, 1), feedBA)
			}
			t.segs = []collective.Segment{seg}
			if !segmentBinds(seg, feedAB, feedBA) {
				t.segs = nil
			}
		}
		segs[i], cuts[i] = t.segs, *t.cut
	}
	return segs, cuts, nil
}

// segmentBinds tells whether a segment found, measured, still limits a
// direction below what the NICs on either side feed it (feedAB, feedBA)
// by more than segmentMargin. A first round that one slow flow made
// look limited is measured again, and a segment measured at what the
// NICs feed is none: on dualnic4 with both rails, which has no segment,
// one first round in six took 1.29 times the NIC bound, and the probe
// reported a segment at 0.92 and 1.0 of the NICs' feed.
func segmentBinds(seg collective.Segment, feedAB, feedBA float64) bool {
	return seg.AB*segmentMargin < feedAB || seg.BA*segmentMargin < feedBA
}

// segmentMargin: a segment within this factor of what the NICs feed it
// is not told apart from the noise of a round.
const segmentMargin = 1.1

// capacity is a limited direction's capacity (dir 0: A to B, 1: B to A)
// from its rounds: the most that any round carried (a lower bound each),
// or the median of the steady rates (each an estimate, noisy on a busy
// machine; CutRound.steady leaves out disturbed rounds), whichever is
// more. Between rounds the most of either (CutRound.best) drives what
// the next round offers; kept as the capacity, the most of three or four
// steady rates had an uplink over 10% off (mostly high) in 12 of 20
// probes of racks32, where the mean, recomputed from the same rounds,
// had 3. The median of three leaves out one round that read 1.29 times
// what it carried, which the mean had let make an uplink 12% fast
// (recomputed over 937 directions of 110 probes: 7 over 10% off, against
// 9 with the mean).
func capacity(rounds []CutRound, dir int) float64 {
	low := 0.0
	var steady []float64
	for _, r := range rounds {
		low = max(low, r.Carried[dir])
		if s := r.steady(dir); s > 0 {
			steady = append(steady, s)
		}
	}
	if len(steady) > 0 {
		low = max(low, collective.Median(steady))
	}
	return low
}

// cutBatches groups the cuts between each of sides (disjoint groups of
// ranks) and the other ranks into rounds tested at once: up to a third
// of the groups a round (one when there are fewer than six), each
// against its share of the ranks of the other groups, dealt so that each
// share spans the groups. A group's flows then cross its own uplink at
// full load, while every other group's uplink carries about half a load
// or less (a third of the groups send into two thirds, through uplinks
// that pass at most their capacity): only the uplinks under test can be
// what limits a round, and the number of rounds does not grow with the
// number of groups.
func cutBatches(n int, sides [][]int) [][]cutPair {
	k := max(1, len(sides)/3)
	group := make([]int, n)
	for r := range group {
		group[r] = -1
	}
	for g, side := range sides {
		for _, r := range side {
			group[r] = g
		}
	}
	var out [][]cutPair
	for lo := 0; lo < len(sides); lo += k {
		batch := sides[lo:min(lo+k, len(sides))]
		in := map[int]bool{}
		for _, side := range batch {
			for _, r := range side {
				in[r] = true
			}
		}
		// The other ranks, dealt row by row: the first of every group,
		// then the second of every group, and so on, each row starting
		// one cut further on, so that each cut's share spans the groups.
		var rest []int
		row := make([]int, n)
		col := map[int]int{}
		rows := map[int]int{}
		for r := range n {
			if in[r] {
				continue
			}
			if _, ok := col[group[r]]; !ok {
				col[group[r]] = len(col)
			}
			row[r] = rows[group[r]]
			rows[group[r]]++
			rest = append(rest, r)
		}
		pairs := make([]cutPair, len(batch))
		for i, side := range batch {
			pairs[i] = cutPair{A: side, Rest: complement(n, side)}
		}
		if len(batch) == 1 {
			pairs[0].B = pairs[0].Rest
		} else {
			for _, r := range rest {
				i := (col[group[r]] + row[r]) % len(batch)
				pairs[i].B = append(pairs[i].B, r)
			}
			for i := range pairs {
				slices.Sort(pairs[i].B)
			}
		}
		out = append(out, pairs)
	}
	return out
}

// cutRounds bounds the rounds that measure a segment again.
const cutRounds = 3

// across is what the flows of x carry from the ranks of from to those of
// to.
func across(x *collective.Exchange, from, to []int) float64 {
	s := 0.0
	for _, a := range from {
		for _, b := range to {
			s += float64(x.Bytes[a][b])
		}
	}
	return s
}

// minCutFlow is the smallest flow of the segment probe.
const minCutFlow = 8 << 10

// cutRound sends size(me, peer) bytes from this rank to every peer (paced
// to rate(me, peer) when p can pace), receives size(peer, me) from each,
// and gathers every rank's time at rank 0 (nil elsewhere).
func cutRound(ctx context.Context, p Port, size func(from, to int) int64, rate func(from, to int) float64) ([][]byte, error) {
	me := p.Rank()
	var other []int
	for peer := range p.Size() {
		if peer != me && (size(me, peer) > 0 || size(peer, me) > 0) {
			other = append(other, peer)
		}
	}
	pp, paced := p.(PacedPort)
	if paced {
		for _, peer := range other {
			if size(me, peer) == 0 {
				continue
			}
			if err := pp.Pace(peer, rate(me, peer)); err != nil {
				paced = false
			}
		}
		defer func() {
			for _, peer := range other {
				_ = pp.Pace(peer, 0)
			}
		}()
	}
	elapsed, arrivals, err := runCut(ctx, p, other, func(peer int) int64 { return size(me, peer) }, func(peer int) int64 { return size(peer, me) })
	if err != nil {
		return nil, err
	}
	mine := make([]byte, cutRowHead+16*len(arrivals))
	binary.LittleEndian.PutUint64(mine[:8], math.Float64bits(elapsed))
	if paced {
		mine[8] = 1
	}
	for k, a := range arrivals {
		b := mine[cutRowHead+16*k:]
		binary.LittleEndian.PutUint64(b, uint64(a.at))
		binary.LittleEndian.PutUint64(b[8:], uint64(a.bytes))
	}
	return p.Gather(ctx, 0, mine)
}

// shareCuts runs judge at rank 0, which gives one verdict for each of
// the count tests, and broadcasts them.
func shareCuts(ctx context.Context, p Port, count int, judge func() ([][]byte, error)) ([]cutVerdict, error) {
	var out []byte
	if p.Rank() == 0 {
		verdicts, err := judge()
		if err != nil {
			return nil, err
		}
		raw := make([]json.RawMessage, len(verdicts))
		for i, v := range verdicts {
			raw[i] = v
		}
		if out, err = json.Marshal(raw); err != nil {
			return nil, err
		}
	}
	out, err := p.Bcast(ctx, 0, out)
	if err != nil {
		return nil, err
	}
	var res []cutVerdict
	if err := json.Unmarshal(out, &res); err != nil || len(res) != count {
		return nil, fmt.Errorf("%w: segment probe result %q", ErrProtocol, out)
	}
	for _, v := range res {
		if v.Cut == nil {
			return nil, fmt.Errorf("%w: segment probe result %q", ErrProtocol, out)
		}
	}
	return res, nil
}

// cutExchange sizes the flows across the cut so that they take about
// cfg.SegmentTime at the NIC rates. Every rank sends to cutFanout ranks
// across (fewer flows than every pair: hundreds of concurrent flows on a
// busy machine measure its CPUs), the fastest senders to the fastest
// receivers, round robin; each flow gets the smaller of its sender's
// share of its egress and its receiver's share of its ingress, so that
// slow NICs do not set the time alone (a segment would then hide behind
// them). It returns the flows with their bound; cut.Bytes is the largest
// flow.
func cutExchange(f *collective.Fabric, cut *CutProbe, cfg Config) (*collective.Exchange, collective.FabricBound, error) {
	n := f.Size()
	x := &collective.Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
	}
	t := cfg.SegmentTime.Seconds()
	cut.Bytes = 0
	for _, dir := range [][2][]int{{cut.A, cut.B}, {cut.B, cut.A}} {
		from, to := slices.Clone(dir[0]), slices.Clone(dir[1])
		slices.SortStableFunc(from, func(a, b int) int { return cmpDesc(f.Out(a), f.Out(b)) })
		slices.SortStableFunc(to, func(a, b int) int { return cmpDesc(f.In(a), f.In(b)) })
		k := min(len(to), cutFanout)
		senders := map[int]int{}
		for i := range from {
			for j := 0; j < k; j++ {
				senders[to[(i*k+j)%len(to)]]++
			}
		}
		for i, a := range from {
			for j := 0; j < k; j++ {
				b := to[(i*k+j)%len(to)]
				share := min(f.Out(a)/float64(k), f.In(b)/float64(senders[b]))
				x.Bytes[a][b] = min(max(int64(share*t), minCutFlow), 8*cfg.MaxBytes)
				cut.Bytes = max(cut.Bytes, x.Bytes[a][b])
			}
		}
	}
	b, err := f.Bound(x)
	cut.Bound = b.Seconds
	return x, b, err
}

// cutFanout is how many ranks across the cut every rank sends to.
const cutFanout = 3

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// runCut sends size bytes to every rank of other and receives as much
// from each, all at once, and returns how long this rank took to receive
// everything, from the barrier that starts every rank together, and when
// each chunk of what it received arrived (each flow is sent as
// cutChunks messages; see chunkSizes).
func runCut(ctx context.Context, p Port, other []int, sendSize, recvSize func(peer int) int64) (float64, []chunkArrival, error) {
	var largest int64
	for _, peer := range other {
		largest = max(largest, sendSize(peer))
	}
	buf := make([]byte, largest)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := p.Barrier(ctx); err != nil {
		return 0, nil, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(other))
	var last time.Time
	var arrivals []chunkArrival
	var mu sync.Mutex
	for _, peer := range other {
		if sendSize(peer) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, m := range chunkSizes(sendSize(peer)) {
					if err := p.Send(ctx, peer, tagCut, buf[:m]); err != nil {
						errs <- fmt.Errorf("sending to %d: %w", peer, err)
						cancel()
						return
					}
				}
			}()
		}
		if recvSize(peer) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, want := range chunkSizes(recvSize(peer)) {
				got, err := p.Recv(ctx, peer, tagCut)
				if err == nil && int64(len(got)) != want {
					err = fmt.Errorf("%w: a chunk of %d bytes, want %d", ErrProtocol, len(got), want)
				}
				if err != nil {
					errs <- fmt.Errorf("receiving from %d: %w", peer, err)
					cancel()
					return
				}
				now := time.Now()
				mu.Lock()
				arrivals = append(arrivals, chunkArrival{at: now.UnixNano(), bytes: want})
				last = now
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	if last.IsZero() {
		return 0, nil, nil // nothing to receive (a rank in no cut of the round)
	}
	return last.Sub(start).Seconds(), arrivals, nil
}

// cutChunks is how many messages a flow of the segment probe is sent as,
// so that its receiver sees its bytes arrive over time.
const cutChunks = 8

// chunkSizes splits a flow of size bytes into the messages it is sent as:
// cutChunks of them, none under 4 KiB (fewer for a small flow), the last
// taking what is left.
func chunkSizes(size int64) []int64 {
	k := min(int64(cutChunks), max(size/(4<<10), 1))
	out := make([]int64, k)
	for i := range out {
		out[i] = size / k
	}
	out[k-1] += size % k
	return out
}

// chunkArrival is a chunk of a segment probe's flow received: when (the
// receiver's clock, Unix nanoseconds) and how many bytes.
type chunkArrival struct {
	at, bytes int64
}

// cutRowHead is the size of a row of a segment probe round before its
// chunk arrivals: the rank's time and whether it paced.
const cutRowHead = 9

// cutTimes parses the gathered rows: every rank's time, whether every
// rank paced its flows, and the chunks each rank received.
func cutTimes(rows [][]byte, n int) ([]float64, bool, [][]chunkArrival, error) {
	if len(rows) != n {
		return nil, false, nil, fmt.Errorf("%w: segment probe has %d rows for %d ranks", ErrProtocol, len(rows), n)
	}
	elapsed := make([]float64, n)
	arrivals := make([][]chunkArrival, n)
	paced := true
	for r, row := range rows {
		if len(row) < cutRowHead || (len(row)-cutRowHead)%16 != 0 {
			return nil, false, nil, fmt.Errorf("%w: segment probe row of rank %d has %d bytes", ErrProtocol, r, len(row))
		}
		elapsed[r] = math.Float64frombits(binary.LittleEndian.Uint64(row[:8]))
		paced = paced && row[8] == 1
		for b := row[cutRowHead:]; len(b) > 0; b = b[16:] {
			a := chunkArrival{at: int64(binary.LittleEndian.Uint64(b)), bytes: int64(binary.LittleEndian.Uint64(b[8:]))}
			if a.bytes <= 0 {
				return nil, false, nil, fmt.Errorf("%w: segment probe row of rank %d has a chunk of %d bytes", ErrProtocol, r, a.bytes)
			}
			arrivals[r] = append(arrivals[r], a)
		}
	}
	return elapsed, paced, arrivals, nil
}

// steadyRate is what crossed into the ranks of to per second while
// every flow ran: the bytes of the chunks that arrived after the first
// eighth of all the bytes had and until half had, over that time.
// Arrival times are put on one clock, rank 0's (offsets[r] is added to
// rank r's), so that ranks that left the starting barrier at different
// times do not skew it (an estimate from each rank's time since the
// barrier read up to 16% high). It leaves out the flows' start-up and
// their second half, where flows end and fewer than the segment carries
// are left (the ranks done first, or a rank that a busy machine ran
// late), and where a receiver that the machine starved reads what waited
// in its socket at once: on racks32 the window from a sixth to five
// sixths read 5% above what the uplinks carry, the second half higher
// still, the prefixes of whole arrivals (carried) 10-18% below in one
// probe in five. 0 when it cannot tell: no offsets (or one that is not
// finite), or fewer than 16 chunks.
func steadyRate(arrivals [][]chunkArrival, to []int, offsets []float64) float64 {
	type ev struct{ t, bytes float64 }
	var evs []ev
	total := 0.0
	for _, r := range to {
		if r >= len(offsets) || r >= len(arrivals) || math.IsNaN(offsets[r]) || math.IsInf(offsets[r], 0) {
			return 0
		}
		for _, a := range arrivals[r] {
			evs = append(evs, ev{float64(a.at)/1e9 + offsets[r], float64(a.bytes)})
			total += float64(a.bytes)
		}
	}
	if len(evs) < 16 {
		return 0
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmpDesc(b.t, a.t) })
	sum, lo, loT := 0.0, -1.0, 0.0
	for _, e := range evs {
		sum += e.bytes
		switch {
		case lo < 0 && sum >= total/8:
			lo, loT = sum, e.t
		case lo >= 0 && sum >= total/2:
			if d := e.t - loT; d > 0 && !math.IsInf((sum-lo)/d, 0) {
				return (sum - lo) / d
			}
			return 0
		}
	}
	return 0
}

// inTest returns the times of the ranks of cut.A, then cut.B.
func inTest(elapsed []float64, cut *CutProbe) []float64 {
	var out []float64
	for _, r := range slices.Concat(cut.A, cut.B) {
		if r >= 0 && r < len(elapsed) {
			out = append(out, elapsed[r])
		}
	}
	return out
}

// lastArrival returns the latest time among the ranks of side.
func lastArrival(elapsed []float64, side []int) float64 {
	t := 0.0
	for _, r := range side {
		t = max(t, elapsed[r])
	}
	return t
}

// feed is what the NICs of from can send to those of to in total.
func feed(f *collective.Fabric, from, to []int) float64 {
	out, in := 0.0, 0.0
	for _, a := range from {
		out += f.Out(a)
	}
	for _, b := range to {
		in += f.In(b)
	}
	return min(out, in)
}

// firstStart is the shortest start-up time of a flow from one side to the
// other.
func firstStart(f *collective.Fabric, from, to []int) float64 {
	start := math.Inf(1)
	for _, a := range from {
		for _, b := range to {
			start = min(start, f.StartUp(a, b))
		}
	}
	return start
}

// carried is what the flows of x from the ranks of from into those of to
// carried per second, from the arrivals at each rank of to (elapsed:
// each rank's last, from the common start; start is taken off as the
// flows' start-up): the most that the bytes across by the time the k-th
// rank was done show over that time, for k from all of them down to one
// eighth fewer. The bytes across by then are those of the ranks done,
// and of each rank r not done yet what it cannot have received after
// then at its ingress in(r): each such count is a lower bound of what
// crossed. Counted for nothing, the ranks not done made the bound up to
// 5% looser in racks32's recorded rounds, where the ranks with the
// fastest NICs and the largest flows are often the last to be done. The
// most of them does
// not wait for the last rank or three of 24, which a busy machine can
// run late: the last arrival alone made racks32's uplinks 10-48% low.
// The first arrivals do not count alone: a rank that left the starting
// barrier late finds its data already there and reports a time near 0.
func carried(elapsed []float64, x *collective.Exchange, from, to []int, start float64, in func(r int) float64) float64 {
	type arrival struct{ t, bytes, in float64 }
	var arr []arrival
	for _, r := range to {
		b := 0.0
		for _, a := range from {
			b += float64(x.Bytes[a][r])
		}
		if b > 0 {
			arr = append(arr, arrival{elapsed[r], b, in(r)})
		}
	}
	slices.SortFunc(arr, func(a, b arrival) int { return cmpDesc(b.t, a.t) })
	best, sum := 0.0, 0.0
	first := len(arr) - len(arr)/8 // the fewest ranks a prefix counts
	for k, a := range arr {
		sum += a.bytes
		d := a.t - start
		if k+1 < first || d <= 0 {
			continue
		}
		got := sum
		for _, l := range arr[k+1:] {
			got += max(0, l.bytes-(l.t-a.t)*l.in)
		}
		best = max(best, got/d)
	}
	return best
}

// measureRound is what the flows of x carried each way across cut (A to
// B, then B to A) in a round whose ranks took elapsed and received
// arrivals; starts are the two directions' start-ups (cutStarts).
func measureRound(elapsed []float64, arrivals [][]chunkArrival, x *collective.Exchange, f *collective.Fabric, cut *CutProbe, starts [2]float64, offsets []float64) CutRound {
	return CutRound{
		Carried: [2]float64{carried(elapsed, x, cut.A, cut.B, starts[0], f.In), carried(elapsed, x, cut.B, cut.A, starts[1], f.In)},
		Steady:  [2]float64{steadyRate(arrivals, cut.B, offsets), steadyRate(arrivals, cut.A, offsets)},
	}
}

// cutStarts is the shortest start-up of a flow across cut each way (A to
// B, then B to A).
func cutStarts(f *collective.Fabric, cut *CutProbe) [2]float64 {
	return [2]float64{firstStart(f, cut.A, cut.B), firstStart(f, cut.B, cut.A)}
}

// judgeCut decides, at rank 0, from every rank's time, which directions
// of the cut a segment limits (the last arrival over Threshold times the
// NIC bound), and encodes the result for the others; a limited
// direction's capacity is the most the round shows it carried
// (CutRound.best).
// The segment is between cut.A and rest (the ranks not in A; cut.B is the
// part of them the flows went to). A direction not limited by a segment
// gets the capacity the NICs of A and rest could feed it: then it never
// binds.
func judgeCut(cut *CutProbe, rows [][]byte, f *collective.Fabric, x *collective.Exchange, rest []int, offsets []float64) ([]byte, error) {
	elapsed, paced, arrivals, err := cutTimes(rows, f.Size())
	if err != nil {
		return nil, err
	}
	cut.Paced = paced
	cut.AB, cut.BA = lastArrival(elapsed, cut.B), lastArrival(elapsed, cut.A)
	cut.Elapsed = inTest(elapsed, cut)
	cut.Threshold = segmentThreshold(cut.Paced)
	found := false
	starts := cutStarts(f, cut)
	round := measureRound(elapsed, arrivals, x, f, cut, starts, offsets)
	cut.Rounds = append(cut.Rounds, round)
	capOf := func(t, feedAll float64, dir int) float64 {
		if t > cut.Threshold*cut.Bound && t > starts[dir] {
			if c := round.best(dir); c > 0 {
				found = true
				return min(c, feedAll)
			}
		}
		return feedAll
	}
	seg := collective.Segment{Name: "cut", A: cut.A, B: rest}
	seg.AB = capOf(cut.AB, feed(f, cut.A, rest), 0)
	seg.BA = capOf(cut.BA, feed(f, rest, cut.A), 1)
	var segs []collective.Segment
	if found {
		segs = []collective.Segment{seg}
	}
	return encodeCut(segs, cut)
}

// remeasureCut takes, at rank 0, the capacity of each direction the first
// round found limited from the next round (the flows of x,
// CutRound.best); rest is the segment's other side, as for judgeCut.
func remeasureCut(cut *CutProbe, seg collective.Segment, rows [][]byte, f *collective.Fabric, x *collective.Exchange, rest []int, offsets []float64) ([]byte, error) {
	elapsed, _, arrivals, err := cutTimes(rows, f.Size())
	if err != nil {
		return nil, err
	}
	cut.AB2, cut.BA2 = lastArrival(elapsed, cut.B), lastArrival(elapsed, cut.A)
	cut.Elapsed2 = inTest(elapsed, cut)
	round := measureRound(elapsed, arrivals, x, f, cut, cutStarts(f, cut), offsets)
	cut.Rounds = append(cut.Rounds, round)
	if fd := feed(f, cut.A, rest); seg.AB < fd {
		if c := round.best(0); c > 0 {
			seg.AB = min(c, fd)
		}
	}
	if fd := feed(f, rest, cut.A); seg.BA < fd {
		if c := round.best(1); c > 0 {
			seg.BA = min(c, fd)
		}
	}
	return encodeCut([]collective.Segment{seg}, cut)
}

// cutVerdict is what rank 0 broadcasts after a round of the segment
// probe: the segments found and the test.
type cutVerdict struct {
	Segments []collective.Segment `json:"segments"`
	Cut      *CutProbe            `json:"cut"`
}

func encodeCut(segs []collective.Segment, cut *CutProbe) ([]byte, error) {
	return json.Marshal(cutVerdict{segs, cut})
}
