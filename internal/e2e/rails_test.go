package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench/live"
	"github.com/hetcomm/hetcomm/internal/netlab"
)

// dualNICLab brings up the dual-NIC topology and returns it, the hosts'
// fast-NIC addresses (where the ranks run) and the two rails as networks.
func dualNICLab(t *testing.T) (*netlab.Lab, []string, string) {
	lab := upLab(t, "dualnic4.json")
	hosts := labAddrs(t, lab, 1)
	var rails []string
	for nic := 0; nic < 2; nic++ {
		a, err := lab.Addr(lab.Hosts()[0], nic)
		require.NoError(t, err)
		_, network, err := net.ParseCIDR(a + "/24")
		require.NoError(t, err)
		rails = append(rails, network.String())
	}
	return lab, hosts, strings.Join(rails, ",")
}

// TestRailsProbeNetlab: with both NICs as rails, given (-rails) or found
// by themselves (no flag: the ranks run on the fast NICs and find the
// slow ones' network on every host), the probe measures each rail on its
// own and sums them up. The target is every rail's rate within 10% of its
// shaping and their sum within 1.18x, which an idle machine meets; on a
// busy one a starved rank can miss it, so the test only logs a miss and
// requires of one of up to three probes what load cannot explain: every
// rate within 1.4x (the wrong answers are 1.6x off and more: the rails
// measured at their even split, or swapped).
func TestRailsProbeNetlab(t *testing.T) {
	needLab(t)
	lab, hosts, rails := dualNICLab(t)
	hetbench := filepath.Join(binaries(t), "hetbench")
	for _, v := range []struct {
		name string
		args []string
		nics []int // the NIC of each rail
	}{{"given", []string{"-rails", rails}, []int{0, 1}}, {"found", nil, []int{1, 0}}} {
		t.Run(v.name, func(t *testing.T) {
			const loadSlack = 1.4
			loose := "no probe ran"
			for attempt := 1; attempt <= 3; attempt++ {
				model := filepath.Join(t.TempDir(), "model.json")
				args := append([]string{"probe", "-n", fmt.Sprint(len(hosts)), "--hosts", strings.Join(hosts, ","), "--rsh", lab.AgentPath(), "-out", model}, v.args...)
				r := run(t, 3*time.Minute, []string{"HETCOMM_CACHE_DIR=" + t.TempDir()}, hetbench, args...)
				require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				var mf struct {
					Bandwidth [][]float64 `json:"bandwidth"`
					Rails     []struct {
						Bandwidth [][]float64 `json:"bandwidth"`
					} `json:"rails"`
				}
				b, err := os.ReadFile(model)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &mf))
				require.Len(t, mf.Rails, 2)
				perRail := [][][]float64{mf.Rails[0].Bandwidth, mf.Rails[1].Bandwidth}
				if off := railsOff(lab, hosts, v.nics, mf.Bandwidth, perRail, 1.1, 1.18); off != "" {
					t.Logf("attempt %d: the 10%% target missed (a benchmark number):%s", attempt, off)
				} else {
					loose = ""
					break
				}
				if off := railsOff(lab, hosts, v.nics, mf.Bandwidth, perRail, loadSlack, loadSlack); off == "" {
					loose = ""
				} else if loose != "" {
					loose = off
				}
			}
			require.Empty(t, loose, "every probe more than %.1fx off the shaping", loadSlack)
		})
	}
}

// railsOff compares the probed rates of each rail (on NIC nics[k]) with
// the shaping, and the pair rates with the rails' sum: "" when every rail
// is within a factor rail of its shaping and every pair within a factor
// sum of the rails' sum.
func railsOff(lab *netlab.Lab, hosts []string, nics []int, both [][]float64, rails [][][]float64, rail, sum float64) string {
	worst := ""
	topo := lab.Topology
	for i := range hosts {
		for j := range hosts {
			if i == j {
				continue
			}
			total := 0.0
			for k, probed := range rails {
				nic := nics[k]
				a, b := topo.Hosts[i].NICs[nic], topo.Hosts[j].NICs[nic]
				want := min(a.RateOut, b.RateIn) * 1e6 / 8
				total += want
				if got := probed[i][j]; (live.RateCheck{Got: got, Want: want}).Off() > rail {
					worst += fmt.Sprintf(" rail %d (NIC %d) %d->%d: probed %.3g B/s, shaped %.3g B/s;", k, nic, i, j, got, want)
				}
			}
			if got := both[i][j]; (live.RateCheck{Got: got, Want: total}).Off() > sum {
				worst += fmt.Sprintf(" both rails %d->%d: %.3g B/s, the rails' sum %.3g B/s;", i, j, got, total)
			}
		}
	}
	return worst
}

// TestRailFailureNetlab: one NIC of a dual-NIC host goes down in the
// middle of a run of verified Alltoallv exchanges over both rails; its
// traffic moves to the other rail and the run completes with every byte
// verified.
func TestRailFailureNetlab(t *testing.T) {
	needLab(t)
	lab, hosts, rails := dualNICLab(t)
	bin := binaries(t)
	ns, err := lab.Namespace(lab.Hosts()[1])
	require.NoError(t, err)
	dev := netlab.NICDevice(1)
	down := time.AfterFunc(8*time.Second, func() {
		if out, err := exec.Command("ip", "-n", ns, "link", "set", dev, "down").CombinedOutput(); err != nil {
			t.Errorf("taking %s of %s down: %v %s", dev, ns, err, out)
		}
	})
	defer down.Stop()
	start := time.Now()
	r := run(t, 5*time.Minute, []string{"HETCOMM_CACHE_DIR=" + t.TempDir()}, filepath.Join(bin, "hetrun"),
		"-n", fmt.Sprint(len(hosts)), "--hosts", strings.Join(hosts, ","), "--rsh", lab.AgentPath(), "--rails", rails,
		filepath.Join(bin, "alltoallv"), "-iters", "40", "-max", "4194304")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "alltoallv: OK")
	require.Greater(t, time.Since(start), 9*time.Second, "the run ended before the NIC went down; the test proved nothing")
	t.Logf("%s", strings.TrimSpace(r.stdout))
}
