package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench/live"
	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/internal/roottest"
)

// needLab skips unless HETCOMM_ROOT_TESTS=1 asks for the tests that build
// network namespaces (and fails if it does but this is not root with
// netlab's tools installed).
func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("short mode: the netlab tests build network namespaces and probe shaped links")
	}
	roottest.Require(t, "netlab: builds network namespaces", netlab.Tools...)
}

// labAddrs returns every host's address on its NIC nic, in host order.
func labAddrs(t *testing.T, lab *netlab.Lab, nic int) []string {
	t.Helper()
	var addrs []string
	for _, h := range lab.Hosts() {
		a, err := lab.Addr(h, nic)
		require.NoError(t, err)
		addrs = append(addrs, a)
	}
	return addrs
}

// upLab brings a shipped topology up under a test-specific name and
// registers its teardown.
func upLab(t *testing.T, file string) *netlab.Lab {
	t.Helper()
	topo, err := netlab.Load(filepath.Join(repoRoot(), "bench", "topologies", file))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("e%d-%s", os.Getpid()%100000, strings.TrimSuffix(file, ".json"))
	if len(name) > 20 {
		name = name[:20]
	}
	lab, err := netlab.Up(ctx, topo, netlab.Config{Name: name, Recreate: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, lab.Down(ctx))
	})
	return lab
}

// TestProbeNetlab probes every shipped topology over its kernel-shaped
// links and compares the model with the shaping (live.CheckModel): each
// ordered pair's probed rate with the rate the shaping allows (min of the
// sender's out-rate, the receiver's in-rate and, across clusters, the
// backbone; TCP carries about 95.5% of it), and the segments with the
// backbones: one per backbone, between the hosts on either side of it,
// and none where there is no backbone (also over both NICs of dualnic4 as
// rails: the segment probe once took the rails' even split, before their
// costs were known, for a backbone). racks32 (32 namespaces, four racks
// behind 2:1 oversubscribed uplinks) is the issue 15 probe.
//
// The target is every rate within 10%. On an idle machine the probe meets
// it, but on a busy one a starved rank sends or receives late and a rate
// comes out low, so the target is a benchmark number (hetbench probe
// -check, in the README), like the probe's time, which is logged here.
// What the test requires of the best of up to three probes is what load
// cannot explain: the segments where the backbones are and nowhere else,
// and every rate within loadSlack of the shaping. A wrong inference (a
// pair through the wrong NIC, an uplink cap missing or applied where it
// does not belong) is off by more.
func TestProbeNetlab(t *testing.T) {
	needLab(t)
	const loadSlack = 2.5
	hetbench := filepath.Join(binaries(t), "hetbench")
	for _, topo := range []struct {
		file  string
		nic   int  // which NIC's addresses to run on
		rails bool // every bridge's subnet a rail: only the segments are checked
	}{{"switch8.json", 0, false}, {"dualnic4.json", 1, false}, {"dualnic4.json", 1, true}, {"twoclusters.json", 0, false}, {"racks32.json", 0, false}} {
		name := topo.file
		if topo.rails {
			name += "+rails"
		}
		t.Run(name, func(t *testing.T) {
			lab := upLab(t, topo.file)
			hosts := labAddrs(t, lab, topo.nic)
			args := []string{"probe", "-n", fmt.Sprint(len(hosts)), "--hosts", strings.Join(hosts, ","), "--rsh", lab.AgentPath()}
			if topo.rails {
				var nets []string
				for _, b := range lab.Topology.Bridges {
					nets = append(nets, b.Subnet)
				}
				args = append(args, "-rails", strings.Join(nets, ","))
			} else {
				args = append(args, "-rails-auto", "off") // one NIC: the pair rates are checked
			}
			var best *live.ModelCheck
			bestOff := math.Inf(1)
			for attempt := 1; attempt <= 3; attempt++ {
				model := filepath.Join(t.TempDir(), "model.json")
				r := run(t, 3*time.Minute, []string{"HETCOMM_CACHE_DIR=" + t.TempDir()}, hetbench, append(args, "-out", model)...)
				if r.code != 0 && attempt < 3 {
					// A loaded machine can fail a start of 32 ranks (a rank
					// still dialing its peers when the first ones call it
					// silent): start again.
					t.Logf("attempt %d: hetbench probe failed (exit %d): %s", attempt, r.code, firstLine(r.stderr))
					continue
				}
				require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				mf, err := live.ReadModelFile(model)
				require.NoError(t, err)
				require.Equal(t, lab.Hosts(), mf.Hosts, "the ranks run on the hosts in order")
				c := live.CheckModel(lab.Topology, mf.Hosts, topo.nic, !topo.rails, mf.Bandwidth, mf.Segments)
				var report strings.Builder
				c.Report(&report)
				t.Logf("attempt %d: probe of %d ranks took %.2f s\n%s", attempt, len(hosts), mf.Seconds, report.String())
				off := math.Inf(1)
				if len(c.Problems) == 0 {
					off = 1
					if w, ok := c.Worst(); ok {
						off = w.Off()
					}
				}
				if off < bestOff || best == nil {
					best, bestOff = &c, off
				}
				if c.Within(1.1) {
					break
				}
			}
			require.NotNil(t, best, "no probe ran")
			require.Empty(t, best.Problems, "the segments do not match the backbones")
			require.Empty(t, best.Outside(loadSlack), "probed rates more than %.1fx off the shaping in the best of the probes", loadSlack)
			if !best.Within(1.1) {
				t.Logf("the 10%% target was missed (worst %.2fx off): a benchmark number, see hetbench probe -check", bestOff)
			}
		})
	}
}

// firstLine is the first line of s that hetbench itself wrote (the
// ranks' warnings come first), else its first line.
func firstLine(s string) string {
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "hetbench") {
			return l
		}
	}
	return lines[0]
}
