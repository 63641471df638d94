package live

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
)

func TestTimingDiagram(t *testing.T) {
	m := &collective.Model{Latency: [][]float64{{0, 0.01, 0.02}, {0.01, 0, 0.01}, {0.02, 0.01, 0}}, Bandwidth: [][]float64{{0, 1e6, 2e6}, {1e6, 0, 5e5}, {2e6, 5e5, 0}}}
	x := &collective.Exchange{Bytes: [][]int64{{0, 100000, 300000}, {200000, 0, 50000}, {10000, 400000, 0}}}
	p, err := collective.PlanExchange(m, x, collective.OpenShop, collective.Options{})
	require.NoError(t, err)
	meas := *p
	meas.Transfers = append([]collective.Transfer(nil), p.Transfers...)
	for i := range meas.Transfers {
		meas.Transfers[i].End *= 1.1
	}
	file := filepath.Join(t.TempDir(), "d.png")
	require.NoError(t, TimingDiagram(p, &meas, file))
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(5000))
	require.Error(t, TimingDiagram(nil, nil, file))
}
