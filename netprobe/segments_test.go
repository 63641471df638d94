package netprobe

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

// twoSwitches: four ranks with 12.5 MB/s NICs (100 Mbit/s), split 0,1 |
// 2,3 by the cut under test, 1 ms start-up everywhere.
func twoSwitches() *collective.Fabric {
	m := collective.NewUniformModel(4, 1e-3, 12.5e6)
	return collective.FabricFromModel(m)
}

func cutRows(elapsed []float64, paced bool) [][]byte {
	rows := make([][]byte, len(elapsed))
	for r, e := range elapsed {
		rows[r] = make([]byte, 9)
		binary.LittleEndian.PutUint64(rows[r], math.Float64bits(e))
		if paced {
			rows[r][8] = 1
		}
	}
	return rows
}

func decodeCut(t *testing.T, b []byte) ([]collective.Segment, *CutProbe) {
	t.Helper()
	var res cutVerdict
	require.NoError(t, json.Unmarshal(b, &res))
	return res.Segments, res.Cut
}

// TestCutExchangeSizing: the flows across the cut take SegmentTime at the
// NIC rates: each rank sends 2 flows over a 12.5 MB/s NIC.
func TestCutExchangeSizing(t *testing.T) {
	f := twoSwitches()
	cut := &CutProbe{A: []int{0, 1}, B: []int{2, 3}}
	x, b, err := cutExchange(f, cut, Config{SegmentTime: 150 * time.Millisecond}.withDefaults())
	require.NoError(t, err)
	require.InDelta(t, 0.150, b.Bandwidth, 0.001)
	require.InDelta(t, 0.150*12.5e6/2, float64(cut.Bytes), 1)
	require.Equal(t, cut.Bytes, x.Bytes[0][2])
	require.Equal(t, cut.Bytes, x.Bytes[3][1])
	require.Zero(t, x.Bytes[0][1], "no flow within a side")
	require.Equal(t, b.Seconds, cut.Bound)
}

// TestJudgeCut: a direction that takes well over the NIC bound has a
// segment of the capacity the flows got; one near the bound is only
// limited by its NICs.
func TestJudgeCut(t *testing.T) {
	f := twoSwitches()
	cut := &CutProbe{A: []int{0, 1}, B: []int{2, 3}}
	x, _, err := cutExchange(f, cut, Config{SegmentTime: 150 * time.Millisecond}.withDefaults())
	require.NoError(t, err)
	across := 4 * float64(cut.Bytes)

	// a->b (received by 2 and 3) took 0.3 s: a segment of about half the
	// NICs' rate; b->a ended at the bound.
	out, err := judgeCut(cut, cutRows([]float64{0.16, 0.155, 0.3, 0.28}, true), f, x, cut.B, nil)
	require.NoError(t, err)
	segs, got := decodeCut(t, out)
	require.True(t, got.Paced)
	require.Equal(t, 0.3, got.AB)
	require.Equal(t, 0.16, got.BA)
	require.Equal(t, 1.25, got.Threshold)
	require.Equal(t, []float64{0.16, 0.155, 0.3, 0.28}, got.Elapsed, "the ranks of A, then B")
	require.Len(t, segs, 1)
	require.Equal(t, []int{0, 1}, segs[0].A)
	require.Equal(t, []int{2, 3}, segs[0].B)
	require.InDelta(t, across/(0.3-1e-3), segs[0].AB, 1)
	require.Equal(t, 25e6, segs[0].BA, "the unlimited direction gets what its NICs can feed")

	// Unpaced flows get more slack: 1.5x the bound is still the NICs.
	cut2 := *cut
	cut2.AB, cut2.BA = 0, 0
	out, err = judgeCut(&cut2, cutRows([]float64{0.2, 0.2, 0.225, 0.2}, false), f, x, cut.B, nil)
	require.NoError(t, err)
	segs, got = decodeCut(t, out)
	require.False(t, got.Paced)
	require.Empty(t, segs)

	// A row no rank sends.
	_, err = judgeCut(cut, [][]byte{{1, 2}, {}, {}, {}}, f, x, cut.B, nil)
	require.ErrorIs(t, err, ErrProtocol)
	_, err = judgeCut(cut, [][]byte{{1, 2}}, f, x, cut.B, nil)
	require.ErrorIs(t, err, ErrProtocol)
}

// TestCarried: a direction's capacity is the most that the ranks done
// first show over their time, for all of them down to one eighth fewer,
// so that a rank or three of 24 that a busy machine ran late do not set
// it, and one that reports a time near 0 (it left the starting barrier
// late) does not either; ranks that received nothing across do not count.
// A rank not done yet counts for what its NIC could not have received
// since.
func TestCarried(t *testing.T) {
	const n = 26
	x := &collective.Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
	}
	// 0 and 1 send 0.5 MB to each of 2..25 (24 MB in all).
	var to []int
	for b := 2; b < n; b++ {
		to = append(to, b)
		x.Bytes[0][b], x.Bytes[1][b] = 500_000, 500_000
	}
	from := []int{0, 1}
	elapsed := make([]float64, n)
	for _, b := range to {
		elapsed[b] = 0.2
	}
	// NICs of 1 GB/s: a rank not done yet may have received all of its
	// data at the end, and counts for nothing before.
	nic := func(int) float64 { return 1e9 }
	require.InDelta(t, 24e6/0.199, carried(elapsed, x, from, to, 1e-3, nic), 1, "arriving together, every rank counts")
	// Three ranks late: the 21 others' 21 MB in 0.2 s.
	elapsed[23], elapsed[24], elapsed[25] = 0.3, 0.5, 0.9
	require.InDelta(t, 21e6/0.199, carried(elapsed, x, from, to, 1e-3, nic), 1)
	// Four late: a prefix leaves out three at most, so 21 MB by the
	// fourth's 0.25 s.
	elapsed[22] = 0.25
	require.InDelta(t, 21e6/0.249, carried(elapsed, x, from, to, 1e-3, nic), 1)
	// One rank reports 0.001 s: it does not make a rate of its own.
	elapsed[2] = 0.001
	require.InDelta(t, 21e6/0.249, carried(elapsed, x, from, to, 1e-3, nic), 1)
	// Two ranks: both count, the last arrival decides.
	require.InDelta(t, 2e6/0.899, carried(elapsed, x, from, []int{2, 25}, 1e-3, nic), 1)
	// Nothing sent the other way: nothing carried.
	require.Zero(t, carried(elapsed, x, to, from, 0, nic))
	// A rank of to that received nothing from from does not count.
	require.InDelta(t, 1e6/0.9, carried(elapsed, x, from, []int{25, 0}, 0, nic), 1)

	// Eight ranks: seven get 1 MB by 0.2 s, the eighth, with a 20 MB/s
	// NIC, 3 MB by 0.25 s. It had at least 2 MB by 0.2 s, since it cannot
	// have received more than 1 MB after: 9 MB by 0.2 s, 45 MB/s (the
	// seven alone show 35, all eight 40).
	y := &collective.Exchange{Bytes: make([][]int64, 10)}
	for i := range y.Bytes {
		y.Bytes[i] = make([]int64, 10)
	}
	var eight []int
	at := make([]float64, 10)
	for b := 2; b < 10; b++ {
		eight = append(eight, b)
		y.Bytes[0][b], at[b] = 1_000_000, 0.2
	}
	y.Bytes[0][9], at[9] = 3_000_000, 0.25
	fast := func(int) float64 { return 20e6 }
	require.InDelta(t, 9e6/0.2, carried(at, y, []int{0}, eight, 0, fast), 1)
	// Later than its NIC explains (a rank the machine ran late), it
	// counts for nothing until it is done.
	at[9] = 0.5
	require.InDelta(t, 7e6/0.2, carried(at, y, []int{0}, eight, 0, fast), 1)
}

// TestCandidateCuts: hints first, then the cut of the pair rates, then the
// halves; a cut and its complement count once, sides of fewer than two
// ranks are skipped, ranks out of range ignored, three cuts at most.
func TestCandidateCuts(t *testing.T) {
	// Ranks 0,2 | 1,3,4,5: pairs across are slow.
	m := collective.NewUniformModel(6, 1e-4, 100)
	for i := 0; i < 6; i++ {
		for j := 0; j < 6; j++ {
			if (i == 0 || i == 2) != (j == 0 || j == 2) {
				m.Bandwidth[i][j] = 10
			}
		}
	}
	require.Equal(t, [][]int{{0, 2}, {0, 1, 2}}, candidateCuts(m, nil, nil), "Clusters' cut, then the halves")
	require.Equal(t, [][]int{{4, 5}, {1, 3, 4, 5}, {0, 1, 2}},
		candidateCuts(m, [][]int{{4, 5, 9}, {0, 1, 2, 3}, {3}, {1, 3, 4, 5}}, nil),
		"a hint's complement ({0,1,2,3} of {4,5}; Clusters' {0,2} of the last hint) and a one-rank side are skipped")
	require.Len(t, candidateCuts(m, [][]int{{0, 1}, {0, 3}, {0, 4}, {0, 5}}, nil), 3)
	require.Empty(t, candidateCuts(collective.NewUniformModel(3, 0, 1), nil, nil), "no side of two with two left")
	// Two ranks per host: only cuts that keep each host's ranks together.
	hosts := []string{"a", "b", "a", "c", "c", ""}
	require.Equal(t, [][]int{{1, 3, 4, 5}, {0, 1, 2}}, candidateCuts(m, [][]int{{0, 1}, {1, 3, 4, 5}}, hosts),
		"{0,1} splits host a; Clusters' {0,2} is the hint's complement")
	one := []string{"vm", "vm", "vm", "vm", "vm", "vm"}
	require.Empty(t, candidateCuts(m, [][]int{{0, 1, 2}}, one), "one machine: no cut")
}

// TestCutBatches: up to five groups are tested one at a time against
// every other rank; from six, a third of them at once, each against its
// own share of the other groups' ranks, dealt so that every share spans
// the other groups; the rounds stay at four however many groups.
func TestCutBatches(t *testing.T) {
	racks := func(g, size int) [][]int {
		sides := make([][]int, g)
		for i := range sides {
			for j := range size {
				sides[i] = append(sides[i], i*size+j)
			}
		}
		return sides
	}
	// Four racks of eight: one cut a round, against all other ranks.
	sides := racks(4, 8)
	batches := cutBatches(32, sides)
	require.Len(t, batches, 4)
	for i, b := range batches {
		require.Len(t, b, 1)
		require.Equal(t, sides[i], b[0].A)
		require.Equal(t, complement(32, sides[i]), b[0].B)
		require.Equal(t, b[0].B, b[0].Rest)
	}
	for _, g := range []int{6, 8, 20, 32, 128} {
		n := 8 * g
		sides := racks(g, 8)
		batches := cutBatches(n, sides)
		require.LessOrEqual(t, len(batches), 4, "%d racks", g)
		tested := 0
		for _, b := range batches {
			require.LessOrEqual(t, len(b), max(1, g/3))
			used := map[int]bool{}
			for _, pr := range b {
				tested++
				require.Equal(t, complement(n, pr.A), pr.Rest)
				rack := pr.A[0] / 8
				racksOfB := map[int]bool{}
				for _, r := range slices.Concat(pr.A, pr.B) {
					require.False(t, used[r], "%d racks: rank %d in two cuts of a round", g, r)
					used[r] = true
				}
				for _, r := range pr.B {
					require.NotEqual(t, rack, r/8, "a rank of the group on its other side")
					racksOfB[r/8] = true
				}
				// Twice the group's ranks at least, spread over the racks
				// not tested in this round: no rack holds more than half
				// of the share, and with few racks the share spans them all.
				require.GreaterOrEqual(t, len(pr.B), 2*len(pr.A), "%d racks", g)
				perRack := map[int]int{}
				for _, r := range pr.B {
					perRack[r/8]++
				}
				for rk, c := range perRack {
					require.LessOrEqual(t, 2*c, len(pr.B), "%d racks: rack %d holds %d of %d", g, rk, c, len(pr.B))
				}
				if len(pr.B) >= 8*(g-len(b))/2 {
					require.Len(t, racksOfB, g-len(b), "%d racks: the share spans every other rack", g)
				}
			}
		}
		require.Equal(t, g, tested, "%d racks: every rack's cut tested once", g)
		for _, b := range batches {
			dealt := 0
			for _, pr := range b {
				dealt += len(pr.B)
			}
			if len(b) > 1 {
				require.Equal(t, n-8*len(b), dealt, "%d racks: every other rank is dealt once", g)
			}
		}
	}
}

// TestChunkSizes: a flow goes as up to cutChunks messages of 4 KiB or
// more that add up to it.
func TestChunkSizes(t *testing.T) {
	for _, c := range []struct {
		size int64
		want []int64
	}{
		{1, []int64{1}},
		{8 << 10, []int64{4 << 10, 4 << 10}},
		{10_001, []int64{5000, 5001}},
		{1 << 20, []int64{128 << 10, 128 << 10, 128 << 10, 128 << 10, 128 << 10, 128 << 10, 128 << 10, 128 << 10}},
	} {
		require.Equal(t, c.want, chunkSizes(c.size), "%d bytes", c.size)
	}
	sizes := chunkSizes(1<<20 + 7)
	require.Len(t, sizes, cutChunks)
	require.Equal(t, int64(128<<10+7), sizes[cutChunks-1], "the last takes the rest")
}

// TestSteadyRate: ranks 2 and 3 each receive 1 MB a second in chunks of
// 10 kB (2 MB/s together), but rank 3's clock is half a second behind;
// its offset puts its arrivals on rank 0's clock. The first
// eighth and the second half of the bytes do not count: a late burst
// (a starved rank reading all that waited at once) changes nothing.
func TestSteadyRate(t *testing.T) {
	arrivals := make([][]chunkArrival, 4)
	base := int64(1_000_000_000_000)
	for k := range 100 {
		at := base + int64(k)*10_000_000 // every 10 ms
		arrivals[2] = append(arrivals[2], chunkArrival{at: at, bytes: 10_000})
		arrivals[3] = append(arrivals[3], chunkArrival{at: at - 500_000_000, bytes: 10_000})
	}
	offsets := []float64{0, 0, 0, 0.5}
	require.InEpsilon(t, 2e6, steadyRate(arrivals, []int{2, 3}, offsets), 0.03)
	// Without the offsets rank 3's bytes seem to arrive first, alone.
	require.Less(t, steadyRate(arrivals, []int{2, 3}, []float64{0, 0, 0, 0}), 1.6e6)
	// A burst after the first half changes nothing.
	last := arrivals[2][len(arrivals[2])-1].at
	for range 50 {
		arrivals[2] = append(arrivals[2], chunkArrival{at: last + 1000, bytes: 10_000})
	}
	require.InEpsilon(t, 2e6, steadyRate(arrivals, []int{2, 3}, offsets), 0.03)
	// It cannot tell without offsets, or with few chunks.
	require.Zero(t, steadyRate(arrivals, []int{2, 3}, nil))
	require.Zero(t, steadyRate(arrivals, []int{2, 3}, []float64{0, 0, 0, math.NaN()}))
	few := [][]chunkArrival{nil, nil, arrivals[2][:8], arrivals[3][:7]}
	require.Zero(t, steadyRate(few, []int{2, 3}, offsets))
}

// TestCapacity: the most any round carried, or the mean of the steady
// rates, without one more than 1.5 times what its round carried.
func TestCapacity(t *testing.T) {
	rounds := []CutRound{
		{Carried: [2]float64{50, 40}, Steady: [2]float64{55, 0}},
		{Carried: [2]float64{35, 44}, Steady: [2]float64{132, 0}}, // disturbed
		{Carried: [2]float64{52, 41}, Steady: [2]float64{53, 0}},
	}
	require.Equal(t, 54.0, capacity(rounds, 0))
	require.Equal(t, 44.0, capacity(rounds, 1), "no steady rate: what the rounds carried")
	rounds[0].Steady[0], rounds[2].Steady[0] = 45, 47
	require.Equal(t, 52.0, capacity(rounds, 0), "a lower bound stands")
	// A round whose flows stalled while the window was measured: its
	// steady rate is far below what it carried, and is left out.
	stalled := []CutRound{
		{Carried: [2]float64{40, 46}, Steady: [2]float64{46, 49}},
		{Carried: [2]float64{35, 33}, Steady: [2]float64{17, 19}},
	}
	require.Equal(t, 46.0, capacity(stalled, 0))
	require.Equal(t, 49.0, capacity(stalled, 1))
	require.Equal(t, 35.0, stalled[1].best(0), "a stalled round shows what it carried")
	stalled[1].Steady[0] = 24
	require.Equal(t, 40.0, capacity(stalled, 0), "within 1.5 times: kept; the median (35) is below what the first round carried")
	// Three rounds: the median leaves out one that read high.
	high := []CutRound{
		{Carried: [2]float64{44, 43}, Steady: [2]float64{48, 44}},
		{Carried: [2]float64{46, 41}, Steady: [2]float64{60, 58}},
		{Carried: [2]float64{46, 47}, Steady: [2]float64{44, 39}},
	}
	require.Equal(t, 48.0, capacity(high, 0))
	require.Equal(t, 47.0, capacity(high, 1), "the median (44) is below what a round carried")
}

// TestCutTimesArrivals: rows carry each rank's chunks; a row cut short or
// a chunk of no bytes is a protocol error.
func TestCutTimesArrivals(t *testing.T) {
	rows := cutRows([]float64{0.1, 0.2}, true)
	rec := make([]byte, 16)
	binary.LittleEndian.PutUint64(rec, 12345)
	binary.LittleEndian.PutUint64(rec[8:], 4096)
	rows[1] = append(rows[1], rec...)
	elapsed, paced, arr, err := cutTimes(rows, 2)
	require.NoError(t, err)
	require.True(t, paced)
	require.Equal(t, []float64{0.1, 0.2}, elapsed)
	require.Equal(t, [][]chunkArrival{nil, {{at: 12345, bytes: 4096}}}, arr)
	rows[1] = rows[1][:len(rows[1])-1]
	_, _, _, err = cutTimes(rows, 2)
	require.ErrorIs(t, err, ErrProtocol)
	rows[1] = append(cutRows([]float64{0.2}, true)[0], make([]byte, 16)...)
	_, _, _, err = cutTimes(rows, 2)
	require.ErrorIs(t, err, ErrProtocol)
}

// TestSegmentBinds: a segment measured within 10% of what the NICs feed
// it, both ways, is none (a noisy first round found it); one that limits
// either direction by more stays.
func TestSegmentBinds(t *testing.T) {
	seg := collective.Segment{AB: 54.9, BA: 60.2}
	require.False(t, segmentBinds(seg, 59.7, 59.7), "0.92 and 1.0 of the feed")
	seg.AB = 50
	require.True(t, segmentBinds(seg, 59.7, 59.7), "0.84 of the feed one way")
	require.True(t, segmentBinds(collective.Segment{AB: 60, BA: 28}, 60, 60), "an uplink at half the feed back")
}
