package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench/live"
)

// TestRefreshNetlab: the network changes under a running job. Four ranks
// on the dual-NIC topology's 50 Mbit/s NICs probe their links at start-up
// and then idle with the background refresher on; after a while host 1's
// NIC is re-shaped to send at 20 Mbit/s. The refresher measures the idle
// links again, and every rank's model learns host 1's new rate (within
// 1.5x: load only makes a link read slower), leaving the other links
// alone (within 2.5x of their shaping, what TestProbeNetlab holds a probe
// on a busy machine to). The job
// runs on for a few seconds after the links moved, so the test checks
// where the model settles, not only the first proposal.
func TestRefreshNetlab(t *testing.T) {
	needLab(t)
	lab := upLab(t, "dualnic4.json")
	hosts := labAddrs(t, lab, 0)
	const slowed = 20.0 // Mbit/s
	// The probe of four ranks takes about 2 s; the re-shaping waits
	// well beyond it.
	reshape := time.AfterFunc(12*time.Second, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := lab.SetRateOut(ctx, lab.Hosts()[1], 0, slowed); err != nil {
			t.Errorf("re-shaping host 1: %v", err)
		}
	})
	defer reshape.Stop()
	bin := binaries(t)
	start := time.Now()
	r := run(t, 4*time.Minute, []string{"HETCOMM_CACHE_DIR=" + t.TempDir()}, filepath.Join(bin, "hetrun"),
		"-n", fmt.Sprint(len(hosts)), "--hosts", strings.Join(hosts, ","), "--rsh", lab.AgentPath(), "--rails-auto", "off", "--refresh", "100ms", "--no-prefix",
		filepath.Join(bin, "refreshwatch"), "-src", "1", "-for", "2m")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Greater(t, time.Since(start), 12*time.Second, "the job ended before the network changed")
	var out struct {
		Seconds        float64
		Initial, Final [][]float64
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &out), "stdout:\n%s", r.stdout)
	t.Logf("learned in %.1f s after start-up:\ninitial %v\nfinal   %v", out.Seconds, out.Initial, out.Final)
	require.Positive(t, out.Seconds, "the model never learned host 1's new rate")
	// What a busy machine cannot explain (it only makes links read
	// slower, 2x at worst seen): host 1's links learned their new rate
	// (at most 1.5x above it, where they were 2.5x faster before), and
	// every link is its shaping within 2.5x (TestProbeNetlab holds the
	// probe to that too).
	topo := lab.Topology
	for i := range hosts {
		for j := range hosts {
			if i == j {
				continue
			}
			a, b := topo.Hosts[i].NICs[0], topo.Hosts[j].NICs[0]
			want := min(a.RateOut, b.RateIn) * 1e6 / 8
			got := out.Final[i][j]
			if i == 1 {
				want = min(slowed, b.RateIn) * 1e6 / 8
				require.LessOrEqual(t, got, 1.5*want, "link %d->%d: model %.3g B/s, shaped %.3g B/s", i, j, got, want)
			}
			off := live.RateCheck{Got: got, Want: want}
			require.LessOrEqual(t, off.Off(), 2.5, "link %d->%d: model %.3g B/s, shaped %.3g B/s", i, j, got, want)
		}
	}
}
