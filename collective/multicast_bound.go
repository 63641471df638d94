package collective

import (
	"math"
	"slices"
)

// mcLowerBound computes the bound of MulticastLowerBound on a validated
// problem.
//
// For each message, a dense Dijkstra over D_k + {source} gives the earliest
// arrival at every destination (a relay forwards once its receive is done:
// hop = S + X*l, then R at the receiver). Times are accumulated in the same
// order of operations as the planners' (receive end + S, + X, + R), so a
// plan that achieves the bound equals it exactly. The search stops as soon
// as the settled node plus the cheapest possible hop cannot improve any
// remaining tentative time. Each node then processes its receives in order
// of earliest arrival, start = max(previous end, arrival): the optimal
// one-machine makespan with release dates.
func mcLowerBound(c *mcCosts, mc *Multicast) float64 {
	n := c.n
	type recv struct{ arr, rcv float64 }
	count := make([]int, n+1)
	for _, msg := range mc.Messages {
		for _, d := range msg.Dests {
			count[d+1]++
		}
	}
	for v := 0; v < n; v++ {
		count[v+1] += count[v]
	}
	all := make([]recv, count[n])
	fill := append([]int(nil), count[:n]...)
	// The cheapest wire cost per byte over all pairs, for the early exit.
	xmin, lmin := math.Inf(1), math.Inf(1)
	for v := 0; v < n; v++ {
		for u := 0; u < n; u++ {
			if u != v {
				xmin = min(xmin, c.xin[v*n+u])
				lmin = min(lmin, c.lin[v*n+u])
			}
		}
	}
	end := make([]float64, n)
	arr := make([]float64, n)
	sendCost := make([]float64, n)
	recvCost := make([]float64, n)
	done := make([]bool, n)
	var nodes []int
	for _, msg := range mc.Messages {
		if len(msg.Dests) == 0 {
			continue
		}
		l := msg.Bytes
		fl := float64(l)
		nodes = append(nodes[:0], msg.Source)
		nodes = append(nodes, msg.Dests...)
		smin, rmin := math.Inf(1), math.Inf(1)
		for _, v := range nodes {
			end[v], arr[v], done[v] = math.Inf(1), math.Inf(1), false
			sendCost[v], recvCost[v] = c.send(v, l), c.recv(v, l)
			smin = min(smin, sendCost[v])
			if v != msg.Source {
				rmin = min(rmin, recvCost[v])
			}
		}
		wmin := float64(fl*xmin) + lmin
		end[msg.Source] = 0
		for range nodes {
			u, far := -1, math.Inf(-1)
			for _, v := range nodes {
				if done[v] {
					continue
				}
				if u < 0 || end[v] < end[u] {
					u = v
				}
				far = max(far, end[v])
			}
			// No hop from u (or any later node) can end before this.
			if ((end[u]+smin)+wmin)+rmin >= far {
				break
			}
			done[u] = true
			su := end[u] + sendCost[u]
			for _, v := range msg.Dests {
				if done[v] {
					continue
				}
				a := su + c.wire(u, v, l)
				if e := a + recvCost[v]; e < end[v] {
					end[v], arr[v] = e, a
				}
			}
		}
		for _, v := range msg.Dests {
			all[fill[v]] = recv{arr: arr[v], rcv: recvCost[v]}
			fill[v]++
		}
	}
	lb := 0.0
	for v := 0; v < n; v++ {
		rs := all[count[v]:count[v+1]]
		slices.SortFunc(rs, func(a, b recv) int {
			if a.arr != b.arr {
				if a.arr < b.arr {
					return -1
				}
				return 1
			}
			if a.rcv != b.rcv {
				if a.rcv < b.rcv {
					return -1
				}
				return 1
			}
			return 0
		})
		t := 0.0
		for _, r := range rs {
			if r.arr > t {
				t = r.arr
			}
			t += r.rcv
		}
		lb = max(lb, t)
	}
	return lb
}
