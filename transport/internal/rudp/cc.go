package rudp

import (
	"math"
	"time"
)

// This file holds the pure parts of loss recovery and congestion control:
// no locks, no clocks (time is an argument), so they can be tested alone.

// rttEstimator implements RFC 6298: SRTT, RTTVAR and the RTO.
type rttEstimator struct {
	srtt, rttvar time.Duration
	latest       time.Duration
	min          time.Duration
	samples      int
}

func (r *rttEstimator) update(sample time.Duration) {
	if sample <= 0 {
		sample = time.Microsecond
	}
	r.latest = sample
	if r.samples == 0 || sample < r.min {
		r.min = sample
	}
	if r.samples == 0 {
		r.srtt = sample
		r.rttvar = sample / 2
	} else {
		d := r.srtt - sample
		if d < 0 {
			d = -d
		}
		r.rttvar = (3*r.rttvar + d) / 4  // beta = 1/4
		r.srtt = (7*r.srtt + sample) / 8 // alpha = 1/8
	}
	r.samples++
}

// rto returns the retransmission timeout before backoff:
// SRTT + max(G, 4*RTTVAR) + ackDelay, clamped to [minRTO, maxRTO]; before
// the first sample it is initial.
func (r *rttEstimator) rto(initial, ackDelay, minRTO, maxRTO time.Duration) time.Duration {
	if r.samples == 0 {
		return initial
	}
	const granularity = time.Millisecond
	v := r.srtt + max(granularity, 4*r.rttvar) + ackDelay
	return min(max(v, minRTO), maxRTO)
}

// probeTimeout is the tail-loss probe timeout (RFC 8985's PTO): about two
// round trips plus a margin for timer and scheduling latency. It is not
// clamped to MinRTO: a probe is a single packet, so firing early costs one
// spurious retransmission, while waiting costs a stalled stream.
func (r *rttEstimator) probeTimeout(initial time.Duration) time.Duration {
	if r.samples == 0 {
		return initial
	}
	return max(2*r.srtt, r.srtt+4*r.rttvar) + probeMargin
}

// probeMargin covers timer and scheduling latency in probeTimeout.
const probeMargin = 500 * time.Microsecond

// lossDelay is the time threshold after which an unacknowledged packet sent
// before an acknowledged one is declared lost (RFC 9002: 9/8 of the RTT),
// at least lossGranularity.
func (r *rttEstimator) lossDelay() time.Duration {
	v := max(r.srtt, r.latest)
	v += v / 8
	return max(v, lossGranularity)
}

// lossGranularity floors the loss time threshold; RFC 9002 uses 1 ms, far
// above loopback round trips of tens of microseconds.
const lossGranularity = 200 * time.Microsecond

// smoothed returns SRTT, or fallback before the first sample.
func (r *rttEstimator) smoothed(fallback time.Duration) time.Duration {
	if r.samples == 0 {
		return fallback
	}
	return r.srtt
}

// cubic is the congestion controller: slow start, then CUBIC (RFC 9438)
// window growth with its Reno-friendly region, multiplicative decrease by
// beta = 0.7 once per loss episode (round trip), and a collapse to one
// packet on a retransmission timeout. Windows are in bytes.
type cubic struct {
	mss      int
	cwnd     int
	ssthresh int
	maxCwnd  int

	wMax       float64 // window before the last reduction, in packets
	k          float64 // seconds
	epoch      time.Duration
	epochValid bool
	wEst       float64 // Reno-friendly estimate, packets
	// recoveryTx: losses of packets sent at or before this transmission
	// number belong to the episode already reacted to.
	recoveryTx uint64
	lossEvents int
}

const (
	cubicC    = 0.4
	cubicBeta = 0.7
)

func newCubic(mss, initialWindow, maxCwnd int) cubic {
	return cubic{
		mss:      mss,
		cwnd:     initialWindow * mss,
		ssthresh: math.MaxInt,
		maxCwnd:  maxCwnd,
	}
}

func (c *cubic) inSlowStart() bool { return c.cwnd < c.ssthresh }

// onAck grows the window for acked bytes. cwndLimited says whether the
// sender was using its window (no growth when the application is the
// bottleneck).
func (c *cubic) onAck(acked int, now, srtt time.Duration, cwndLimited bool) {
	if acked <= 0 || !cwndLimited {
		return
	}
	if c.inSlowStart() {
		c.cwnd = min(c.cwnd+acked, c.maxCwnd)
		return
	}
	mss := float64(c.mss)
	cw := float64(c.cwnd) / mss
	if !c.epochValid {
		c.epoch = now
		c.epochValid = true
		if cw < c.wMax {
			c.k = math.Cbrt((c.wMax - cw) / cubicC)
		} else {
			c.k = 0
			c.wMax = cw
		}
		c.wEst = cw
	}
	t := (now - c.epoch + srtt).Seconds()
	target := cubicC*math.Pow(t-c.k, 3) + c.wMax
	target = min(max(target, cw), 1.5*cw)
	// Reno-friendly estimate: alpha = 3(1-beta)/(1+beta) packets per RTT.
	const alpha = 3 * (1 - cubicBeta) / (1 + cubicBeta)
	c.wEst += alpha * float64(acked) / float64(c.cwnd)
	var next float64
	if c.wEst > target {
		next = c.wEst
	} else {
		next = cw + (target-cw)*float64(acked)/float64(c.cwnd)
	}
	c.cwnd = min(max(int(next*mss), c.cwnd), c.maxCwnd)
}

// onLoss reacts to the loss of a packet with transmission number tx, given
// the highest transmission number sent so far. It reduces the window at
// most once per episode and reports whether it did.
func (c *cubic) onLoss(tx, highestSent uint64) bool {
	if tx <= c.recoveryTx {
		return false
	}
	c.recoveryTx = highestSent
	c.lossEvents++
	cw := float64(c.cwnd) / float64(c.mss)
	if cw < c.wMax {
		c.wMax = cw * (1 + cubicBeta) / 2 // fast convergence
	} else {
		c.wMax = cw
	}
	c.cwnd = max(int(float64(c.cwnd)*cubicBeta), minWindowPackets*c.mss)
	c.ssthresh = c.cwnd
	c.epochValid = false
	return true
}

// onRTO collapses the window after consecutive retransmission timeouts.
func (c *cubic) onRTO(highestSent uint64) {
	c.recoveryTx = highestSent
	c.lossEvents++
	c.wMax = float64(c.cwnd) / float64(c.mss)
	c.ssthresh = max(int(float64(c.cwnd)*cubicBeta), minWindowPackets*c.mss)
	c.cwnd = c.mss
	c.epochValid = false
}

// pacingRate returns bytes per second: the window spread over a round trip,
// with headroom (2x in slow start, 1.25x after) as Linux does.
func (c *cubic) pacingRate(srtt time.Duration) float64 {
	if srtt <= 0 {
		srtt = time.Millisecond
	}
	gain := 1.25
	if c.inSlowStart() {
		gain = 2
	}
	return gain * float64(c.cwnd) / srtt.Seconds()
}

// pacer is a token bucket in bytes.
type pacer struct {
	tokens float64
	last   time.Duration
	primed bool
}

// burst is the bucket depth: 1 ms of traffic at rate, at least 4 packets.
func pacerBurst(rate float64, mss int) float64 {
	return max(rate*0.001, float64(4*mss))
}

// refill adds tokens for the time since the last call.
func (p *pacer) refill(now time.Duration, rate, burst float64) {
	if !p.primed {
		p.tokens, p.last, p.primed = burst, now, true
		return
	}
	if now > p.last {
		p.tokens = min(p.tokens+rate*(now-p.last).Seconds(), burst)
		p.last = now
	}
}

// take spends n bytes if available; otherwise it returns how long to wait.
func (p *pacer) take(n int, rate float64) (ok bool, wait time.Duration) {
	if p.tokens >= float64(n) {
		p.tokens -= float64(n)
		return true, 0
	}
	need := float64(n) - p.tokens
	return false, time.Duration(need / rate * float64(time.Second))
}

// minWindowPackets is the smallest window after a loss (RFC 5681 and RFC
// 9002 use 2). Four keeps enough acknowledgements flowing that random loss
// is recovered by SACK evidence instead of timers, and still cuts a sender
// to a trickle on a congested path.
const minWindowPackets = 4
