package collective

import "math"

// variantLimit is the most ranks for which Auto also tries the open shop
// under other receiver rules (openShopRule): each is the plain O(P^3)
// heuristic, 1.5 ms at 64 ranks.
const variantLimit = 64

// openShopRules are the receiver rules Auto tries besides the open
// shop's own (see [exchangeInstance.openShopRule]): the literal reading
// (the receiver idle the longest), the rule without the work-left ties,
// then three weights of the work left against the time a receiver can
// start.
var openShopRules = []float64{literalRule, -1, 0.02, 0.05, 0.1}

// literalRule is the openShopRule weight that selects the literal reading.
const literalRule = -2

// openShopRule is the open shop heuristic with another receiver rule, for
// Auto. With w == literalRule a sender takes the receiver available
// earliest, the smallest recvavail even among receivers already idle,
// ties by cyclic order, and senders at the same time go by rank: the
// paper's words read literally, which this package's open shop followed
// before (so Auto is never worse than it was then). With w = -1 a sender
// takes the receiver that can start first (the smallest max(recvavail,
// sendavail)), ties by cyclic order, and senders at the same time go by
// rank: the open shop without its work-left ties.
// With w >= 0 senders go as in the open shop, and a sender takes the
// receiver with the smallest max(recvavail, sendavail) - w * (receive
// time left), ties by cyclic order: it may wait a little for a receiver
// with much more work left. Neither is better than the open shop on
// average; each is on some instances where the open shop is furthest from
// t_lb (TestExchangeQuality).
func (in *exchangeInstance) openShopRule(w float64) (send, recv [][]int) {
	n := in.n
	send, recv = in.newOrders()
	sendAvail := make([]float64, n)
	recvAvail := make([]float64, n)
	sendLeft := make([]float64, n)
	recvLeft := make([]float64, n)
	left := make([][]int, n)
	for i := 0; i < n; i++ {
		for d := 1; d < n; d++ {
			if j := (i + d) % n; in.isMsg(i, j) {
				left[i] = append(left[i], j)
				sendLeft[i] += in.cost[i][j]
				recvLeft[j] += in.cost[i][j]
			}
		}
	}
	for {
		i := -1
		for k := 0; k < n; k++ {
			if len(left[k]) > 0 && (i < 0 || sendAvail[k] < sendAvail[i] ||
				w >= 0 && sendAvail[k] == sendAvail[i] && sendLeft[k] > sendLeft[i]) {
				i = k
			}
		}
		if i < 0 {
			return send, recv
		}
		// left[i] is in cyclic order from i+1 (it starts so and keeps
		// its order), so the first of equals is the nearest.
		best, score := -1, 0.0
		for k, j := range left[i] {
			sc := math.Max(recvAvail[j], sendAvail[i])
			switch {
			case w == literalRule:
				sc = recvAvail[j]
			case w >= 0:
				sc -= w * recvLeft[j]
			}
			if best < 0 || sc < score {
				best, score = k, sc
			}
		}
		j := left[i][best]
		c := in.cost[i][j]
		end := math.Max(sendAvail[i], recvAvail[j]) + c
		sendAvail[i], recvAvail[j] = end, end
		sendLeft[i] -= c
		recvLeft[j] -= c
		send[i] = append(send[i], j)
		recv[j] = append(recv[j], i)
		left[i] = append(left[i][:best], left[i][best+1:]...)
	}
}
