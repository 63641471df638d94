package collective

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedistributionGolden plans every problem in testdata/redistribute
// with every redistribution planner and compares the plan JSON with the
// golden file NAME.ALGO.plan.json (go test -update rewrites
// them). Each plan must also survive a JSON round trip unchanged.
func TestRedistributionGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "redistribute", "*.problem.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".problem.json")
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		pr, err := ParseProblem(data)
		require.NoError(t, err)
		for _, a := range Algorithms(KindRedistribute) {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				p, err := Solve(pr, a, Options{})
				require.NoError(t, err)
				require.NoError(t, ValidatePlan(pr, p))
				sim, err := SimulatePlan(pr, p)
				require.NoError(t, err)
				require.Equal(t, p, sim)

				back := goldenPlan(t, p, filepath.Join("testdata", "redistribute", name+"."+string(a)+".plan.json"))
				require.NoError(t, ValidatePlan(pr, back))
			})
		}
	}
}
