package netprobe

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

// Port is how the probe exchanges messages with the other ranks. comm
// implements it on a context of its own, so probes cross the same stack as
// the collectives they will plan (the paper's application-level costs).
type Port interface {
	Rank() int
	Size() int
	// Send sends data to peer with a tag; Recv receives the next message
	// from peer with that tag.
	Send(ctx context.Context, peer, tag int, data []byte) error
	Recv(ctx context.Context, peer, tag int) ([]byte, error)
	// Probe waits until a message from peer with tag can be received,
	// without receiving it.
	Probe(ctx context.Context, peer, tag int) error
	Barrier(ctx context.Context) error
	Gather(ctx context.Context, root int, data []byte) ([][]byte, error)
	Bcast(ctx context.Context, root int, data []byte) ([]byte, error)
}

// Config tunes the probe. Zero fields take the documented defaults.
type Config struct {
	// Reps is the number of repetitions per size; the fastest counts.
	// 0 means 3.
	Reps int
	// PingReps is the number of tiny round trips for the latency and the
	// clock offset. 0 means 10.
	PingReps int
	// MinBytes is the first size of a sweep. 0 means 8.
	MinBytes int64
	// MaxBytes caps a sweep. 0 means 2 MiB (80 ms at 200 Mbit/s; on faster
	// links more would only cost time).
	MaxBytes int64
	// MinLargest is the size every sweep reaches at least (unless the
	// budget stops it), so the bandwidth is measured on transfers much
	// larger than any token-bucket burst or TCP's initial window. 0 means
	// 128 KiB.
	MinLargest int64
	// ExtraReps repeats the largest size of a sweep this many more times:
	// it weighs most in the rate. 0 means 1.
	ExtraReps int
	// RepBudget stops the repetitions of one size (after the first) once
	// they have taken this long, and the pings (after three): on
	// long-latency links every round trip is expensive. 0 means 150 ms.
	RepBudget time.Duration
	// MinTime is how long the largest transfer of a sweep must take at
	// least (unless MaxBytes or the budget stops it), so that scheduling
	// jitter and TCP's slow start are small next to it. 0 means 100 ms.
	MinTime time.Duration
	// Dominance: a sweep stops once a transfer takes this many times the
	// smallest message's time. 0 means 8.
	Dominance float64
	// Budget bounds the predicted time of one transfer. 0 means 300 ms.
	Budget time.Duration
	// SegmentTime is how long the segment probe's flows across the
	// likeliest cut take at the NIC rates (see Probe). 0 means 150 ms;
	// negative skips the segment probe.
	SegmentTime time.Duration
	// Cuts are the cuts the segment probe tests first, each given as the
	// ranks of one side (comm passes the ranks of each subnet).
	Cuts [][]int
	// Hosts, when set, names the host of every rank (comm passes each
	// rank's address). No network segment lies between ranks of one
	// host, so the segment probe tests no cut that splits a host's ranks:
	// on one machine, concurrent flows are limited by its CPUs and memory,
	// which a segment would misdescribe. "" matches no other rank.
	Hosts []string
	// Method is how the links are measured: MethodFabric (the default,
	// "" too) measures every NIC and infers the pair rates; MethodPairwise
	// measures every ordered pair in a tournament.
	Method string
	// PingAll: up to this many ranks the fabric probe pings every pair
	// (P-1 rounds); beyond, it pings a sample in a few rounds and infers
	// the other pairs' latencies, pinging them after all if the sample
	// shows that they cannot be inferred (see planPings). 0 means 16;
	// negative samples at any size.
	PingAll int
}

func (c Config) withDefaults() Config {
	if c.Reps <= 0 {
		c.Reps = 3
	}
	if c.PingReps <= 0 {
		c.PingReps = 10
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 8
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 2 << 20
	}
	if c.MinLargest <= 0 {
		c.MinLargest = 128 << 10
	}
	if c.ExtraReps <= 0 {
		c.ExtraReps = 1
	}
	if c.RepBudget <= 0 {
		c.RepBudget = 150 * time.Millisecond
	}
	if c.MinLargest > c.MaxBytes {
		c.MinLargest = c.MaxBytes
	}
	if c.Dominance <= 0 {
		c.Dominance = 8
	}
	if c.MinTime <= 0 {
		c.MinTime = 100 * time.Millisecond
	}
	if c.Budget <= 0 {
		c.Budget = 300 * time.Millisecond
	}
	if c.SegmentTime == 0 {
		c.SegmentTime = 150 * time.Millisecond
	}
	if c.PingAll == 0 {
		c.PingAll = 16
	}
	return c
}

// Result is the directory every rank ends up with.
type Result struct {
	// Model holds, for every ordered pair, the start-up time and rate, and
	// every rank's send and receive overheads.
	Model *collective.Model `json:"model"`
	// Offsets[r] is added to rank r's clock to read rank 0's (seconds).
	Offsets []float64 `json:"offsets"`
	// Seconds is how long the probe took (0 for a cached result).
	Seconds float64 `json:"seconds"`
	// Pairs records every probe of the tournament, as each of its ranks
	// saw it.
	Pairs []PairRecord `json:"pairs,omitempty"`
	// Reprobed lists the directions measured again after the tournament
	// (see Suspects), in the order of Reprobes.
	Reprobed []Pair `json:"reprobed,omitempty"`
	// Reprobes lists the steps of the re-measurement: the directions of
	// one step were measured at the same time; a step of one direction
	// measured it alone (see reprobe).
	Reprobes [][]Pair `json:"reprobes,omitempty"`
	// Cuts records the segment probe's tests, if it ran (see Probe).
	Cuts []CutProbe `json:"cuts,omitempty"`
	// Flows records the fabric probe's flows (MethodFabric), in order.
	Flows []FlowRecord `json:"flows,omitempty"`
}

// PairRecord is one probe of the tournament as one of its two ranks
// (Rank) saw it: every rank records every probe it takes part in, on its
// own clock, so "no rank is in two probes at once" can be checked without
// comparing clocks.
type PairRecord struct {
	Rank       int // who recorded it: A or B
	A, B       int // A measured first (see Schedule)
	Round      int
	Start, End float64 // seconds on Rank's clock, from the start of the probe
}

// Probe tags (within the probe's own context).
const (
	tagData = 1
	tagAck  = 2
	tagPing = 4
	tagPong = 5
	tagFix  = 6
)

// row is what one rank measured: its links as a sender, its overheads, its
// clock offset and the probes it led.
type row struct {
	Rank      int                 `json:"rank"`
	Latency   []float64           `json:"latency"`
	Bandwidth []float64           `json:"bandwidth"`
	Send      collective.Overhead `json:"send"`
	Recv      collective.Overhead `json:"recv"`
	Offset    float64             `json:"offset"`
	Pairs     []PairRecord        `json:"pairs"`
	// Clock holds, for every peer this rank pinged (the fabric probe),
	// the peer's clock minus this rank's (seconds), from the echo of
	// least delay.
	Clock map[int]float64 `json:"clock,omitempty"`
}

// Probe measures the links between the ranks and assembles the model at
// rank 0, which broadcasts it: every rank returns the same Result. It is
// collective. By default (MethodFabric) it measures every rank's NICs and
// infers the pair rates from them (see the package documentation and
// probeFabric); with MethodPairwise it measures every ordered pair. Pairs
// are probed in the rounds of a round-robin tournament with a barrier
// between rounds, so no rank takes part in two probes at once; within a
// round, which end of each pair measures first balances the flows across
// the likely cuts of the ranks (see Schedule). It is collective.
//
// For each direction i->j, rank i sends a sweep of sizes (see Config), each
// answered by an 8-byte acknowledgement, and fits the one-way times to
// T + m/B: B per direction from the large transfers, T as half the round
// trip of tiny messages. Rates may differ between the directions of a
// link and are measured as such; a difference of one-way delays is not
// observable without a common clock, so T_ij = T_ji = RTT/2.
//
// When p is a RailPort with several rails, every rail is probed in turn
// (all traffic pinned to it) and the model lists each in Rails; its
// top-level matrices are each pair's rails summed up under the rail
// policy (see RailPort).
//
// Pair probes cannot see a link that several pairs share, such as a
// backbone between two clusters. So, last, the segment probe tests the
// likely cuts (Config.Cuts, then what the pair rates and the launchers'
// placement suggest: see candidateCuts) one after the other: every rank
// on one side sends to every rank on the other side at once, in both
// directions, for about Config.SegmentTime at the NIC rates. The flows
// are paced to their shares of the fabric bound when p is a PacedPort. A
// direction that takes much longer than the bound (see CutProbe) is
// limited by a shared segment, whose capacity is the bytes that crossed
// it over the time they took; the model lists the first one found in
// Segments, and Result.Cuts records the tests.
func Probe(ctx context.Context, p Port, cfg Config) (*Result, error) {
	var res *Result
	var err error
	if rp, ok := p.(RailPort); ok && rp.Rails() > 1 {
		if res, err = probeRails(ctx, rp, cfg); err == nil {
			rp.UseCosts(res.Model)
		}
	} else {
		res, err = probeLinks(ctx, p, cfg)
	}
	if err != nil {
		return nil, err
	}
	start := time.Now()
	segs, cuts, err := probeSegments(ctx, p, res.Model, res.Offsets, cfg)
	if err == nil && cfg.Method != MethodPairwise {
		capInferred(res, segs)
	}
	if err != nil {
		return nil, err
	}
	res.Model.Segments, res.Cuts = segs, cuts
	res.Seconds += time.Since(start).Seconds()
	return res, nil
}

// RailPort is a Port whose ranks reach each other over several rails (one
// per NIC or address).
type RailPort interface {
	Port
	// Rails is the number of rails; the same on every rank.
	Rails() int
	// UseRail sends everything this rank sends on rail i from now on (a
	// pair with fewer rails uses its last); i < 0 returns to the policy.
	UseRail(i int)
	// RailPolicy is the policy the rails are used under, for the
	// top-level (effective) costs of the model.
	RailPolicy() transport.RailPolicy
	// UseCosts gives the rails the costs the probe measured (m lists
	// them in Rails), so that what goes over several rails is split by
	// them from then on: the segment probe, which runs next, must not
	// see a slow rail given an even share.
	UseCosts(m *collective.Model)
}

// probeRails probes every rail of a RailPort in turn.
func probeRails(ctx context.Context, p RailPort, cfg Config) (*Result, error) {
	defer p.UseRail(-1)
	n := p.Size()
	var res *Result
	var rails []collective.Rail
	var seconds float64
	for i := 0; i < p.Rails(); i++ {
		p.UseRail(i)
		// Every rail by the tournament: the fabric probe's concurrent
		// flows, pinned to one rail of hosts with two, measured rates 15
		// to 35% low on dualnic4 (TestRailsProbeNetlab).
		r, err := probeOnce(ctx, p, cfg)
		if err != nil {
			return nil, fmt.Errorf("netprobe: rail %d: %w", i, err)
		}
		rails = append(rails, collective.Rail{Name: fmt.Sprintf("rail%d", i), Latency: r.Model.Latency, Bandwidth: r.Model.Bandwidth})
		seconds += r.Seconds
		if res == nil {
			res = r // overheads and clock offsets from the first rail
		} else {
			res.Pairs = append(res.Pairs, r.Pairs...)
			res.Flows = append(res.Flows, r.Flows...)
			res.Reprobed = append(res.Reprobed, r.Reprobed...)
		}
	}
	m := *res.Model
	m.Latency, m.Bandwidth, m.PerByte = collective.Matrix(n, 0), collective.Matrix(n, 0), nil
	m.Rails = rails
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a == b {
				continue
			}
			e := EffectiveRails(&m, a, b, p.RailPolicy())
			m.Latency[a][b], m.Bandwidth[a][b] = e.Latency, e.Bandwidth
		}
	}
	res.Model, res.Seconds = &m, seconds
	return res, nil
}

// probeLinks measures the links by cfg's method.
func probeLinks(ctx context.Context, p Port, cfg Config) (*Result, error) {
	if cfg.Method == MethodPairwise {
		return probeOnce(ctx, p, cfg)
	}
	if n := p.Size(); n > oneHostAll && oneHost(cfg, n) {
		return probeOneHost(ctx, p, cfg)
	}
	return probeFabric(ctx, p, cfg)
}

func probeOnce(ctx context.Context, p Port, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	n, me := p.Size(), p.Rank()
	start := time.Now()
	r := &row{Rank: me, Latency: make([]float64, n), Bandwidth: make([]float64, n)}
	buf := make([]byte, cfg.MaxBytes)
	var sendS, recvS []Sample
	if err := p.Barrier(ctx); err != nil {
		return nil, err
	}
	base := time.Now()
	for ri, round := range Schedule(n) {
		for _, pr := range round {
			if pr.A != me && pr.B != me {
				continue
			}
			peer := pr.B
			if pr.B == me {
				peer = pr.A
			}
			t0 := time.Since(base).Seconds()
			// A measures first, then B (see Schedule).
			for _, sender := range []int{pr.A, pr.B} {
				if sender == me {
					f, ss, err := measure(ctx, p, peer, cfg, buf)
					if err != nil {
						return nil, fmt.Errorf("netprobe: probing %d->%d: %w", me, peer, err)
					}
					r.Latency[peer], r.Bandwidth[peer] = f.Latency, f.Bandwidth
					if math.IsInf(f.Bandwidth, 0) {
						r.Bandwidth[peer] = 0 // too fast to see: assemble fills it in
					}
					sendS = append(sendS, ss...)
				} else {
					rs, err := echo(ctx, p, peer, buf)
					if err != nil {
						return nil, fmt.Errorf("netprobe: echoing %d->%d: %w", peer, me, err)
					}
					recvS = append(recvS, rs...)
				}
			}
			// Clock offset against rank 0, measured by the other rank.
			if pr.A == 0 || pr.B == 0 {
				off, err := clockOffset(ctx, p, me, peer, cfg)
				if err != nil {
					return nil, fmt.Errorf("netprobe: clock offset with %d: %w", peer, err)
				}
				if me != 0 {
					r.Offset = off
				}
			}
			r.Pairs = append(r.Pairs, PairRecord{Rank: me, A: pr.A, B: pr.B, Round: ri, Start: t0, End: time.Since(base).Seconds()})
		}
		if err := p.Barrier(ctx); err != nil {
			return nil, err
		}
	}
	r.Send = overhead(sendS)
	r.Recv = overhead(recvS)
	mine, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	rows, err := p.Gather(ctx, 0, mine)
	if err != nil {
		return nil, err
	}
	var res *Result
	if me == 0 {
		if res, err = assemble(rows, n); err != nil {
			return nil, err
		}
	}
	// Probes of one round share no rank, but they may share a link of the
	// network's core (two clusters behind one backbone): the directions
	// whose rate disagrees with what both their ends achieve with others
	// are measured again (see reprobe).
	steps, err := reprobe(ctx, p, res, cfg, buf)
	if err != nil {
		return nil, err
	}
	var dir []byte
	if me == 0 {
		fixRates(res.Model)
		res.Reprobes = steps
		for _, st := range steps {
			res.Reprobed = append(res.Reprobed, st...)
		}
		res.Seconds = time.Since(start).Seconds()
		if dir, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	if dir, err = p.Bcast(ctx, 0, dir); err != nil {
		return nil, err
	}
	return DecodeResult(dir, n)
}

// DecodeResult parses and validates a directory for n ranks.
func DecodeResult(b []byte, n int) (*Result, error) {
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("netprobe: directory: %w", err)
	}
	if res.Model == nil || res.Model.Size() != n || len(res.Offsets) != n {
		return nil, fmt.Errorf("netprobe: directory is not for %d ranks", n)
	}
	if err := res.Model.Validate(); err != nil {
		return nil, fmt.Errorf("netprobe: directory: %w", err)
	}
	return &res, nil
}

// assemble builds the model from every rank's row.
func assemble(rows [][]byte, n int) (*Result, error) {
	res, _, err := assembleClocks(rows, n)
	return res, err
}

// assembleClocks is assemble that also returns every row's Clock.
func assembleClocks(rows [][]byte, n int) (*Result, []map[int]float64, error) {
	m := &collective.Model{Latency: collective.Matrix(n, 0), Bandwidth: collective.Matrix(n, 0),
		SendOverhead: make([]collective.Overhead, n), RecvOverhead: make([]collective.Overhead, n)}
	res := &Result{Model: m, Offsets: make([]float64, n)}
	clocks := make([]map[int]float64, n)
	for i, b := range rows {
		var r row
		if err := json.Unmarshal(b, &r); err != nil || r.Rank != i || len(r.Latency) != n || len(r.Bandwidth) != n {
			return nil, nil, fmt.Errorf("netprobe: rank %d sent a malformed measurement row", i)
		}
		for peer, off := range r.Clock {
			if peer < 0 || peer >= n || peer == i || math.IsNaN(off) || math.IsInf(off, 0) {
				return nil, nil, fmt.Errorf("netprobe: rank %d sent a malformed measurement row (clock of peer %d)", i, peer)
			}
		}
		clocks[i] = r.Clock
		copy(m.Latency[i], r.Latency)
		copy(m.Bandwidth[i], r.Bandwidth)
		m.SendOverhead[i], m.RecvOverhead[i] = r.Send, r.Recv
		res.Offsets[i] = r.Offset
		res.Pairs = append(res.Pairs, r.Pairs...)
	}

	sort.SliceStable(res.Pairs, func(a, b int) bool {
		if res.Pairs[a].Rank != res.Pairs[b].Rank {
			return res.Pairs[a].Rank < res.Pairs[b].Rank
		}
		return res.Pairs[a].Start < res.Pairs[b].Start
	})
	return res, clocks, nil
}

// fixRates gives a link too fast for the sizes used to see its rate (0 or
// infinite) the fastest rate measured anywhere (or 10 GB/s): finite, and
// never slower than what was seen.
func fixRates(m *collective.Model) {
	fastest := 0.0
	for i := range m.Bandwidth {
		for j, bw := range m.Bandwidth[i] {
			if i != j && !math.IsInf(bw, 0) && bw > fastest {
				fastest = bw
			}
		}
	}
	if fastest == 0 {
		fastest = 10e9
	}
	for i := range m.Bandwidth {
		m.Latency[i][i] = 0
		m.Bandwidth[i][i] = 0
		for j := range m.Bandwidth[i] {
			if i != j && (math.IsInf(m.Bandwidth[i][j], 0) || m.Bandwidth[i][j] <= 0) {
				m.Bandwidth[i][j] = fastest
			}
		}
	}
}

// Suspects lists the directions (A -> B) whose probed rate disagrees with
// what both their ends achieve with the other ranks: below 0.9 or above
// 1.1 times the smaller of A's best rate to others and B's best rate from
// others (expected). Probed in parallel with host-disjoint pairs, such a
// direction probably shared a link of the network's core with another
// probe (or met noise); it is worth measuring again. Unmeasurable (0)
// rates are left out.
func Suspects(m *collective.Model) []Pair {
	n := m.Size()
	var out []Pair
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if suspect(m, i, j) {
				out = append(out, Pair{A: i, B: j})
			}
		}
	}
	return out
}

func suspect(m *collective.Model, i, j int) bool {
	bw := m.Bandwidth[i][j]
	if i == j || bw <= 0 || math.IsInf(bw, 0) {
		return false
	}
	ref := expected(m, i, j)
	return ref > 0 && !math.IsInf(ref, 0) && (bw < 0.9*ref || bw > 1.1*ref)
}

// expected is the rate i -> j should have if only i's sending and j's
// receiving limited it: the smaller of i's best rate to the other ranks
// and j's best rate from them (0 when they have none).
func expected(m *collective.Model, i, j int) float64 {
	bestOut, bestIn := 0.0, 0.0
	for k := 0; k < m.Size(); k++ {
		if k != i && k != j {
			bestOut = max(bestOut, m.Bandwidth[i][k])
			bestIn = max(bestIn, m.Bandwidth[k][j])
		}
	}
	return min(bestOut, bestIn)
}

// measureRate measures the rate to peer again, on large transfers only
// (the latency is the tournament's; three tiny round trips may only lower
// it): one transfer of a quarter of largest, the size expected to take
// Config.MinTime with a margin, which warms the connection up and resizes
// largest if the rate is far from the expected one, then three transfers
// of largest (up to Config.Reps while within Config.RepBudget). The rate
// is largest over their median time less the tiny round trip's.
//
// The tournament's fit, the slope between the fastest times of several
// sizes, needs its many repetitions: with fewer, whether a size's fastest
// one rode a token bucket's burst is luck, and on switch8's 20 Mbit/s
// links such slopes missed by up to 20%. This ratio came within 10% of the
// shaping on 167 of 168 directions there (mean -4.4%: TCP carries about
// 95.5% of a link; the tournament's slopes, mean -2.2%, read bursts as
// rate), at about three quarters of the cost of measure.
func measureRate(ctx context.Context, p Port, peer int, cfg Config, buf []byte, largest int64) (Fit, error) {
	rtt := math.Inf(1)
	for i := 0; i < min(cfg.PingReps, 3); i++ {
		t0 := time.Now()
		if err := p.Send(ctx, peer, tagData, buf[:1]); err != nil {
			return Fit{}, err
		}
		if _, err := p.Recv(ctx, peer, tagAck); err != nil {
			return Fit{}, err
		}
		rtt = math.Min(rtt, time.Since(t0).Seconds())
	}
	send := func(m int64) (float64, error) {
		t0 := time.Now()
		if err := p.Send(ctx, peer, tagData, buf[:m]); err != nil {
			return 0, err
		}
		if _, err := p.Recv(ctx, peer, tagAck); err != nil {
			return 0, err
		}
		// The transfer itself: the message's and the acknowledgement's
		// latencies make up the tiny round trip.
		return time.Since(t0).Seconds() - rtt, nil
	}
	largest = min(max(largest, 4), cfg.MaxBytes)
	target := 1.2 * cfg.MinTime.Seconds()
	// resize picks the size that takes target at the rate m bytes in t
	// seconds showed, when the current one would be off by twice.
	resize := func(m int64, t float64) bool {
		predicted := t * float64(largest) / float64(m)
		if t <= 0 || (predicted <= 2*target && predicted >= target/2) {
			return false
		}
		size := min(max(int64(float64(m)/t*min(target, cfg.Budget.Seconds())), cfg.MinLargest), cfg.MaxBytes)
		changed := size != largest
		largest = size
		return changed
	}
	t, err := send(largest / 4)
	if err != nil {
		return Fit{}, err
	}
	resize(largest/4, t)
	var times []float64
	start, resized := time.Now(), 0
	for rep := 0; rep < max(cfg.Reps, 3); rep++ {
		if rep >= 3 && time.Since(start) > cfg.RepBudget {
			break
		}
		t, err := send(largest)
		if err != nil {
			return Fit{}, err
		}
		// A small transfer's fixed costs hide a fast rate: the first of
		// the new size may call for another (twice at most).
		if rep == 0 && resized < 2 && resize(largest, t) {
			resized++
			rep--
			continue
		}
		times = append(times, t)
	}
	if err := p.Send(ctx, peer, tagData, nil); err != nil {
		return Fit{}, err
	}
	f := Fit{Latency: rtt / 2, Bandwidth: math.Inf(1)}
	if t := collective.Median(times); t > 0 {
		f.Bandwidth = float64(largest) / t
	}
	return f, nil
}

// measure sends a sweep of messages to peer, each answered by a one-byte
// acknowledgement, and fits the one-way cost. It also returns the time the
// Send calls took (the send overhead samples).
func measure(ctx context.Context, p Port, peer int, cfg Config, buf []byte) (Fit, []Sample, error) {
	// Round-trip of tiny messages: the acknowledgement's one-way time is
	// half of it.
	rtt := math.Inf(1)
	pingStart := time.Now()
	for i := 0; i < cfg.PingReps; i++ {
		if i >= 3 && time.Since(pingStart) > cfg.RepBudget {
			break
		}
		t0 := time.Now()
		if err := p.Send(ctx, peer, tagData, buf[:1]); err != nil {
			return Fit{}, nil, err
		}
		if _, err := p.Recv(ctx, peer, tagAck); err != nil {
			return Fit{}, nil, err
		}
		rtt = math.Min(rtt, time.Since(t0).Seconds())
	}
	var samples, sends []Sample
	sw := Sweep{MinBytes: cfg.MinBytes, MaxBytes: cfg.MaxBytes, Dominance: cfg.Dominance, Budget: cfg.Budget.Seconds()}
	var largest int64
	send := func(m int64) (float64, error) {
		t0 := time.Now()
		if err := p.Send(ctx, peer, tagData, buf[:m]); err != nil {
			return 0, err
		}
		t1 := time.Now()
		if _, err := p.Recv(ctx, peer, tagAck); err != nil {
			return 0, err
		}
		oneWay := time.Since(t0).Seconds() - rtt/2
		samples = append(samples, Sample{m, oneWay})
		if m <= overheadMaxBytes {
			sends = append(sends, Sample{m, t1.Sub(t0).Seconds()})
		}
		return oneWay, nil
	}
	for {
		m, ok := sw.Next()
		if !ok {
			// Make sure the rate is seen on a large and long enough transfer.
			if (largest >= cfg.MinLargest && sw.Growth() >= cfg.MinTime.Seconds()) || largest*4 > cfg.MaxBytes || sw.Growth()*4 > sw.Budget {
				break
			}
			// Grow toward the size that meets both floors, predicted from
			// the last transfer's time, and no further: slow links cost most.
			need := cfg.MinLargest
			if g := sw.Growth(); g > 0 {
				if byTime := int64(float64(largest) * cfg.MinTime.Seconds() / g * 1.2); byTime > need {
					need = byTime
				}
			}
			m, sw.done = min(largest*4, max(need, largest+1), cfg.MaxBytes), false
			sw.last = m
		}
		largest = m
		best := math.Inf(1)
		sizeStart := time.Now()
		for rep := 0; rep < cfg.Reps; rep++ {
			if rep > 0 && time.Since(sizeStart) > cfg.RepBudget {
				break
			}
			t, err := send(m)
			if err != nil {
				return Fit{}, nil, err
			}
			best = math.Min(best, t)
		}
		sw.Observe(best)
	}
	for rep := 0; rep < cfg.ExtraReps && largest > 0; rep++ {
		if _, err := send(largest); err != nil {
			return Fit{}, nil, err
		}
	}
	// An empty data message ends the sweep (data messages are never empty).
	if err := p.Send(ctx, peer, tagData, nil); err != nil {
		return Fit{}, nil, err
	}
	f, err := fitProbe(samples, rtt/2)
	return f, sends, err
}

// fitProbe fits the bandwidth on the large transfers only (at least 1/16
// of the largest, where the m/B term dominates: smaller ones ride a token
// bucket's burst or TCP's initial window, and their timing noise would
// tilt the slope; the median slope over three sizes beats a two-point
// slope, which TCP's start-up phase bends) and takes the latency from the
// tiny round trip.
func fitProbe(samples []Sample, oneWaySmall float64) (Fit, error) {
	var largest int64
	for _, s := range samples {
		if s.Bytes > largest {
			largest = s.Bytes
		}
	}
	var big []Sample
	for _, s := range samples {
		if s.Bytes*16 >= largest {
			big = append(big, s)
		}
	}
	f, err := FitLine(big)
	if err != nil {
		f, err = FitLine(samples)
		if err != nil {
			return Fit{}, err
		}
	}
	f.Latency = oneWaySmall
	return f, nil
}

// overheadMaxBytes bounds the sizes the send and receive overheads are
// fitted on: beyond a socket buffer, a Send call also waits for the
// transmission, which is not overhead.
const overheadMaxBytes = 64 << 10

// echo answers every message from peer with an acknowledgement that
// holds this rank's clock (8 bytes, nanoseconds since 1970, little
// endian; ping reads it for the clock offset) until peer says it is done.
// It returns receive-overhead samples: how long each Recv call took once
// its message had arrived.
func echo(ctx context.Context, p Port, peer int, buf []byte) ([]Sample, error) {
	var samples []Sample
	for {
		if err := p.Probe(ctx, peer, tagData); err != nil {
			return nil, err
		}
		t0 := time.Now()
		data, err := p.Recv(ctx, peer, tagData)
		if err != nil {
			return nil, err
		}
		if len(data) == 0 { // the sweep is over
			return samples, nil
		}
		if len(data) <= overheadMaxBytes {
			samples = append(samples, Sample{int64(len(data)), time.Since(t0).Seconds()})
		}
		var ack [8]byte
		binary.LittleEndian.PutUint64(ack[:], uint64(time.Now().UnixNano()))
		if err := p.Send(ctx, peer, tagAck, ack[:]); err != nil {
			return nil, err
		}
	}
}

// overhead fits Const + PerByte*m to per-call times (send or receive).
func overhead(s []Sample) collective.Overhead {
	f, err := FitLine(s)
	if err != nil {
		if len(s) == 0 {
			return collective.Overhead{}
		}
		best := math.Inf(1)
		for _, x := range s {
			best = math.Min(best, x.Seconds)
		}
		return collective.Overhead{Const: best}
	}
	o := collective.Overhead{Const: f.Latency}
	if !math.IsInf(f.Bandwidth, 0) && f.Bandwidth > 0 {
		o.PerByte = 1 / f.Bandwidth
	}
	return o
}

// clockOffset estimates rank 0's clock minus the other rank's with the
// round trip of least delay (Cristian's method). Rank 0 answers; the other
// rank measures.
func clockOffset(ctx context.Context, p Port, me, peer int, cfg Config) (float64, error) {
	var b [8]byte
	if me == 0 {
		for i := 0; i < cfg.PingReps; i++ {
			if _, err := p.Recv(ctx, peer, tagPing); err != nil {
				return 0, err
			}
			binary.LittleEndian.PutUint64(b[:], uint64(time.Now().UnixNano()))
			if err := p.Send(ctx, peer, tagPong, b[:]); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
	bestRTT, offset := math.Inf(1), 0.0
	for i := 0; i < cfg.PingReps; i++ {
		t1 := time.Now()
		if err := p.Send(ctx, peer, tagPing, b[:1]); err != nil {
			return 0, err
		}
		reply, err := p.Recv(ctx, peer, tagPong)
		if err != nil {
			return 0, err
		}
		t3 := time.Now()
		if len(reply) != 8 {
			return 0, errors.New("malformed clock reply")
		}
		t2 := float64(int64(binary.LittleEndian.Uint64(reply))) / 1e9
		rtt := t3.Sub(t1).Seconds()
		if rtt < bestRTT {
			mid := float64(t1.UnixNano())/1e9 + rtt/2
			bestRTT, offset = rtt, t2-mid
		}
	}
	return offset, nil
}
