package netprobe

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// burstPort is rank 0 of a fan-out whose links are token buckets, as
// netlab shapes them: the bucket of the link to peer i fills at rate[i]
// B/s up to max(16000 B, 2 ms of traffic), and a transfer passes as many
// bytes at once as it holds, the rest at the rate. Every peer
// acknowledges at once. It records the sizes sent.
type burstPort struct {
	rate   []float64
	mu     sync.Mutex
	sizes  map[int][]int
	tokens map[int]float64
	filled map[int]time.Time
}

func (p *burstPort) burst(peer int) float64 { return max(16000, 2e-3*p.rate[peer]) }

func (p *burstPort) Rank() int { return 0 }
func (p *burstPort) Size() int { return len(p.rate) }
func (p *burstPort) Send(ctx context.Context, peer, tag int, data []byte) error {
	if tag == tagData && len(data) > 1 {
		p.mu.Lock()
		p.sizes[peer] = append(p.sizes[peer], len(data))
		now := time.Now()
		tokens, ok := p.tokens[peer]
		if !ok {
			tokens = p.burst(peer) // idle before
		} else {
			tokens = min(p.burst(peer), tokens+now.Sub(p.filled[peer]).Seconds()*p.rate[peer])
		}
		wait := max(float64(len(data))-tokens, 0) / p.rate[peer]
		p.tokens[peer] = max(tokens-float64(len(data)), 0)
		p.filled[peer] = now.Add(time.Duration(wait * float64(time.Second)))
		p.mu.Unlock()
		time.Sleep(time.Duration(wait * float64(time.Second)))
	}
	return nil
}
func (p *burstPort) Recv(ctx context.Context, peer, tag int) ([]byte, error) {
	return make([]byte, 8), nil
}
func (p *burstPort) Probe(ctx context.Context, peer, tag int) error { return nil }
func (p *burstPort) Barrier(ctx context.Context) error              { return nil }
func (p *burstPort) Gather(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return nil, nil
}
func (p *burstPort) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	return data, nil
}

// TestMeasureFlowsSizesEachPeer: in a fan-out to a slow and a fast
// receiver, each flow is sized to take about flowTime at its own rate, so
// a token bucket's burst does not flatter the fast one. Sized alike (for
// the slow one, as before), the fast flow took 4 ms, its bucket refilled
// while it waited for the slow one, and it read 1.33 times its rate here;
// on racks32 a fan flow read 27.7 MB/s from a 25 MB/s NIC.
// A late timer lets a bucket refill, so the slow peer is held to what a
// full bucket at every transfer gives (1.14 times its rate), which holds
// on a busy machine; the fast peer's bucket is 3% of its transfer.
func TestMeasureFlowsSizesEachPeer(t *testing.T) {
	p := &burstPort{rate: []float64{0, 2e6, 30e6}, sizes: map[int][]int{}, tokens: map[int]float64{}, filled: map[int]time.Time{}}
	cfg := Config{}.withDefaults()
	buf := make([]byte, cfg.MaxBytes)
	agg, rates, err := measureFlows(context.Background(), p, []int{1, 2}, cfg, buf, 0, []float64{1e-4, 1e-4})
	require.NoError(t, err)
	require.Len(t, rates, 2)
	for k, peer := range []int{1, 2} {
		want := p.rate[peer]
		t.Logf("peer %d: %.3g B/s of %.3g, sizes %v", peer, rates[k], want, p.sizes[peer])
		last := float64(p.sizes[peer][len(p.sizes[peer])-1])
		// The most a bucket can give: full at the start of every transfer
		// (a late timer lets it refill; 1% for the round trip taken off).
		require.LessOrEqual(t, rates[k], 1.01*want*last/(last-p.burst(peer)), "peer %d: more than its bucket allows", peer)
		require.GreaterOrEqual(t, rates[k], 0.5*want, "peer %d", peer)
		require.LessOrEqual(t, last, 1.3*want*flowTime.Seconds()+p.burst(peer),
			"peer %d: its transfers take about flowTime at its rate, not more", peer)
	}
	// The fast peer's transfers are long enough that its bucket adds
	// little (sized alike it read 1.33 times its rate).
	require.LessOrEqual(t, rates[1], 1.1*p.rate[2], "a burst flattered the fast flow")
	// Each sized to its own rate (15 times apart; a late timer in the
	// warm-up only makes a size smaller), not alike.
	slow, fast := p.sizes[1][len(p.sizes[1])-1], p.sizes[2][len(p.sizes[2])-1]
	require.GreaterOrEqual(t, fast, 5*slow, "the fast peer's transfers are sized to its rate")
	// The aggregate: what both sent over the time until the last ended,
	// which sizes that end together keep near the sum of the rates.
	require.LessOrEqual(t, agg, 1.1*(p.rate[1]+p.rate[2]))
	require.GreaterOrEqual(t, agg, 0.5*(p.rate[1]+p.rate[2]))
}
