package collective

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ instead of comparing with them")

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
				got, err := json.MarshalIndent(p, "", "  ")
				require.NoError(t, err)
				got = append(got, '\n')
				golden := filepath.Join("testdata", "exchange", name+"."+string(algo)+".plan.json")
				if *update {
					require.NoError(t, os.WriteFile(golden, got, 0o644))
					return
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "missing golden file: run go test -run TestExchangeGolden -update")
				require.Equal(t, string(want), string(got))
				// The golden plan decodes to the same plan, and the
				// simulator agrees with it.
				var q Plan
				require.NoError(t, json.Unmarshal(want, &q))
				require.Equal(t, *p, q)
				s, err := SimulatePlan(pr, &q)
				require.NoError(t, err)
				require.Equal(t, q.Predicted, s.Predicted)
			})
		}
	}
}
