package netprobe

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
)

// runPlan drives a reprobePlan to its end, measuring each step with
// measure (the directions of the step at the same time), checks the
// constraints of every step and returns the steps.
func runPlan(t *testing.T, pl *reprobePlan, rounds [][]Pair, measure func(step []Pair) []float64) [][]Pair {
	t.Helper()
	roundOf := map[Pair]int{}
	for ri, round := range rounds {
		for _, p := range round {
			roundOf[Pair{min(p.A, p.B), max(p.A, p.B)}] = ri
		}
	}
	var steps [][]Pair
	for len(steps) < 1000 {
		items := pl.Next()
		if len(items) == 0 {
			return steps
		}
		busy, inRound := map[int]bool{}, map[int]bool{}
		var step []Pair
		for _, it := range items {
			require.False(t, busy[it.A] || busy[it.B], "step %v: a rank twice", items)
			r := roundOf[Pair{min(it.A, it.B), max(it.A, it.B)}]
			require.False(t, inRound[r], "step %v: two directions of tournament round %d", items, r)
			busy[it.A], busy[it.B], inRound[r] = true, true, true
			require.Positive(t, it.Bytes)
			step = append(step, Pair{it.A, it.B})
		}
		var fits []Fit
		for _, bw := range measure(step) {
			fits = append(fits, Fit{Latency: 1e-4, Bandwidth: bw})
		}
		pl.Done(step, fits)
		steps = append(steps, step)
	}
	t.Fatal("the plan does not end")
	return nil
}

// TestReprobePlanBackbone: two clusters of four ranks (0-3, 4-7) whose
// NICs carry 100 (MB/s, say), behind a backbone that carries `capacity`
// flows each way at full rate and shares itself fairly among more. The
// tournament is the plain one (lower rank first), so its rounds that pair
// ranks across load one direction of the backbone with all of them.
func TestReprobePlanBackbone(t *testing.T) {
	const n, nic = 8, 100.0
	cross := func(d Pair) int {
		switch {
		case (d.A < 4) == (d.B < 4):
			return 0
		case d.A < 4:
			return 1
		default:
			return -1
		}
	}
	for _, capacity := range []int{2, 1} {
		// rate is what d gets while the directions of at run.
		rate := func(at []Pair, d Pair) float64 {
			c := cross(d)
			if c == 0 {
				return nic
			}
			same := 0
			for _, q := range at {
				if cross(q) == c {
					same++
				}
			}
			return nic * min(1, float64(capacity)/float64(same))
		}
		measure := func(step []Pair) []float64 {
			var r []float64
			for _, d := range step {
				r = append(r, rate(step, d))
			}
			return r
		}
		rounds := Tournament(n)
		m := &collective.Model{Latency: collective.Matrix(n, 1e-4), Bandwidth: collective.Matrix(n, 0)}
		for _, round := range rounds {
			first, second := append([]Pair(nil), round...), []Pair(nil)
			for _, p := range round {
				second = append(second, Pair{p.B, p.A})
			}
			for _, at := range [][]Pair{first, second} {
				for k, bw := range measure(at) {
					m.Bandwidth[at[k].A][at[k].B] = bw
				}
			}
		}
		suspects := Suspects(m)
		require.NotEmpty(t, suspects)
		for _, d := range suspects {
			require.NotZero(t, cross(d), "only directions across the backbone are suspect")
		}

		pl := newReprobePlan(m, rounds, Config{})
		steps := runPlan(t, pl, rounds, measure)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					require.Equal(t, nic, m.Bandwidth[i][j], "capacity %d: %d->%d", capacity, i, j)
				}
			}
		}
		measured := map[Pair]int{}
		alone := 0
		for _, st := range steps {
			for _, d := range st {
				measured[d]++
			}
			if len(st) == 1 {
				alone++
			}
		}
		for _, d := range suspects {
			require.Positive(t, measured[d], "suspect %v measured again", d)
		}
		t.Logf("capacity %d: %d suspects, %d steps (%d alone)", capacity, len(suspects), len(steps), alone)
		if capacity == 2 {
			// Directions of different rounds never load the backbone beyond
			// two flows each way: every step's results stand, and the
			// suspects take fewer steps than one at a time.
			require.Len(t, measured, len(suspects))
			require.Less(t, len(steps), len(suspects))
		} else {
			// One flow each way: steps that cross it twice the same way
			// leave both directions suspect, and those are measured alone;
			// once that is the rule, the rest too, so batching costs at most
			// a step.
			require.Positive(t, alone)
			require.LessOrEqual(t, len(steps), len(suspects)+1)
		}
	}
}

// TestReprobePlanFast: a pair faster than its ends are with anyone else is
// suspect; a step at the same time as others that confirms its first
// measurement lets it stand (a shared link cannot make a probe faster),
// one that does not sends it to be measured alone.
func TestReprobePlanFast(t *testing.T) {
	const n = 6
	rounds := Tournament(n)
	roundOf := map[Pair]int{}
	for ri, round := range rounds {
		for _, p := range round {
			roundOf[p] = ri
		}
	}
	// A noisy direction of a round other than {0,1}'s.
	var noisy Pair
	for _, p := range []Pair{{2, 3}, {2, 4}, {2, 5}, {3, 4}, {3, 5}, {4, 5}} {
		if roundOf[p] != roundOf[Pair{0, 1}] {
			noisy = p
			break
		}
	}
	for _, confirm := range []bool{true, false} {
		truth := collective.Matrix(n, 100)
		truth[0][1], truth[1][0] = 200, 200
		m := &collective.Model{Latency: collective.Matrix(n, 1e-4), Bandwidth: collective.Matrix(n, 100)}
		m.Bandwidth[0][1], m.Bandwidth[1][0] = 200, 200
		m.Bandwidth[noisy.A][noisy.B] = 50
		require.ElementsMatch(t, []Pair{{0, 1}, {1, 0}, noisy}, Suspects(m))
		pl := newReprobePlan(m, rounds, Config{})
		steps := runPlan(t, pl, rounds, func(step []Pair) []float64 {
			var r []float64
			for _, d := range step {
				bw := truth[d.A][d.B]
				if !confirm && len(step) > 1 {
					bw *= 0.75 // still fast, but not what the tournament saw
				}
				r = append(r, bw)
			}
			return r
		})
		require.Equal(t, truth, m.Bandwidth, "confirm=%v", confirm)
		alone := map[Pair]bool{}
		for _, st := range steps {
			if len(st) == 1 {
				alone[st[0]] = true
			}
		}
		if confirm {
			require.Len(t, steps, 2, "{0->1, noisy}, then 1->0: %v", steps)
		} else {
			require.True(t, alone[Pair{0, 1}] && alone[noisy], "%v", steps)
		}
	}
}

// pipePort is a Port between two ranks in one process: a message of m
// bytes keeps its sender m/rate seconds (the link's serialization) and
// arrives delay later. The pipe records when each message was sent and
// when it arrived: on a busy machine sleeps and timers run late, and the
// records say by how much.
type pipePort struct {
	me    int
	rate  float64
	delay time.Duration
	net   *pipeNet
}

type pipeNet struct {
	mu    sync.Mutex
	cond  *sync.Cond
	queue map[[3]int][][]byte // from, to, tag
	log   []pipeRecord        // every message, in the order of the Send calls
}

// pipeRecord is one message through a pipe.
type pipeRecord struct {
	from, tag, size int
	sent, arrived   time.Time // Send called; message queued at the receiver
}

// oneWay is how long the pipe took to carry the message.
func (r pipeRecord) oneWay() time.Duration { return r.arrived.Sub(r.sent) }

// records returns the messages from with tag, in order.
func (nw *pipeNet) records(from, tag int) []pipeRecord {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var out []pipeRecord
	for _, r := range nw.log {
		if r.from == from && r.tag == tag {
			out = append(out, r)
		}
	}
	return out
}

func newPipe(rate float64, delay time.Duration) (*pipePort, *pipePort) {
	nw := &pipeNet{queue: map[[3]int][][]byte{}}
	nw.cond = sync.NewCond(&nw.mu)
	return &pipePort{0, rate, delay, nw}, &pipePort{1, rate, delay, nw}
}

func (p *pipePort) Rank() int { return p.me }
func (p *pipePort) Size() int { return 2 }
func (p *pipePort) Send(ctx context.Context, peer, tag int, data []byte) error {
	p.net.mu.Lock()
	rec := len(p.net.log)
	p.net.log = append(p.net.log, pipeRecord{from: p.me, tag: tag, size: len(data), sent: time.Now()})
	p.net.mu.Unlock()
	time.Sleep(time.Duration(float64(len(data)) / p.rate * 1e9))
	msg := append([]byte(nil), data...)
	time.AfterFunc(p.delay, func() {
		p.net.mu.Lock()
		p.net.log[rec].arrived = time.Now()
		k := [3]int{p.me, peer, tag}
		p.net.queue[k] = append(p.net.queue[k], msg)
		p.net.mu.Unlock()
		p.net.cond.Broadcast()
	})
	return nil
}
func (p *pipePort) wait(peer, tag int, take bool) []byte {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	k := [3]int{peer, p.me, tag}
	for len(p.net.queue[k]) == 0 {
		p.net.cond.Wait()
	}
	msg := p.net.queue[k][0]
	if take {
		p.net.queue[k] = p.net.queue[k][1:]
	}
	return msg
}
func (p *pipePort) Recv(ctx context.Context, peer, tag int) ([]byte, error) {
	return p.wait(peer, tag, true), nil
}
func (p *pipePort) Probe(ctx context.Context, peer, tag int) error {
	p.wait(peer, tag, false)
	return nil
}
func (p *pipePort) Barrier(context.Context) error { panic("unused") }
func (p *pipePort) Gather(context.Context, int, []byte) ([][]byte, error) {
	panic("unused")
}
func (p *pipePort) Bcast(context.Context, int, []byte) ([]byte, error) { panic("unused") }

// TestMeasureRate: the rate-only re-measurement finds a link's rate, also
// when the size it is told to end with is far off, and moves no more data
// than its transfers should.
//
// The reference is what the pipe really did in this run, not its nominal
// rate and delay: a busy machine wakes the pipe's sleeps and timers late,
// which slows the link that measureRate measures. From the pipe's records
// (when each message was sent and when it arrived), the test computes
// what measureRate should find: the latency is half the smallest round
// trip the pipe gave the three pings and their acknowledgements, the rate
// is the final size over the median of the round trips the pipe gave the
// transfers of that size, less that smallest round trip. measureRate's
// own clock sees these round trips plus the goroutines' wake-ups, which
// a busy machine delays by milliseconds: its latency can only be larger
// (by at most 5 ms) and its rate at most 5% higher (it can only be lower,
// but not by more than 1.3x: a wrong size or a wrong transfer counted
// would be far off). The time budget (0.7 s: a quarter of the told
// size, three of the right size at 0.12 s each, and a sixth of a second
// at most for a wrong guess's quarter) is a budget of bytes: what it sent
// must take at most 0.7 s at the pipe's nominal rate.
func TestMeasureRate(t *testing.T) {
	const rate = 5e6
	cfg := Config{}.withDefaults()
	right := int64(rate * cfg.MinTime.Seconds() * 1.2)
	for _, largest := range []int64{right, 10 * right, right / 10} {
		a, b := newPipe(rate, 2*time.Millisecond)
		done := make(chan error, 1)
		go func() {
			_, err := echo(context.Background(), b, 0, make([]byte, 1))
			done <- err
		}()
		start := time.Now()
		f, err := measureRate(context.Background(), a, 1, cfg, make([]byte, cfg.MaxBytes), largest)
		took := time.Since(start)
		require.NoError(t, err)
		require.NoError(t, <-done)

		data, acks := a.net.records(0, tagData), a.net.records(1, tagAck)
		require.Equal(t, 0, data[len(data)-1].size, "an empty message ends the measurement")
		data = data[:len(data)-1]
		require.Len(t, acks, len(data), "one acknowledgement per message")
		roundTrip := func(k int) float64 { return (data[k].oneWay() + acks[k].oneWay()).Seconds() }
		const pings = 3
		minRTT := math.Inf(1)
		sent := int64(0)
		for k, d := range data {
			if k < pings {
				require.Equal(t, 1, d.size, "message %d is a ping", k)
				minRTT = math.Min(minRTT, roundTrip(k))
			}
			sent += int64(d.size)
		}
		final := data[len(data)-1].size
		var times []float64
		for k := len(data) - 1; k >= pings && data[k].size == final; k-- {
			times = append(times, roundTrip(k)-minRTT)
		}
		require.GreaterOrEqual(t, len(times), 3, "at least three transfers of the final size")
		wantRate, wantLatency := float64(final)/collective.Median(times), minRTT/2

		require.LessOrEqual(t, f.Bandwidth, 1.05*wantRate, "told %d bytes: the pipe carried %d-byte transfers at %.3g B/s", largest, final, wantRate)
		require.GreaterOrEqual(t, f.Bandwidth, wantRate/1.3, "told %d bytes: the pipe carried %d-byte transfers at %.3g B/s", largest, final, wantRate)
		require.GreaterOrEqual(t, f.Latency, wantLatency-1e-9, "told %d bytes: latency below what the pipe took", largest)
		require.LessOrEqual(t, f.Latency, wantLatency+5e-3, "told %d bytes: the pipe's latency was %.3g s", largest, wantLatency)
		require.Less(t, float64(sent)/rate, 0.7, "told %d bytes: sent %d bytes, %.2f s at %.3g B/s", largest, sent, float64(sent)/rate, rate)
		t.Logf("told %d bytes: %.3g B/s (the pipe: %.3g), latency %.3g s (the pipe: %.3g), %d bytes sent, in %v",
			largest, f.Bandwidth, wantRate, f.Latency, wantLatency, sent, took)
	}
}
