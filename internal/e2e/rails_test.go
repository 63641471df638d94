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
// own, within 10% of its shaping, and sums them up.
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
			var worst string
			for attempt := 1; attempt <= 2; attempt++ {
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
				worst = railsOff(lab, hosts, v.nics, mf.Bandwidth, [][][]float64{mf.Rails[0].Bandwidth, mf.Rails[1].Bandwidth})
				if worst == "" {
					break
				}
				t.Logf("attempt %d: outside the bounds:%s", attempt, worst)
			}
			require.Empty(t, worst)
		})
	}
}

// railsOff compares the probed rates of each rail (on NIC nics[k]) with
// the shaping, and the pair rates with the rails' sum: "" when they agree.
func railsOff(lab *netlab.Lab, hosts []string, nics []int, both [][]float64, rails [][][]float64) string {
	worst := ""
	topo := lab.Topology
	for i := range hosts {
		for j := range hosts {
			if i == j {
				continue
			}
			sum := 0.0
			for k, rail := range rails {
				nic := nics[k]
				a, b := topo.Hosts[i].NICs[nic], topo.Hosts[j].NICs[nic]
				want := min(a.RateOut, b.RateIn) * 1e6 / 8
				sum += want
				if got := rail[i][j]; got < 0.9*want || got > 1.1*want {
					worst += fmt.Sprintf(" rail %d (NIC %d) %d->%d: probed %.3g B/s, shaped %.3g B/s;", k, nic, i, j, got, want)
				}
			}
			if got := both[i][j]; got < 0.85*sum || got > 1.1*sum {
				worst += fmt.Sprintf(" both rails %d->%d: %.3g B/s, the rails' sum %.3g B/s;", i, j, got, sum)
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
