package transport

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Rails: several links to one peer (one per NIC, address or transport),
// used as one logical link. This file holds the pure part: the cost model
// of a rail, the policies, and the planner that decides which bytes of a
// message go on which rail. RailSet (rail_set.go) executes the plans.

// RailCost is the fitted cost of one rail towards a peer: a message of m
// bytes takes Latency + m/Bandwidth seconds to arrive.
type RailCost struct {
	// Latency is the start-up time T in seconds (>= 0).
	Latency float64 `json:"latency"`
	// Bandwidth is the rate B in bytes per second (> 0 and finite: clamp
	// a fit that could not see the rate).
	Bandwidth float64 `json:"bandwidth"`
}

// Time is the predicted time of a message of m bytes on this rail alone.
func (c RailCost) Time(m int64) float64 { return c.Latency + float64(m)/c.Bandwidth }

func (c RailCost) valid() bool {
	return c.Latency >= 0 && !math.IsInf(c.Latency, 0) && !math.IsNaN(c.Latency) &&
		c.Bandwidth > 0 && !math.IsInf(c.Bandwidth, 0) && !math.IsNaN(c.Bandwidth)
}

// RailPolicy says how a RailSet spreads messages over its rails.
type RailPolicy uint8

// Policies. The zero value is RailAuto.
const (
	// RailAuto is RailMuxAgg with the split threshold derived from the
	// costs: a message is split once aggregation is predicted to beat the
	// best single rail by Margin. It is re-derived whenever the costs or
	// the set of live rails change.
	RailAuto RailPolicy = 0
	// RailSingle sends everything on the best rail for bulk data (the
	// highest bandwidth; ties: the lower latency, then the lower index).
	RailSingle RailPolicy = 1
	// RailMux sends each message whole on the rail predicted to deliver it
	// first (the multi-network paper's multiplexing): small messages take
	// the low-latency rail, large ones the high-bandwidth rail.
	RailMux RailPolicy = 2
	// RailAgg splits every message across the rails so that every part is
	// predicted to arrive at the same time (water-filling on T + m/B),
	// never making a part smaller than MinChunk (the paper's aggregation).
	RailAgg RailPolicy = 3
	// RailMuxAgg multiplexes messages below SplitAt and aggregates from
	// SplitAt on (the paper's Mux-Agg). SplitAt 0 derives it as RailAuto
	// does.
	RailMuxAgg RailPolicy = 4
)

var railPolicyNames = [...]string{RailAuto: "auto", RailSingle: "single", RailMux: "mux", RailAgg: "agg", RailMuxAgg: "muxagg"}

func (p RailPolicy) String() string {
	if int(p) < len(railPolicyNames) {
		return railPolicyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParseRailPolicy maps "auto", "single", "mux", "agg" or "muxagg" to its
// policy.
func ParseRailPolicy(s string) (RailPolicy, error) {
	for p, n := range railPolicyNames {
		if n == strings.ToLower(strings.TrimSpace(s)) {
			return RailPolicy(p), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown rail policy %q (want auto, single, mux, agg or muxagg)", ErrBadConfig, s)
}

// Defaults of RailModel's zero fields.
const (
	// DefaultMinChunk is the smallest part aggregation puts on a rail.
	DefaultMinChunk = 16 << 10
	// DefaultSplitMargin is how much faster aggregation must be predicted
	// to be than the best single rail before RailAuto splits a message.
	DefaultSplitMargin = 0.1
	// MaxRails is the most rails a RailSet takes.
	MaxRails = 16
)

// RailModel is the cost model of one peer's rails together with the
// policy: everything needed to predict how a message of m bytes is sent
// and when it arrives. It is pure data; planners use it to cost a pair
// (Time, Effective), RailSet to plan each message.
type RailModel struct {
	// Costs has one entry per rail, in rail order.
	Costs []RailCost `json:"costs"`
	// Policy is the policy; the zero value is RailAuto.
	Policy RailPolicy `json:"policy"`
	// MinChunk is the smallest part aggregation puts on a rail, in bytes.
	// 0 means DefaultMinChunk.
	MinChunk int64 `json:"min_chunk,omitempty"`
	// SplitAt is the size from which RailMuxAgg splits messages. 0 means
	// derived from the costs, as RailAuto does. Other policies ignore it.
	SplitAt int64 `json:"split_at,omitempty"`
	// Margin is the predicted gain aggregation must bring, as a fraction
	// of the best single rail's time, before RailAuto (or RailMuxAgg
	// without SplitAt) splits a message. 0 means DefaultSplitMargin; it
	// must be in [0, 1).
	Margin float64 `json:"margin,omitempty"`
}

// Validate reports whether the model is usable. Errors match ErrBadConfig.
func (m RailModel) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: rails: "+format, append([]any{ErrBadConfig}, a...)...)
	}
	switch {
	case len(m.Costs) == 0:
		return bad("no rail costs")
	case len(m.Costs) > MaxRails:
		return bad("%d rails, at most %d", len(m.Costs), MaxRails)
	case int(m.Policy) >= len(railPolicyNames):
		return bad("unknown policy %d", m.Policy)
	case m.MinChunk < 0:
		return bad("negative MinChunk %d", m.MinChunk)
	case m.SplitAt < 0:
		return bad("negative SplitAt %d", m.SplitAt)
	case m.Margin < 0 || m.Margin >= 1 || math.IsNaN(m.Margin):
		return bad("Margin %v outside [0, 1)", m.Margin)
	}
	for r, c := range m.Costs {
		if !c.valid() {
			return bad("rail %d: cost %+v: want finite latency >= 0 and finite bandwidth > 0", r, c)
		}
	}
	return nil
}

// RailShare is the part of a message that one rail carries.
type RailShare struct {
	Rail  int   `json:"rail"`
	Bytes int64 `json:"bytes"`
}

// Split returns how the policy sends a message of size bytes when every
// rail is idle: one share per rail used, in rail order, adding up to size.
// The model must be valid.
func (m RailModel) Split(size int64) []RailShare {
	p := newRailPlanner(m, nil)
	shares, _ := p.plan(size, nil)
	return shares
}

// Time is the predicted time of a message of size bytes under the policy,
// when every rail is idle: the latest predicted arrival of its parts. The
// model must be valid.
func (m RailModel) Time(size int64) float64 {
	p := newRailPlanner(m, nil)
	_, t := p.plan(size, nil)
	return t
}

// Threshold is the size from which the policy splits messages across
// rails: MinChunk-limited for RailAgg, SplitAt or derived for RailMuxAgg
// and RailAuto, math.MaxInt64 for RailSingle and RailMux (never).
func (m RailModel) Threshold() int64 {
	return newRailPlanner(m, nil).splitAt
}

// Effective returns one (T, B) pair that stands for the rails under the
// policy, for planners that model a pair as T + m/B: T is the predicted
// time of an empty message and B makes the line exact at ref bytes (ref <=
// 0 means 64 MiB). In between, Time is exact and the line is an
// approximation (aggregation does not pay for small messages).
func (m RailModel) Effective(ref int64) RailCost {
	if ref <= 0 {
		ref = 64 << 20
	}
	p := newRailPlanner(m, nil)
	_, t0 := p.plan(0, nil)
	_, t1 := p.plan(ref, nil)
	b := math.Inf(1)
	if t1 > t0 {
		b = float64(ref) / (t1 - t0)
	}
	return RailCost{Latency: t0, Bandwidth: b}
}

// EffectiveCost is the predicted time in seconds of a message of m bytes
// to a peer with these rail costs under policy p (default tuning), every
// rail idle: the pair's effective cost for the planners. It returns +Inf
// for invalid costs.
func EffectiveCost(costs []RailCost, p RailPolicy, m int64) float64 {
	model := RailModel{Costs: costs, Policy: p}
	if model.Validate() != nil {
		return math.Inf(1)
	}
	return model.Time(m)
}

// railPlanner plans messages over the live rails of a model.
type railPlanner struct {
	costs    []RailCost
	live     []bool
	policy   RailPolicy
	minChunk int64
	margin   float64
	splitAt  int64 // from this size on, split (math.MaxInt64: never)
	bulk     int   // RailSingle's rail (-1: none live)
}

// newRailPlanner resolves the model's defaults and derived thresholds for
// the live rails (nil: all).
func newRailPlanner(m RailModel, live []bool) *railPlanner {
	p := &railPlanner{costs: m.Costs, policy: m.Policy, minChunk: m.MinChunk, margin: m.Margin}
	if p.minChunk == 0 {
		p.minChunk = DefaultMinChunk
	}
	if p.margin == 0 {
		p.margin = DefaultSplitMargin
	}
	p.live = make([]bool, len(m.Costs))
	for r := range p.live {
		p.live[r] = live == nil || live[r]
	}
	p.bulk = -1
	for r, c := range p.costs {
		if !p.live[r] {
			continue
		}
		if p.bulk < 0 || c.Bandwidth > p.costs[p.bulk].Bandwidth ||
			c.Bandwidth == p.costs[p.bulk].Bandwidth && c.Latency < p.costs[p.bulk].Latency {
			p.bulk = r
		}
	}
	switch p.policy {
	case RailSingle, RailMux:
		p.splitAt = math.MaxInt64
	case RailAgg:
		p.splitAt = 2 * p.minChunk
	case RailMuxAgg:
		if m.SplitAt > 0 {
			p.splitAt = m.SplitAt
		} else {
			p.splitAt = p.deriveSplit()
		}
	default:
		p.splitAt = p.deriveSplit()
	}
	if p.liveCount() < 2 {
		p.splitAt = math.MaxInt64
	}
	return p
}

func (p *railPlanner) liveCount() int {
	n := 0
	for _, l := range p.live {
		if l {
			n++
		}
	}
	return n
}

// deriveSplit is the smallest size at which water-filling is predicted to
// be at least margin faster than the best single rail (idle rails), or
// math.MaxInt64 if there is none up to 1 TiB.
func (p *railPlanner) deriveSplit() int64 {
	if p.liveCount() < 2 {
		return math.MaxInt64
	}
	pays := func(size int64) bool {
		shares, t := p.waterfill(size, nil)
		if len(shares) < 2 {
			return false
		}
		_, single := p.mux(size, nil)
		return t <= (1-p.margin)*single
	}
	lo := 2 * p.minChunk // smallest size that can be split
	if pays(lo) {
		return lo
	}
	hi := lo
	for !pays(hi) {
		if hi > 1<<40 {
			return math.MaxInt64
		}
		lo, hi = hi, 2*hi
	}
	// pays(hi) and !pays(lo): bisect to within 1/64 of the size.
	for hi-lo > max(1, lo/64) {
		mid := lo + (hi-lo)/2
		if pays(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// startAt is when rail r can start a new message, in seconds from now
// (start nil: every rail is idle).
func startAt(start []float64, r int) float64 {
	if start == nil {
		return 0
	}
	return start[r]
}

// plan decides how to send size bytes given when each rail is free
// (start[r] seconds from now; nil: all idle). It returns the shares in
// rail order and the predicted arrival of the last one. With no live rail
// it returns nil and +Inf.
func (p *railPlanner) plan(size int64, start []float64) ([]RailShare, float64) {
	switch {
	case p.policy == RailSingle:
		if p.bulk < 0 {
			return nil, math.Inf(1)
		}
		return []RailShare{{p.bulk, size}}, startAt(start, p.bulk) + p.costs[p.bulk].Time(size)
	case size >= p.splitAt:
		return p.waterfill(size, start)
	default:
		return p.mux(size, start)
	}
}

// mux puts the whole message on the rail that delivers it first.
func (p *railPlanner) mux(size int64, start []float64) ([]RailShare, float64) {
	best, bt := -1, math.Inf(1)
	for r, c := range p.costs {
		if !p.live[r] {
			continue
		}
		if t := startAt(start, r) + c.Time(size); t < bt {
			best, bt = r, t
		}
	}
	if best < 0 {
		return nil, math.Inf(1)
	}
	return []RailShare{{best, size}}, bt
}

// waterfill splits size bytes so that every rail used finishes at the same
// predicted time F: rail r (ready after s_r = start_r + T_r) carries
// (F - s_r)·B_r bytes. Rails ready only after F are dropped; then, while a
// part is smaller than minChunk, the rail with the smallest part is
// dropped and F recomputed. A single survivor carries everything.
func (p *railPlanner) waterfill(size int64, start []float64) ([]RailShare, float64) {
	type cand struct {
		r    int
		s, b float64
	}
	var cs []cand
	for r, c := range p.costs {
		if p.live[r] {
			cs = append(cs, cand{r, startAt(start, r) + c.Latency, c.Bandwidth})
		}
	}
	if len(cs) == 0 {
		return nil, math.Inf(1)
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].s < cs[j].s })
	m := float64(size)
	for {
		// The finish time with the k earliest rails is
		// F_k = (m + Σ s_i·b_i) / Σ b_i; keep the largest k whose last
		// rail starts before F_k.
		var f float64
		k := len(cs)
		for ; k >= 1; k-- {
			var sb, b float64
			for _, c := range cs[:k] {
				sb += c.s * c.b
				b += c.b
			}
			f = (m + sb) / b
			if k == 1 || f > cs[k-1].s {
				break
			}
		}
		cs = cs[:k]
		if k == 1 {
			return []RailShare{{cs[0].r, size}}, cs[0].s + m/cs[0].b
		}
		smallest := 0
		for i, c := range cs {
			if (f-c.s)*c.b < (f-cs[smallest].s)*cs[smallest].b {
				smallest = i
			}
		}
		if (f-cs[smallest].s)*cs[smallest].b < float64(p.minChunk) {
			cs = append(cs[:smallest], cs[smallest+1:]...)
			continue
		}
		// Integer shares: floor each, give the rest to the largest.
		shares := make([]RailShare, len(cs))
		var sum int64
		largest := 0
		for i, c := range cs {
			shares[i] = RailShare{c.r, int64((f - c.s) * c.b)}
			sum += shares[i].Bytes
			if shares[i].Bytes > shares[largest].Bytes {
				largest = i
			}
		}
		shares[largest].Bytes += size - sum
		sort.Slice(shares, func(i, j int) bool { return shares[i].Rail < shares[j].Rail })
		// Predicted arrival with the rounded shares.
		t := 0.0
		for _, s := range shares {
			t = math.Max(t, startAt(start, s.Rail)+p.costs[s.Rail].Time(s.Bytes))
		}
		return shares, t
	}
}
