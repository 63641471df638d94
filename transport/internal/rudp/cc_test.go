package rudp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRTTEstimator(t *testing.T) {
	var r rttEstimator
	const initial = 200 * time.Millisecond
	require.Equal(t, initial, r.rto(initial, 0, 10*time.Millisecond, time.Second))
	r.update(100 * time.Millisecond)
	require.Equal(t, 100*time.Millisecond, r.srtt)
	require.Equal(t, 50*time.Millisecond, r.rttvar)
	// RFC 6298: RTO = SRTT + 4*RTTVAR.
	require.Equal(t, 300*time.Millisecond, r.rto(initial, 0, time.Millisecond, time.Second))
	for range 50 {
		r.update(100 * time.Millisecond)
	}
	require.InDelta(t, float64(100*time.Millisecond), float64(r.srtt), float64(time.Millisecond))
	require.Less(t, r.rttvar, 5*time.Millisecond)
	// Clamps.
	require.Equal(t, 50*time.Millisecond, r.rto(initial, 0, time.Millisecond, 50*time.Millisecond))
	r2 := rttEstimator{}
	r2.update(10 * time.Microsecond)
	require.Equal(t, 10*time.Millisecond, r2.rto(initial, 0, 10*time.Millisecond, time.Second))
	require.Equal(t, 10*time.Microsecond, r2.min)
	require.Equal(t, lossGranularity, r2.lossDelay())
	// max(2*SRTT, SRTT+4*RTTVAR) + margin = max(20, 10+4*5) us + margin.
	require.Equal(t, 30*time.Microsecond+probeMargin, r2.probeTimeout(initial))
	require.Equal(t, initial, (&rttEstimator{}).probeTimeout(initial))
}

func TestCubic(t *testing.T) {
	const mss = 1000
	c := newCubic(mss, 10, 1<<30)
	require.True(t, c.inSlowStart())
	now := time.Duration(0)
	srtt := 10 * time.Millisecond
	// Slow start doubles per round trip.
	c.onAck(10*mss, now, srtt, true)
	require.Equal(t, 20*mss, c.cwnd)
	// Not window-limited: no growth.
	c.onAck(10*mss, now, srtt, false)
	require.Equal(t, 20*mss, c.cwnd)

	// A loss reduces by beta once per episode.
	require.True(t, c.onLoss(5, 30))
	require.Equal(t, 14*mss, c.cwnd)
	require.Equal(t, c.cwnd, c.ssthresh)
	require.False(t, c.onLoss(20, 30), "same episode")
	require.Equal(t, 14*mss, c.cwnd)
	require.True(t, c.onLoss(31, 40), "a packet sent after the reduction")
	require.Equal(t, 9800, c.cwnd)

	// Congestion avoidance grows, concave back towards wMax then beyond.
	prev := c.cwnd
	for i := range 200 {
		now += srtt
		c.onAck(c.cwnd, now, srtt, true)
		require.GreaterOrEqual(t, c.cwnd, prev, "step %d", i)
		prev = c.cwnd
	}
	require.Greater(t, c.cwnd, 14*mss)

	// Timeout: one packet.
	c.onRTO(100)
	require.Equal(t, mss, c.cwnd)
	require.False(t, c.onLoss(99, 120), "losses from before the timeout are the same episode")
	require.Greater(t, c.pacingRate(srtt), 0.0)
}

func TestPacer(t *testing.T) {
	var p pacer
	rate := 1e6 // 1 MB/s
	burst := pacerBurst(rate, 1000)
	require.Equal(t, 4000.0, burst)
	p.refill(0, rate, burst)
	for range 4 {
		ok, _ := p.take(1000, rate)
		require.True(t, ok)
	}
	ok, wait := p.take(1000, rate)
	require.False(t, ok)
	require.Equal(t, time.Millisecond, wait)
	p.refill(time.Millisecond, rate, burst)
	ok, _ = p.take(1000, rate)
	require.True(t, ok)
	p.refill(time.Hour, rate, burst)
	require.Equal(t, burst, p.tokens, "the bucket does not overflow")
}
