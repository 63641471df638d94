package bench_test

import (
	"os"

	"github.com/hetcomm/hetcomm/bench"
)

// A result table, as hetbench prints it.
func ExampleTable_WriteMarkdown() {
	t := &bench.Table{Name: "plan", Columns: []string{"algorithm", "predicted_s"}}
	t.Add("openshop", 0.25)
	t.Add("caterpillar", 0.5)
	_ = t.WriteMarkdown(os.Stdout)
	// Output:
	// | algorithm | predicted_s |
	// |---|---|
	// | openshop | 0.250 |
	// | caterpillar | 0.500 |
}
