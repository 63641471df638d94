package collective

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden plans under testdata/ instead of comparing with them")

// goldenPlan compares p's JSON with the golden file (go test -update
// rewrites it; review the diff) and returns the plan the file decodes to,
// which must equal p: plans round-trip through JSON unchanged.
func goldenPlan(t *testing.T, p *Plan, file string) *Plan {
	t.Helper()
	got, err := json.MarshalIndent(p, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "missing golden file (go test -run %s -update writes it)", t.Name())
	require.Equal(t, string(want), string(got), "plan differs from %s", file)
	var q Plan
	require.NoError(t, json.Unmarshal(want, &q))
	require.Equal(t, *p, q, "%s decodes to the plan", file)
	return &q
}
