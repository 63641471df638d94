package transport

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The two rails of the multi-network paper's shape: rail 0 has the lower
// latency, rail 1 the higher bandwidth.
var paperRails = []RailCost{{Latency: 100e-6, Bandwidth: 5e6}, {Latency: 1e-3, Bandwidth: 20e6}}

func TestRailPolicyNames(t *testing.T) {
	for _, p := range []RailPolicy{RailAuto, RailSingle, RailMux, RailAgg, RailMuxAgg} {
		got, err := ParseRailPolicy(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	_, err := ParseRailPolicy("striped")
	require.ErrorIs(t, err, ErrBadConfig)
	require.Equal(t, "policy(9)", RailPolicy(9).String())
}

func TestRailModelValidate(t *testing.T) {
	ok := RailModel{Costs: paperRails}
	require.NoError(t, ok.Validate())
	for name, m := range map[string]RailModel{
		"no rails":       {},
		"zero bandwidth": {Costs: []RailCost{{Latency: 0, Bandwidth: 0}}},
		"inf bandwidth":  {Costs: []RailCost{{Latency: 0, Bandwidth: math.Inf(1)}}},
		"neg latency":    {Costs: []RailCost{{Latency: -1, Bandwidth: 1}}},
		"nan latency":    {Costs: []RailCost{{Latency: math.NaN(), Bandwidth: 1}}},
		"policy":         {Costs: paperRails, Policy: 17},
		"min chunk":      {Costs: paperRails, MinChunk: -1},
		"split at":       {Costs: paperRails, SplitAt: -1},
		"margin":         {Costs: paperRails, Margin: 1},
		"too many":       {Costs: make([]RailCost, MaxRails+1)},
	} {
		require.ErrorIs(t, m.Validate(), ErrBadConfig, name)
	}
	require.True(t, math.IsInf(EffectiveCost(nil, RailMux, 10), 1))
}

func TestRailMuxChoosesBySize(t *testing.T) {
	m := RailModel{Costs: paperRails, Policy: RailMux}
	require.Equal(t, []RailShare{{0, 8}}, m.Split(8))
	require.Equal(t, []RailShare{{1, 4 << 20}}, m.Split(4<<20))
	// The crossover is where T0 + m/B0 = T1 + m/B1: 900e-6 / (1/5e6 - 1/20e6) = 6000 bytes.
	require.Equal(t, 0, m.Split(5990)[0].Rail)
	require.Equal(t, 1, m.Split(6010)[0].Rail)
	require.Equal(t, int64(math.MaxInt64), m.Threshold())
	require.InDelta(t, paperRails[0].Time(8), m.Time(8), 1e-12)
}

func TestRailSingleUsesBulkRail(t *testing.T) {
	m := RailModel{Costs: paperRails, Policy: RailSingle}
	require.Equal(t, []RailShare{{1, 8}}, m.Split(8))
	require.Equal(t, []RailShare{{1, 1 << 30}}, m.Split(1<<30))
	// ties on bandwidth: the lower latency wins
	m.Costs = []RailCost{{Latency: 2e-3, Bandwidth: 1e6}, {Latency: 1e-3, Bandwidth: 1e6}}
	require.Equal(t, 1, m.Split(100)[0].Rail)
}

func TestRailAggWaterFilling(t *testing.T) {
	m := RailModel{Costs: paperRails, Policy: RailAgg}
	const size = 4 << 20
	shares := m.Split(size)
	require.Len(t, shares, 2)
	require.Equal(t, int64(size), shares[0].Bytes+shares[1].Bytes)
	// Both parts are predicted to arrive at the same time F.
	f0 := paperRails[0].Time(shares[0].Bytes)
	f1 := paperRails[1].Time(shares[1].Bytes)
	require.InDelta(t, f0, f1, 2/paperRails[0].Bandwidth)
	// F = (m + Σ T·B) / Σ B
	want := (float64(size) + 100e-6*5e6 + 1e-3*20e6) / 25e6
	require.InDelta(t, want, m.Time(size), 1e-6)

	// A rail whose latency exceeds the finish time is left out.
	slow := RailModel{Costs: []RailCost{{Latency: 0, Bandwidth: 1e9}, {Latency: 1, Bandwidth: 1e9}}, Policy: RailAgg, MinChunk: 1}
	require.Equal(t, []RailShare{{0, 1 << 20}}, slow.Split(1<<20))

	// No part below the minimum chunk: a message too small to give both
	// rails MinChunk goes whole on the rail that would carry the most.
	small := RailModel{Costs: paperRails, Policy: RailAgg, MinChunk: 64 << 10}
	for _, sz := range []int64{0, 1, 100 << 10, 200 << 10} {
		shares := small.Split(sz)
		var sum int64
		for _, s := range shares {
			sum += s.Bytes
			if len(shares) > 1 {
				require.GreaterOrEqual(t, s.Bytes, int64(64<<10), "size %d", sz)
			}
		}
		require.Equal(t, sz, sum)
	}
	require.Len(t, small.Split(200<<10), 1) // rail 0's share would be < 64 KiB
	require.Len(t, small.Split(1<<20), 2)
}

// TestRailWaterFillingOptimal compares water-filling against a brute-force
// search over every split on a grid, on small random instances: its
// predicted finish is never worse than the best split (up to the grid).
func TestRailWaterFillingOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 2 + rng.IntN(2)
		costs := make([]RailCost, n)
		for i := range costs {
			costs[i] = RailCost{Latency: rng.Float64() * 2e-3, Bandwidth: 1e6 * (1 + 50*rng.Float64())}
		}
		size := int64(1 + rng.IntN(1<<20))
		m := RailModel{Costs: costs, Policy: RailAgg, MinChunk: 1}
		got := m.Time(size)
		// brute force: shares in steps of size/200
		step := max(size/200, 1)
		best := math.Inf(1)
		var rec func(r int, left int64, worst float64)
		rec = func(r int, left int64, worst float64) {
			if r == n-1 {
				t := worst
				if left > 0 {
					t = math.Max(t, costs[r].Time(left))
				}
				best = math.Min(best, t)
				return
			}
			for s := int64(0); s <= left; s += step {
				w := worst
				if s > 0 {
					w = math.Max(w, costs[r].Time(s))
				}
				rec(r+1, left-s, w)
			}
		}
		rec(0, size, 0)
		// The grid is coarse; water-filling may beat it, never lose by more
		// than one step on the slowest rail (plus rounding).
		slack := float64(step)/minBandwidth(costs) + 1e-9
		require.LessOrEqual(t, got, best+slack, "trial %d: costs %+v size %d", trial, costs, size)
		var sum int64
		for _, s := range m.Split(size) {
			sum += s.Bytes
			require.Positive(t, s.Bytes)
		}
		require.Equal(t, size, sum)
	}
}

func minBandwidth(c []RailCost) float64 {
	b := math.Inf(1)
	for _, x := range c {
		b = math.Min(b, x.Bandwidth)
	}
	return b
}

func TestRailAutoThreshold(t *testing.T) {
	m := RailModel{Costs: paperRails, MinChunk: 4 << 10}
	s := m.Threshold()
	require.Greater(t, s, int64(8<<10))
	require.Less(t, s, int64(math.MaxInt64))
	mux := RailModel{Costs: paperRails, Policy: RailMux}
	agg := RailModel{Costs: paperRails, Policy: RailAgg, MinChunk: 4 << 10}
	// At the threshold aggregation beats mux by the margin; well below it,
	// it does not.
	require.LessOrEqual(t, agg.Time(s), (1-DefaultSplitMargin)*mux.Time(s))
	require.Greater(t, agg.Time(s*9/10), (1-DefaultSplitMargin)*mux.Time(s*9/10))
	// auto: mux below, agg from there on
	require.Len(t, m.Split(s-1), 1)
	require.Len(t, m.Split(s), 2)
	require.Equal(t, mux.Split(100), m.Split(100))

	// muxagg with a given threshold
	ma := RailModel{Costs: paperRails, Policy: RailMuxAgg, SplitAt: 1 << 20, MinChunk: 4 << 10}
	require.Equal(t, int64(1<<20), ma.Threshold())
	require.Len(t, ma.Split(1<<20-1), 1)
	require.Len(t, ma.Split(1<<20), 2)
	// muxagg without one derives it like auto
	ma.SplitAt = 0
	require.Equal(t, s, ma.Threshold())

	// one rail, or one rail so much better that splitting never pays
	require.Equal(t, int64(math.MaxInt64), RailModel{Costs: paperRails[:1]}.Threshold())
	lop := RailModel{Costs: []RailCost{{Latency: 0, Bandwidth: 1e9}, {Latency: 0, Bandwidth: 1e3}}}
	require.Equal(t, int64(math.MaxInt64), lop.Threshold())
}

func TestRailEffective(t *testing.T) {
	for _, p := range []RailPolicy{RailSingle, RailMux, RailAgg, RailMuxAgg, RailAuto} {
		m := RailModel{Costs: paperRails, Policy: p}
		e := m.Effective(64 << 20)
		require.InDelta(t, m.Time(0), e.Latency, 1e-12, p.String())
		require.InDelta(t, m.Time(64<<20), e.Time(64<<20), 1e-9, p.String())
		require.InDelta(t, EffectiveCost(paperRails, p, 12345), m.Time(12345), 1e-12)
	}
	// aggregation's effective bandwidth approaches the sum of the rates
	agg := RailModel{Costs: paperRails, Policy: RailAgg}.Effective(1 << 30)
	require.InDelta(t, 25e6, agg.Bandwidth, 0.01*25e6)
	mux := RailModel{Costs: paperRails, Policy: RailMux}.Effective(1 << 30)
	require.InDelta(t, 20e6, mux.Bandwidth, 0.01*20e6)
	require.InDelta(t, 100e-6, mux.Latency, 1e-12)
}

// The planner with start offsets: a busy rail is avoided by mux and gets a
// smaller share under agg.
func TestRailPlannerBacklog(t *testing.T) {
	p := newRailPlanner(RailModel{Costs: paperRails, Policy: RailMux}, nil)
	shares, _ := p.plan(8, []float64{0.5, 0})
	require.Equal(t, 1, shares[0].Rail, "rail 0 is busy for 0.5 s")
	pa := newRailPlanner(RailModel{Costs: []RailCost{{0, 10e6}, {0, 10e6}}, Policy: RailAgg, MinChunk: 1}, nil)
	shares, f := pa.plan(2e6, []float64{0.1, 0})
	require.Len(t, shares, 2)
	require.Less(t, shares[0].Bytes, shares[1].Bytes)
	require.InDelta(t, (2e6+0.1*10e6)/20e6, f, 1e-6)
	// dead rails are never used
	pd := newRailPlanner(RailModel{Costs: paperRails, Policy: RailAgg}, []bool{false, true})
	shares, _ = pd.plan(8<<20, nil)
	require.Equal(t, []RailShare{{1, 8 << 20}}, shares)
	pn := newRailPlanner(RailModel{Costs: paperRails}, []bool{false, false})
	shares, f = pn.plan(1, nil)
	require.Nil(t, shares)
	require.True(t, math.IsInf(f, 1))
}

func TestRailHeadRoundTrip(t *testing.T) {
	h := railHead{Kind: railKindPart, Flags: railFlagAckReq, Rail: 3, CRC: 0xdeadbeef, Seq: 1<<40 + 7, Ack: 99,
		Off: 1 << 20, Len: 1 << 20, Total: 3 << 20, Type: MsgRndvData, UFlags: 0xbeef, Comm: 7, Tag: -5, Parts: 3, USeq: 1 << 63, Gen: 0xfeed0002}
	b := make([]byte, railHeadSize)
	putRailHead(b, &h)
	got, inline, err := decodeRailFrame(b, 1<<30)
	require.NoError(t, err)
	require.Nil(t, inline)
	require.Equal(t, h, got)

	// inline part
	data := []byte("hello rails")
	h = railHead{Kind: railKindPart, Flags: railFlagInline, CRC: crc32c(data), Len: uint64(len(data)), Total: 100, Off: 50, Type: MsgEager, Parts: 2}
	f := make([]byte, railHeadSize+len(data))
	putRailHead(f, &h)
	copy(f[railHeadSize:], data)
	got, inline, err = decodeRailFrame(f, 1<<30)
	require.NoError(t, err)
	require.Equal(t, data, inline)
	f[railHeadSize] ^= 1
	_, _, err = decodeRailFrame(f, 1<<30)
	require.ErrorIs(t, err, ErrRailChecksum)

	// corrupted header
	putRailHead(b, &h)
	b[10] ^= 0x80
	_, _, err = decodeRailFrame(b, 1<<30)
	require.ErrorIs(t, err, ErrRailChecksum)
	var fe *FrameError
	require.True(t, errors.As(err, &fe))

	// semantic checks
	for name, bad := range map[string]railHead{
		"kind 0":          {Kind: 0},
		"kind 5":          {Kind: 5},
		"type 0":          {Kind: railKindPart, Len: 1, Total: 1, Parts: 1},
		"past the end":    {Kind: railKindPart, Type: 1, Off: 10, Len: 5, Total: 12, Parts: 2},
		"no parts":        {Kind: railKindPart, Type: 1, Len: 5, Total: 5},
		"too many parts":  {Kind: railKindPart, Type: 1, Len: 1, Total: 100, Parts: MaxRails + 1},
		"empty part":      {Kind: railKindPart, Type: 1, Len: 0, Total: 5, Parts: 1, Flags: railFlagInline},
		"flags":           {Kind: railKindPart, Type: 1, Len: 5, Total: 5, Parts: 1, Flags: 0x80},
		"rail":            {Kind: railKindAck, Rail: MaxRails},
		"ack with fields": {Kind: railKindAck, Total: 3},
		"bye with seq":    {Kind: railKindBye, Seq: 3},
		"skip with flags": {Kind: railKindSkip, Flags: railFlagAckReq},
		"not inline":      {Kind: railKindPart, Type: 1, Len: 0, Total: 0, Parts: 1},
	} {
		putRailHead(b, &bad)
		_, _, err := decodeRailFrame(b, 1<<30)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
	putRailHead(b, &railHead{Kind: railKindPart, Type: 1, Len: 5, Total: 1 << 31, Parts: 2})
	_, _, err = decodeRailFrame(b, 1<<30)
	require.ErrorIs(t, err, ErrTooLarge)
	_, _, err = decodeRailFrame(b[:10], 1<<30)
	require.ErrorIs(t, err, ErrMalformed)

	dh := railDataHeader(2, 77, 1<<35+12345)
	require.Equal(t, uint64(1<<35+12345), railDataOffset(&dh))
	require.Equal(t, uint16(2), dh.Flags)
}
