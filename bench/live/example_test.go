package live_test

import (
	"fmt"

	"github.com/hetcomm/hetcomm/bench/live"
)

// The sparse Alltoallv pattern of 4 ranks: each sends to the next one only.
func ExamplePatternSizes() {
	sz, err := live.PatternSizes("sparse", 4, 1024, 1)
	if err != nil {
		panic(err)
	}
	for _, row := range sz {
		fmt.Println(row)
	}
	// Output:
	// [0 1024 0 0]
	// [0 0 1024 0]
	// [0 0 0 1024]
	// [1024 0 0 0]
}
