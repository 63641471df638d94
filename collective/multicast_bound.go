package collective

import (
	"math"
	"sort"
)

// mcLowerBound computes the bound of MulticastLowerBound on a validated
// problem.
//
// For each message, a dense Dijkstra over D_k + {source} gives the earliest
// arrival at every destination (a relay forwards once its receive is done:
// hop = S + X*l, then R at the receiver). Times are accumulated in the same
// order of operations as the planners' (receive end + S, + X, + R), so a
// plan that achieves the bound equals it exactly. Each node then processes
// its receives in order of earliest arrival, start = max(previous end,
// arrival): the optimal one-machine makespan with release dates.
func mcLowerBound(c *mcCosts, mc *Multicast) float64 {
	n := c.n
	type recv struct {
		node     int32
		arr, rcv float64
	}
	var all []recv
	total := 0
	for _, msg := range mc.Messages {
		total += len(msg.Dests)
	}
	all = make([]recv, 0, total)
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
		nodes = append(nodes[:0], msg.Source)
		nodes = append(nodes, msg.Dests...)
		for _, v := range nodes {
			end[v], arr[v], done[v] = math.Inf(1), math.Inf(1), false
			sendCost[v], recvCost[v] = c.send(v, l), c.recv(v, l)
		}
		end[msg.Source] = 0
		for range nodes {
			u := -1
			for _, v := range nodes {
				if !done[v] && (u < 0 || end[v] < end[u]) {
					u = v
				}
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
			all = append(all, recv{node: int32(v), arr: arr[v], rcv: recvCost[v]})
		}
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].node != all[b].node {
			return all[a].node < all[b].node
		}
		if all[a].arr != all[b].arr {
			return all[a].arr < all[b].arr
		}
		return all[a].rcv < all[b].rcv
	})
	lb := 0.0
	for x := 0; x < len(all); {
		t := 0.0
		y := x
		for ; y < len(all) && all[y].node == all[x].node; y++ {
			if all[y].arr > t {
				t = all[y].arr
			}
			t += all[y].rcv
		}
		if t > lb {
			lb = t
		}
		x = y
	}
	return lb
}
