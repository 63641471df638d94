package sim

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
)

// TestPlanStdinDevice: with no -in, a terminal (or any device) on
// standard input is a usage error at once, not a silent wait.
func TestPlanStdinDevice(t *testing.T) {
	dev, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer dev.Close()
	old := os.Stdin
	os.Stdin = dev
	defer func() { os.Stdin = old }()
	var stdout, stderr bytes.Buffer
	require.Equal(t, bench.ExitUsage, PlanCommand(nil, &stdout, &stderr))
	require.Contains(t, stderr.String(), "standard input is a terminal or a device")
}
