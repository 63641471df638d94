package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
)

// TestSimQuickOutDir: a quick run without -out writes under
// bench/results/quick, so it never overwrites a full run's results.
func TestSimQuickOutDir(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	require.Equal(t, bench.ExitOK, SimCommand([]string{"-quick", "-trials", "1", "redistribute"}, &out, &errb), errb.String())
	_, err := os.Stat(filepath.Join("bench", "results", "quick", "redistribute"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join("bench", "results", "redistribute"))
	require.True(t, os.IsNotExist(err), "a quick run wrote where a full run's results go")
}

func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "multicast", 4)
	p.start = p.start.Add(-2 * time.Second)
	p.last = p.last.Add(-2 * time.Second)
	p.Step(1)
	line := b.String()
	require.Contains(t, line, "multicast: 1/4 (25%)")
	require.Contains(t, line, "elapsed")
	require.Contains(t, line, "left", "an estimate of the time left")
	p.Step(3)
	last := strings.TrimSpace(b.String()[len(line):])
	require.Contains(t, last, "4/4 (100%)")
	require.NotContains(t, last, "left")
}
