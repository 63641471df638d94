package collective_test

import (
	"fmt"

	"github.com/hetcomm/hetcomm/collective"
)

// The worked example of Wu, Yeh and Liu (section 6): four nodes, P0 and P1
// with send overhead 1 and receive overhead 3, P2 and P3 with 2 and 6, no
// wire time; P0 multicasts to {P1,P2}, P1 to {P2,P3}, P2 to {P0,P1,P3}.
func ExamplePlanMulticast() {
	m := &collective.Model{
		PerByte:      collective.Matrix(4, 0),
		SendOverhead: []collective.Overhead{{Const: 1}, {Const: 1}, {Const: 2}, {Const: 2}},
		RecvOverhead: []collective.Overhead{{Const: 3}, {Const: 3}, {Const: 6}, {Const: 6}},
	}
	mc := &collective.Multicast{Messages: []collective.Message{
		{Source: 0, Bytes: 1, Dests: []int{1, 2}},
		{Source: 1, Bytes: 1, Dests: []int{2, 3}},
		{Source: 2, Bytes: 1, Dests: []int{0, 1, 3}},
	}}
	plan, err := collective.PlanMulticast(m, mc, collective.WRP, collective.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("completion %g, lower bound %g\n", plan.Predicted, plan.LowerBound)
	for _, t := range plan.Tasks {
		fmt.Printf("P%d sends P%d's message to P%d: send %g-%g, received by %g\n",
			t.Src, mc.Messages[t.Message].Source, t.Dst, t.SendStart, t.SendEnd, t.RecvEnd)
	}
	// Each node's own list, sends and receives interleaved:
	for _, x := range plan.NodeTasks(1) {
		t := plan.Tasks[x]
		if t.Src == 1 {
			fmt.Printf("P1: send message %d to P%d\n", t.Message, t.Dst)
		} else {
			fmt.Printf("P1: receive message %d from P%d\n", t.Message, t.Src)
		}
	}
	// Output:
	// completion 14, lower bound 13
	// P2 sends P2's message to P0: send 0-2, received by 5
	// P0 sends P0's message to P1: send 0-1, received by 4
	// P0 sends P0's message to P2: send 1-2, received by 8
	// P1 sends P1's message to P3: send 0-1, received by 7
	// P0 sends P2's message to P1: send 5-6, received by 9
	// P1 sends P1's message to P2: send 4-5, received by 14
	// P0 sends P2's message to P3: send 6-7, received by 13
	// P1: send message 1 to P3
	// P1: receive message 0 from P0
	// P1: send message 1 to P2
	// P1: receive message 2 from P0
}
