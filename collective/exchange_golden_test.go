package collective

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExchangeGolden plans every testdata/exchange/*.problem.json with every
// total-exchange planner and compares the plan JSON with
// NAME.ALGO.plan.json. Run with -update to rewrite them after an intended
// change (and review the diff).
func TestExchangeGolden(t *testing.T) {
	problems, err := filepath.Glob(filepath.Join("testdata", "exchange", "*.problem.json"))
	require.NoError(t, err)
	require.NotEmpty(t, problems)
	for _, file := range problems {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		pr, err := ParseProblem(data)
		require.NoError(t, err, file)
		name := strings.TrimSuffix(filepath.Base(file), ".problem.json")
		for _, algo := range exAlgos {
			t.Run(name+"/"+string(algo), func(t *testing.T) {
				p, err := Solve(pr, algo, Options{})
				require.NoError(t, err)
				require.NoError(t, ValidatePlan(pr, p))
				// The golden plan decodes to the same plan, and the
				// simulator agrees with it.
				q := goldenPlan(t, p, filepath.Join("testdata", "exchange", name+"."+string(algo)+".plan.json"))
				s, err := SimulatePlan(pr, q)
				require.NoError(t, err)
				require.Equal(t, q.Predicted, s.Predicted)
			})
		}
	}
}
