package collective_test

import (
	"fmt"

	"github.com/hetcomm/hetcomm/collective"
)

// Two clusters of three nodes behind a backbone that carries three
// transfers at once, one second of setup per step, 1 byte/s per transfer
// (so bytes read as seconds): the example of Figure 2 of Jeannot and
// Wagner.
func ExamplePlanRedistribution() {
	r := &collective.Redistribution{
		Senders: 3, Receivers: 3, K: 3, Rate: 1, Setup: 1,
		Bytes: [][]int64{{8, 3, 0}, {0, 5, 3}, {3, 4, 5}},
	}
	p, err := collective.PlanRedistribution(r, collective.OGGP, collective.Options{})
	if err != nil {
		panic(err)
	}
	if err := collective.ValidateRedistribution(r, p); err != nil {
		panic(err)
	}
	for i, s := range p.Steps {
		fmt.Printf("step %d (%g s):", i, s.Duration)
		for _, t := range s.Transfers {
			fmt.Printf(" %d->%d %dB", t.Src, t.Dst, t.Bytes)
		}
		fmt.Println()
	}
	fmt.Printf("predicted %g s, lower bound %g s\n", p.Predicted, p.LowerBound)
	// Output:
	// step 0 (6 s): 0->0 5B 1->1 5B 2->2 5B
	// step 1 (4 s): 0->1 3B 2->0 3B
	// step 2 (3 s): 0->0 2B 1->2 2B 2->1 2B
	// step 3 (2 s): 1->2 1B 2->1 1B
	// step 4 (2 s): 0->0 1B 2->1 1B
	// predicted 17 s, lower bound 15 s
}
