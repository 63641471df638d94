package collective_test

import (
	"fmt"

	"github.com/hetcomm/hetcomm/collective"
)

// Three ranks on links of different speeds: ranks 0 and 2 share a slow
// link. Every planner returns per-rank send and receive orders with
// predicted times. Here the open-shop heuristic starts the two slow
// messages first (ranks 0 and 2 have the most to send, and each takes the
// idle receiver with the most to receive), then 2->1 must wait for 0->1:
// it ends 0.11 s above the lower bound, which Auto reaches with another
// planner.
func ExamplePlanExchange() {
	m := &collective.Model{
		Latency: [][]float64{{0, 0.01, 0.01}, {0.01, 0, 0.01}, {0.01, 0.01, 0}},
		Bandwidth: [][]float64{ // bytes per second
			{0, 1e6, 1e5},
			{1e6, 0, 1e6},
			{1e5, 1e6, 0},
		},
	}
	x := &collective.Exchange{Bytes: [][]int64{
		{0, 100000, 100000},
		{100000, 0, 0}, // rank 1 sends nothing to rank 2
		{100000, 100000, 0},
	}}
	p, err := collective.PlanExchange(m, x, collective.OpenShop, collective.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("predicted %.2f s, lower bound %.2f s\n", p.Predicted, p.LowerBound)
	for _, t := range p.Transfers {
		fmt.Printf("%d->%d  send #%d  recv #%d  [%.2f, %.2f]\n", t.Src, t.Dst, t.SendSeq, t.RecvSeq, t.Start, t.End)
	}
	best, err := collective.PlanExchange(m, x, collective.Auto, collective.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("auto picked %s: predicted %.2f s\n", best.Algorithm, best.Predicted)
	// Output:
	// predicted 1.23 s, lower bound 1.12 s
	// 0->2  send #0  recv #0  [0.00, 1.01]
	// 0->1  send #1  recv #0  [1.01, 1.12]
	// 1->0  send #0  recv #1  [1.01, 1.12]
	// 2->0  send #0  recv #0  [0.00, 1.01]
	// 2->1  send #1  recv #1  [1.12, 1.23]
	// auto picked minmatch: predicted 1.12 s
}
