package collective

import "math"

// BruteForceGoodput is the fraction of its capacity that a link keeps, in
// the brute-force model, when more transfers cross it at once than it can
// carry at full speed.
//
// The brute-force plan posts every transfer at once and lets the transport
// share the network. Its predicted duration is the setup time (paid once)
// plus the completion time of this fluid model of the platform of section
// 2.1 of Jeannot and Wagner: every sender's card sends at most Rate bytes
// per second, every receiver's card receives at most Rate, and the backbone
// carries at most K*Rate. The active transfers share these capacities
// max-min fairly (progressive filling, which TCP's congestion control
// approximates), re-shared each time one finishes. Where a link is
// oversubscribed packets are lost and retransmitted, so a receiver's card
// with more than one active transfer, and a backbone with more than K,
// deliver only BruteForceGoodput of their capacity; a sending card is never
// penalised, as a sender's own queue paces its transfers without loss.
// Since no card ever carries more than Rate nor the backbone more than
// K*Rate, the prediction is never below max(W(G), P(G)/k), the bandwidth
// part of [RedistributionLowerBound]; it can still beat the whole bound,
// which charges the setup once per step of a schedule.
//
// The value comes from the paper's measurements: on their testbed brute
// force was 5% to 20% slower than GGP and OGGP, whose schedules were
// themselves close to the lower bound; 0.9 sits in the middle of that
// range.
const BruteForceGoodput = 0.9

// redistFluid returns the completion time of the transfers ts, all started
// at once, in the fluid model described at [BruteForceGoodput].
func redistFluid(n1, n2, k int, rate float64, ts []StepTransfer) float64 {
	type flow struct {
		src, dst int     // resource indices: sending card, receiving card
		at       [2]int  // positions in the two cards' member lists
		rem      float64 // bytes left
		rate     float64
		frozen   bool
	}
	// Resources: sending cards 0..n1-1, receiving cards n1..n1+n2-1, the
	// backbone n1+n2 (which every transfer crosses, so it keeps no list).
	nres := n1 + n2 + 1
	bb := n1 + n2
	members := make([][]int, nres-1) // active transfers of each card
	fs := make([]flow, 0, len(ts))
	active := make([]int, 0, len(ts))
	for _, t := range ts {
		if t.Bytes <= 0 {
			continue
		}
		f := len(fs)
		fl := flow{src: t.Src, dst: n1 + t.Dst, rem: float64(t.Bytes)}
		fl.at = [2]int{len(members[fl.src]), len(members[fl.dst])}
		members[fl.src] = append(members[fl.src], f)
		members[fl.dst] = append(members[fl.dst], f)
		fs = append(fs, fl)
		active = append(active, f)
	}
	drop := func(f int) { // removes f from its cards' lists
		for side, r := range [2]int{fs[f].src, fs[f].dst} {
			m := members[r]
			last := m[len(m)-1]
			i := fs[f].at[side]
			m[i] = last
			if fs[last].src == r {
				fs[last].at[0] = i
			} else {
				fs[last].at[1] = i
			}
			members[r] = m[:len(m)-1]
		}
	}
	capLeft := make([]float64, nres)
	unfrozen := make([]int, nres)
	now := 0.0
	for len(active) > 0 {
		for r := 0; r < bb; r++ {
			unfrozen[r] = len(members[r])
			capLeft[r] = rate
			if r >= n1 && unfrozen[r] > 1 {
				capLeft[r] *= BruteForceGoodput
			}
		}
		unfrozen[bb] = len(active)
		capLeft[bb] = float64(k) * rate
		if len(active) > k {
			capLeft[bb] *= BruteForceGoodput
		}
		for _, f := range active {
			fs[f].frozen = false
		}
		// Progressive filling: the resource with the smallest fair share
		// fixes the rate of all its unfrozen transfers.
		for left := len(active); left > 0; {
			best, share := -1, math.Inf(1)
			for r, u := range unfrozen {
				if u > 0 {
					if s := capLeft[r] / float64(u); s < share {
						best, share = r, s
					}
				}
			}
			share = math.Max(share, rate*1e-12) // rounding must not stall a transfer
			list := active
			if best < bb {
				list = members[best]
			}
			for _, f := range list {
				if fs[f].frozen {
					continue
				}
				fs[f].frozen = true
				fs[f].rate = share
				left--
				capLeft[fs[f].src] -= share
				capLeft[fs[f].dst] -= share
				capLeft[bb] -= share
				unfrozen[fs[f].src]--
				unfrozen[fs[f].dst]--
				unfrozen[bb]--
			}
		}
		dt := math.Inf(1)
		for _, f := range active {
			dt = math.Min(dt, fs[f].rem/fs[f].rate)
		}
		now += dt
		next := active[:0]
		for _, f := range active {
			if fs[f].rem/fs[f].rate <= dt*(1+1e-9) {
				drop(f) // finished (within rounding)
				continue
			}
			fs[f].rem -= fs[f].rate * dt
			next = append(next, f)
		}
		active = next
	}
	return now
}
