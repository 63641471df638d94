package taskmap_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/taskmap"
)

// Two chains on two machines, s0 -> s2 -> s4 and s1 -> s3 -> s5 -> s6
// (and s1 -> s5), with 2 s per transfer between machines. At run time s0
// takes twice its expected time. When block 2 is remapped (at 30 s, as
// s2 starts), that makes s4 critical although its static rank is below
// s5's: CD maps it first, PS and CS keep the static order.
func Example() {
	exec := [][]float64{{20, 15}, {35, 40}, {10, 15}, {5, 35}, {25, 35}, {25, 25}, {25, 10}}
	g := &taskmap.Graph{}
	for i, e := range exec {
		g.Tasks = append(g.Tasks, taskmap.Task{Name: fmt.Sprintf("s%d", i), Exec: e})
	}
	for _, e := range [][2]int{{0, 2}, {1, 3}, {2, 4}, {3, 5}, {1, 5}, {5, 6}} {
		g.Items = append(g.Items, taskmap.Item{Size: 1 << 20, Producer: e[0], Consumers: []int{e[1]}})
	}
	model := &collective.Model{ // 2 s latency, nothing per byte
		Latency: [][]float64{{0, 2}, {2, 0}},
		PerByte: [][]float64{{0, 0}, {0, 0}},
	}
	p, err := taskmap.NewProblem(g, model, nil)
	if err != nil {
		panic(err)
	}
	base := taskmap.Baseline(p)
	ranks, _ := taskmap.Ranks(p, base)
	fmt.Println("blocks:", p.Blocks())
	fmt.Printf("baseline: machines %v, predicted %.0f s; rank(s4) %.0f < rank(s5) %.0f\n", base.Machine, base.Makespan, ranks[4], ranks[5])

	rt := taskmap.Expected(p)
	rt.Exec[0] = []float64{40, 30} // s0 runs twice as long
	for _, a := range taskmap.Algorithms() {
		s, err := taskmap.Simulate(p, rt, a, taskmap.SimOptions{})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s machines %v, completed at %.0f s\n", a, s.Machine, s.Makespan)
	}

	// Run-time values drawn around the expected ones (Erlang(2)).
	rt, _ = taskmap.Draw(p, taskmap.Distribution{Kind: taskmap.Erlang2}, rand.New(rand.NewPCG(1, 2)))
	lb, _ := taskmap.LowerBound(p, rt)
	s, _ := taskmap.Simulate(p, rt, taskmap.CD, taskmap.SimOptions{})
	fmt.Printf("erlang2 draw: CD %.1f s, lower bound %.1f s\n", s.Makespan, lb)
	// Output:
	// blocks: [[0 1] [2 3] [4 5] [6]]
	// baseline: machines [1 0 1 0 1 0 1], predicted 77 s; rank(s4) 35 < rank(s5) 37
	// static machines [1 0 1 0 1 0 1], completed at 90 s
	// ps     machines [1 0 1 0 1 0 0], completed at 90 s
	// cs     machines [1 0 1 0 1 0 0], completed at 90 s
	// cd     machines [1 0 1 0 0 1 1], completed at 80 s
	// gs     machines [1 0 0 0 0 1 1], completed at 87 s
	// ideal  machines [1 0 1 0 1 0 0], completed at 90 s
	// erlang2 draw: CD 81.8 s, lower bound 45.8 s
}
