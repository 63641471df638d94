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

// The fabric probe (MethodFabric, the default) measures what the fabric
// model needs instead of every ordered pair: every rank's latency to
// every other from tiny round trips, each NIC's egress and ingress
// capacity from steps of concurrent flows that cannot share a bottleneck,
// and (in Probe) the shared segments across the groups of ranks. A pair's
// rate is then inferred, min(egress of its sender, ingress of its
// receiver), and measured only when that inference is in doubt.

// Probing methods (Config.Method).
const (
	// MethodFabric measures NICs and segments and infers the pair rates.
	MethodFabric = "fabric"
	// MethodPairwise measures every ordered pair in a round-robin
	// tournament (HETCOMM_PROBE=pairwise).
	MethodPairwise = "pairwise"
)

// FlowRecord is one flow of the fabric probe: Rate is what A sent to B
// (bytes per second) in step Step, at the same time as the step's other
// flows, which shared no rank and crossed no group boundary in the same
// direction as another.
type FlowRecord struct {
	Step int     `json:"step"`
	A    int     `json:"a"`
	B    int     `json:"b"`
	Rate float64 `json:"rate"`
	// Doubt says the flow was measured because its inferred rate was in
	// doubt (after the rounds that measure the NICs).
	Doubt bool `json:"doubt,omitempty"`
	// Fan says A sent to several receivers at once in this step (a
	// fan-out, one record per receiver): Rate is what reached B, and
	// Aggregate what A sent to them all.
	Fan       bool    `json:"fan,omitempty"`
	Aggregate float64 `json:"aggregate,omitempty"`
}

// flowTime is how long the largest transfer of a fabric-probe flow should
// take: shorter than the tournament's (Config.MinTime), with the median of
// three transfers. On switch8 60 ms kept every pair within 10% (mean
// -3.5 to -3.9%: TCP carries about 95.5% of a link) in 2.2-2.3 s; 80 ms
// took 2.7-3.0 s.
const flowTime = 60 * time.Millisecond

// The steps that measure the NICs (the first, then those planned from
// what it found) are at least minNICRounds, and at most maxNICRounds
// while more pairs are in doubt than twice the ranks (a step of doubts
// measures at most one flow per rank, and less across groups: on racks
// of eight the NIC steps at 256 ranks took the steps from 149 to 13).
// What is still in doubt after them is measured pair by pair.
const (
	minNICRounds = 5
	maxNICRounds = 12
)

// rankGroups assigns every rank to a group: the hints (Config.Cuts, which
// comm fills with the ranks of each subnet) where they are disjoint, one
// group for the ranks no hint names. Flows inside a group share no
// segment; between groups they may.
func rankGroups(n int, hints [][]int) []int {
	g := make([]int, n)
	for r := range g {
		g[r] = -1
	}
	next := 0
	for _, h := range hints {
		used := false
		for _, r := range h {
			if r >= 0 && r < n && g[r] < 0 {
				g[r], used = next, true
			}
		}
		if used {
			next++
		}
	}
	for r := range g {
		if g[r] < 0 {
			g[r] = next
		}
	}
	return g
}

// probeFabric measures the latencies and the NICs of the ranks and
// assembles a model whose rates are measured or inferred (see
// fabricPlan). It is collective; every rank returns the same result.
func probeFabric(ctx context.Context, p Port, cfg Config) (*Result, error) {
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
	// Latencies: the pairs planPings chooses, every one or a sample (see
	// pings.go), in rounds without barriers (the tiny messages of one
	// round cannot share a bottleneck to any extent that matters, and each
	// pair waits for its own ends), A pinging B.
	groups := rankGroups(n, cfg.Cuts)
	pp := planPings(n, groups, cfg.Hosts, cfg)
	r.Clock = map[int]float64{}
	pingPair := func(ri int, pr Pair) error {
		peer := pr.B
		if pr.B == me {
			peer = pr.A
		}
		t0 := time.Since(base).Seconds()
		// A pings B (the latency is the same both ways); B pings A too
		// in the first rounds only, for its send overhead samples.
		senders := []int{pr.A}
		if ri < overheadRounds {
			senders = append(senders, pr.B)
		}
		for _, sender := range senders {
			if sender == me {
				rtt, off, ss, err := ping(ctx, p, peer, buf, ri < overheadRounds)
				if err != nil {
					return fmt.Errorf("netprobe: pinging %d->%d: %w", me, peer, err)
				}
				if r.Latency[peer] == 0 || rtt/2 < r.Latency[peer] {
					r.Latency[peer], r.Clock[peer] = rtt/2, off
				}
				sendS = append(sendS, ss...)
			} else {
				rs, err := echo(ctx, p, peer, buf)
				if err != nil {
					return fmt.Errorf("netprobe: echoing %d->%d: %w", peer, me, err)
				}
				recvS = append(recvS, rs...)
			}
		}
		r.Pairs = append(r.Pairs, PairRecord{Rank: me, A: pr.A, B: pr.B, Round: ri, Start: t0, End: time.Since(base).Seconds()})
		return nil
	}
	pingRounds := func(rounds [][]Pair, first int) error {
		for k, round := range rounds {
			for _, pr := range round {
				if pr.A == me || pr.B == me {
					if err := pingPair(first+k, pr); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := pingRounds(pp.rounds, 0); err != nil {
		return nil, err
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
	// A sample: rank 0 fits the latencies and checks the fit; if it
	// misses, the other pairs are pinged too (in the tournament's rounds)
	// and their rows gathered again.
	var res *Result
	var clocks []map[int]float64
	var lm *latencyModel
	if me == 0 {
		if res, clocks, err = assembleClocks(rows, n); err != nil {
			return nil, err
		}
		symmetricLatency(res.Model.Latency)
	}
	if !pp.all {
		var verdict []byte
		if me == 0 {
			verdict = []byte{1}
			if lm = fitPings(res.Model.Latency, groups, cfg.Hosts, pp); lm != nil {
				verdict[0] = 0
			}
		}
		if verdict, err = p.Bcast(ctx, 0, verdict); err != nil {
			return nil, err
		}
		if len(verdict) != 1 {
			return nil, fmt.Errorf("%w: a latency verdict of %d bytes", ErrProtocol, len(verdict))
		}
		if verdict[0] == 1 {
			pinged := map[Pair]bool{}
			for _, round := range pp.rounds {
				for _, pr := range round {
					pinged[pr] = true
				}
			}
			var rest [][]Pair
			for _, round := range Tournament(n) {
				var left []Pair
				for _, pr := range round {
					if !pinged[pr] {
						left = append(left, pr)
					}
				}
				if len(left) > 0 {
					rest = append(rest, left)
				}
			}
			if err := pingRounds(rest, len(pp.rounds)); err != nil {
				return nil, err
			}
			if mine, err = json.Marshal(r); err != nil {
				return nil, err
			}
			if rows, err = p.Gather(ctx, 0, mine); err != nil {
				return nil, err
			}
			if me == 0 {
				if res, clocks, err = assembleClocks(rows, n); err != nil {
					return nil, err
				}
				symmetricLatency(res.Model.Latency)
			}
		}
	}
	var plan *fabricPlan
	if me == 0 {
		m := res.Model
		if lm != nil {
			for i := range n {
				for j := range n {
					if i != j && m.Latency[i][j] == 0 {
						m.Latency[i][j] = lm.at(i, j)
					}
				}
			}
		}
		res.Offsets = composeOffsets(n, clocks)
		plan = newFabricPlan(n, groups, cfg)
		plan.latency = m.Latency
	}
	// Flows may be larger than a sweep's transfers (twice its largest).
	flows, err := runFlows(ctx, p, plan, cfg, make([]byte, 2*cfg.MaxBytes))
	if err != nil {
		return nil, err
	}
	var dir []byte
	if me == 0 {
		m := res.Model
		m.Bandwidth = plan.Rates()
		fixRates(m)
		res.Flows = flows
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

// overheadRounds is how many rounds of the pings go both ways: enough
// small messages for every rank's send and receive overheads.
const overheadRounds = 3

// ping measures the round trip of tiny messages to peer (which echoes),
// and with overheads sends a few small ones for the send overhead (buf
// is only read: pings to several peers share it). It returns the
// shortest round trip, the peer's clock minus this rank's at the echo of
// that round trip (Cristian's method: the echo is taken to be half-way),
// and the Send calls' times.
func ping(ctx context.Context, p Port, peer int, buf []byte, overheads bool) (rtt, offset float64, sends []Sample, err error) {
	rtt = math.Inf(1)
	sizes := []int{1, 1, 1, 1, 1}
	if overheads {
		sizes = append(sizes, 1<<10, 4<<10)
	}
	for _, m := range sizes {
		t0 := time.Now()
		if err := p.Send(ctx, peer, tagData, buf[:m]); err != nil {
			return 0, 0, nil, err
		}
		t1 := time.Now()
		ack, err := p.Recv(ctx, peer, tagAck)
		if err != nil {
			return 0, 0, nil, err
		}
		t3 := time.Now()
		sends = append(sends, Sample{int64(m), t1.Sub(t0).Seconds()})
		if d := t3.Sub(t0).Seconds(); m == 1 && d < rtt {
			rtt = d
			if len(ack) == 8 {
				echoed := float64(int64(binary.LittleEndian.Uint64(ack))) / 1e9
				offset = echoed - (float64(t0.UnixNano())/1e9 + d/2)
			}
		}
	}
	if err := p.Send(ctx, peer, tagData, nil); err != nil {
		return 0, 0, nil, err
	}
	return rtt, offset, sends, nil
}

// flowItem is one flow of a step and the size its transfers should have
// (0: unknown, measureFlow finds it).
type flowItem struct {
	A, B  int
	Bytes int64
	Doubt bool
	// Fan marks the flows of a fan-out: A sends to every B of the step's
	// Fan items at once, and their rate is the aggregate.
	Fan bool `json:",omitempty"`
	// RTT is the pair's round trip of tiny messages from the pings (a
	// minimum over several), which the flow's own pings can only lower.
	RTT float64
}

// shareStep gives every rank the step that next (called at rank 0 only)
// decides there.
func shareStep[T any](ctx context.Context, p Port, next func() []T, what string) ([]T, error) {
	var msg []byte
	if p.Rank() == 0 {
		var err error
		if msg, err = json.Marshal(next()); err != nil {
			return nil, err
		}
	}
	msg, err := p.Bcast(ctx, 0, msg)
	if err != nil {
		return nil, err
	}
	var step []T
	if err := json.Unmarshal(msg, &step); err != nil {
		return nil, fmt.Errorf("netprobe: %s: %w", what, err)
	}
	return step, nil
}

// runFlows runs the steps rank 0's plan (nil elsewhere) decides, one at a
// time: every rank sends at most one flow and receives at most one, and
// the senders' rates are gathered at rank 0. It returns the flows at rank
// 0 (nil elsewhere).
func runFlows(ctx context.Context, p Port, plan *fabricPlan, cfg Config, buf []byte) ([]FlowRecord, error) {
	me := p.Rank()
	var records []FlowRecord
	for step := 0; ; step++ {
		items, err := shareStep(ctx, p, func() []flowItem { return plan.Next() }, "flow step")
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return records, nil
		}
		// This rank's flows (one, or a fan-out's), and the rates it
		// reports: the aggregate, then each flow's.
		var peers []int
		var rtts []float64
		var largest int64
		for _, it := range items {
			if it.A == me {
				peers, rtts, largest = append(peers, it.B), append(rtts, it.RTT), it.Bytes
			}
		}
		rates := make([]float64, 1+len(peers))
		var wg sync.WaitGroup
		var sendErr, recvErr error
		if len(peers) > 0 {
			wg.Go(func() {
				agg, each, err := measureFlows(ctx, p, peers, cfg, buf, largest, rtts)
				if err != nil {
					sendErr = fmt.Errorf("netprobe: flow %d->%v: %w", me, peers, err)
					return
				}
				rates[0] = agg
				copy(rates[1:], each)
			})
		}
		for _, it := range items {
			switch me {
			case it.B:
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := echo(ctx, p, it.A, buf); err != nil {
						recvErr = fmt.Errorf("netprobe: flow %d->%d: %w", it.A, me, err)
					}
				}()
			}
		}
		wg.Wait()
		if sendErr != nil {
			return nil, sendErr
		}
		if recvErr != nil {
			return nil, recvErr
		}
		b := make([]byte, 8*len(rates))
		for k, r := range rates {
			binary.LittleEndian.PutUint64(b[8*k:], math.Float64bits(r))
		}
		rows, err := p.Gather(ctx, 0, b)
		if err != nil {
			return nil, err
		}
		if me != 0 {
			continue
		}
		got := make([]float64, len(items))
		fans := map[int]float64{}
		flowsOf := map[int]int{} // each sender's flows in the step
		for _, it := range items {
			flowsOf[it.A]++
		}
		next := map[int]int{} // each sender's next rate
		for k, it := range items {
			flows := flowsOf[it.A]
			row := rows[it.A]
			if len(row) != 8*(1+flows) {
				return nil, fmt.Errorf("%w: rank %d sent %d bytes of rates for %d flows", ErrProtocol, it.A, len(row), flows)
			}
			next[it.A]++
			got[k] = math.Float64frombits(binary.LittleEndian.Uint64(row[8*next[it.A]:]))
			rec := FlowRecord{Step: step, A: it.A, B: it.B, Rate: got[k], Doubt: it.Doubt, Fan: it.Fan}
			if it.Fan {
				fans[it.A] = math.Float64frombits(binary.LittleEndian.Uint64(row))
				rec.Aggregate = fans[it.A]
			}
			records = append(records, rec)
		}
		plan.Done(items, got, fans)
	}
}

// measureFlows measures the rates to peers (which echo) on large
// transfers, to all of them at once (a fan-out, or one flow): the round
// trip of tiny messages (the smaller of the pings' and two of its own)
// is taken off each transfer, since a ping that waited for a busy CPU
// would flatter the rate. Quarter-size transfers warm the connections
// up and size each peer's transfer to take flowTime at the rate it shows,
// then three transfers of those sizes to every peer at once. Each peer's
// rate is its size over its median time (steadier on a busy machine than
// the fastest, which a token bucket's burst or a late timer can flatter),
// and the aggregate is the peers' sizes over the median time until the
// last ended.
func measureFlows(ctx context.Context, p Port, peers []int, cfg Config, buf []byte, largest int64, knownRTT []float64) (float64, []float64, error) {
	k := len(peers)
	rtt := make([]float64, k)
	for i := range rtt {
		rtt[i] = math.Inf(1)
		if knownRTT[i] > 0 {
			rtt[i] = knownRTT[i]
		}
	}
	// each runs f for every peer at once.
	each := func(f func(i int) error) error {
		if k == 1 {
			return f(0)
		}
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i := range peers {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := each(func(i int) error {
		for range 2 {
			t0 := time.Now()
			if err := p.Send(ctx, peers[i], tagData, buf[:1]); err != nil {
				return err
			}
			if _, err := p.Recv(ctx, peers[i], tagAck); err != nil {
				return err
			}
			rtt[i] = min(rtt[i], time.Since(t0).Seconds())
		}
		return nil
	}); err != nil {
		return 0, nil, err
	}
	// send sends sizes[i] bytes to every peer i at once (none where 0)
	// and returns each one's time and the time until the last ended.
	send := func(sizes []int64) ([]float64, float64, error) {
		ts := make([]float64, k)
		err := each(func(i int) error {
			if sizes[i] == 0 {
				return nil
			}
			t0 := time.Now()
			if err := p.Send(ctx, peers[i], tagData, buf[:sizes[i]]); err != nil {
				return err
			}
			if _, err := p.Recv(ctx, peers[i], tagAck); err != nil {
				return err
			}
			ts[i] = time.Since(t0).Seconds() - rtt[i]
			return nil
		})
		return ts, slices.Max(ts), err
	}
	maxBytes := int64(len(buf))
	floor := min(cfg.MinLargest, maxBytes)
	target := flowTime.Seconds()
	if largest <= 0 {
		largest = floor
	}
	largest = min(max(largest, floor), maxBytes)
	sizeFor := func(m int64, t float64) int64 {
		if t <= 0 {
			return maxBytes
		}
		return min(max(int64(float64(m)/t*target), floor), maxBytes)
	}
	// Warm up on a quarter of the expected size, then grow each peer's
	// transfer at most 4x a time until each takes half the target: a
	// small transfer rides a token bucket's burst and the socket
	// buffers, and a size sized from it alone could take seconds on a
	// slow link (and queue everything else this rank sends behind it).
	// Each peer of a fan-out gets its own size, so that every flow takes
	// about flowTime: sized alike, a flow to a fast receiver took a few
	// milliseconds, and a token bucket's burst made it up to 16% faster
	// than its NIC (racks32: 27.7 MB/s from a 25 MB/s NIC), which raised
	// that receiver's ingress estimate; and the sender sat idle once the
	// fast flows were over, which lowered the fan-out's aggregate.
	// A peer sized is left out of the next warm-ups.
	sizes, warm := make([]int64, k), make([]int64, k)
	for i := range warm {
		warm[i] = max(largest/4, 1)
	}
	for slices.Max(warm) > 0 {
		ts, _, err := send(warm)
		if err != nil {
			return 0, nil, err
		}
		for i, t := range ts {
			switch m := warm[i]; {
			case m == 0:
			case t >= target/2 || m >= maxBytes:
				sizes[i], warm[i] = min(sizeFor(m, t), 4*m), 0
			default:
				warm[i] = min(4*m, maxBytes)
			}
		}
	}
	times := make([][]float64, k)
	var last []float64
	for range 3 {
		ts, t, err := send(sizes)
		if err != nil {
			return 0, nil, err
		}
		for i := range ts {
			times[i] = append(times[i], ts[i])
		}
		last = append(last, t)
	}
	if err := each(func(i int) error { return p.Send(ctx, peers[i], tagData, nil) }); err != nil {
		return 0, nil, err
	}
	rate := func(bytes int64, ts []float64) float64 {
		if med := collective.Median(ts); med > 0 {
			return float64(bytes) / med
		}
		return math.Inf(1)
	}
	rates := make([]float64, k)
	var total int64
	for i := range rates {
		rates[i] = rate(sizes[i], times[i])
		total += sizes[i]
	}
	return rate(total, last), rates, nil
}
