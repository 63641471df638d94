package sim_test

import (
	"fmt"

	"github.com/hetcomm/hetcomm/bench/sim"
)

// The experiments `hetbench sim` knows.
func ExampleExperiments() {
	for _, e := range sim.Experiments() {
		fmt.Println(e.Name)
	}
	// Output:
	// alltoall
	// multicast
	// redistribute
	// remap
	// scale
}
