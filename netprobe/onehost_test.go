package netprobe_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/worldtest"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
	"github.com/stretchr/testify/require"
)

// TestProbeOneHost: more than eight ranks on one host measure one pair,
// not every one, and every pair gets what it found.
func TestProbeOneHost(t *testing.T) {
	const n = 10
	const rate, delay = 10e6, time.Millisecond
	netw := transport.NewMemNetwork(9)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				require.NoError(t, netw.SetShape(i, j, transport.ShapeConfig{Rate: rate, Delay: delay}))
			}
		}
	}
	hosts := make([]string, n)
	for r := range hosts {
		hosts[r] = "one-host"
	}
	comms := worldtest.Start(t, n, netw, func(_ int, c *comm.Config) {
		c.Bootstrap.Job, c.Bootstrap.Timeout = t.Name(), time.Minute
		c.Probe, c.CacheDir = netprobe.ModeFull, t.TempDir()
		c.ProbeConfig.Hosts = hosts
	})
	every := func(res *netprobe.Result, m *collective.Model) {
		require.Empty(t, res.Flows, "no flow step")
		require.Empty(t, res.Pairs, "no tournament")
		require.Empty(t, res.Cuts, "no cut splits a host")
		for r, off := range res.Offsets {
			require.Zero(t, off, "rank %d: one clock", r)
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					require.Equal(t, m.Bandwidth[0][1], m.Bandwidth[i][j], "%d->%d like every pair", i, j)
					require.Equal(t, m.Latency[0][1], m.Latency[i][j], "%d->%d like every pair", i, j)
				}
			}
		}
	}
	requireProbed(t, comms, every, func(_ *netprobe.Result, m *collective.Model) map[string]bound {
		b, l := m.Bandwidth[0][1], m.Latency[0][1]
		return map[string]bound{
			"rate":    {math.Abs(b-rate) <= tolerance()*rate, fmt.Sprintf("probed %.3g, shaped %.3g", b, rate)},
			"latency": {math.Abs(l-delay.Seconds()) <= 0.2*delay.Seconds()+1e-3, fmt.Sprintf("probed %.3g s", l)},
		}
	})
}
