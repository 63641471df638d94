package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/internal/roottest"
)

// needRoot skips a test that builds namespaces unless HETCOMM_ROOT_TESTS=1
// (and fails it if that is set but this is not root on Linux with ip, tc,
// nft and unshare installed).
func needRoot(t *testing.T) {
	t.Helper()
	roottest.Require(t, "netlab: builds network namespaces", Tools...)
}

var labSeq int

// testLabName returns a lab name unique to this process and test.
func testLabName() string {
	labSeq++
	return fmt.Sprintf("t%d-%d", os.Getpid(), labSeq)
}

// upLab brings t up under a test-unique name (so that it never meets a
// lab someone else runs) and takes it down when the test ends, whether it
// passed or not.
func upLab(t *testing.T, topo *Topology) *Lab {
	t.Helper()
	cfg := Config{Name: testLabName(), StateDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	l, err := Up(ctx, topo, cfg)
	require.NoError(t, err)
	t.Logf("lab %s (%s) up in %v", l.Name, topo.Name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		start := time.Now()
		require.NoError(t, l.Down(context.Background()))
		t.Logf("lab %s down in %v", l.Name, time.Since(start).Round(time.Millisecond))
		assertGone(t, l)
	})
	return l
}

func loadShipped(t *testing.T, name string) *Topology {
	t.Helper()
	topo, err := Load(filepath.Join("..", "..", "bench", "topologies", name))
	require.NoError(t, err)
	return topo
}

// ipIn runs ip (or tc) with args in namespace ns and returns its output.
func ipIn(t *testing.T, ns string, tool string, args ...string) string {
	t.Helper()
	out, err := run(context.Background(), nil, Command{Args: append([]string{tool, "-n", ns}, args...)})
	require.NoError(t, err)
	return out
}

var ourRootDevice = regexp.MustCompile(`^(h\d+e\d+|bb\d+[ab]|br-[a-z0-9-]+)$`)

// assertGone checks that nothing of the lab is left: no namespace, no
// state, no device or nftables table of ours in the root namespace.
func assertGone(t *testing.T, l *Lab) {
	t.Helper()
	nss, err := namespacesOf(l.Prefix)
	require.NoError(t, err)
	require.Empty(t, nss, "namespaces left behind")
	_, err = os.Stat(l.stateDir())
	require.True(t, errors.Is(err, os.ErrNotExist), "state directory left behind: %v", err)
	links, err := run(context.Background(), nil, Command{Args: []string{"ip", "-o", "link", "show"}})
	require.NoError(t, err)
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			name := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
			require.False(t, ourRootDevice.MatchString(name), "device %s in the root namespace", name)
		}
	}
	tables, err := run(context.Background(), nil, Command{Args: []string{"nft", "list", "tables"}})
	require.NoError(t, err)
	require.NotContains(t, tables, lossTable)
}

// checkRates measures each flow alone, up to three times (a loaded
// machine only ever makes TCP slower), and requires its steady rate to
// lie within 80%-105% of the expected min(out, in, pair, backbone) rate.
func checkRates(t *testing.T, l *Lab, d time.Duration, flows ...flow) {
	t.Helper()
	for _, f := range flows {
		want, err := l.Topology.ExpectedRate(f.from, f.to)
		require.NoError(t, err)
		checkBand(t, fmt.Sprintf("%s -> %s (%s)", f.from, f.to, f.toAddr), want, func() (float64, error) {
			rs, err := measureTCP(t, l, d, f)
			if err != nil {
				return 0, err
			}
			return rs[0], nil
		})
	}
}

func checkBand(t *testing.T, what string, want float64, measure func() (float64, error)) {
	t.Helper()
	const lo, hi = 0.80, 1.05
	var got []float64
	for attempt := range 3 {
		r, err := measure()
		require.NoError(t, err, what)
		got = append(got, r)
		t.Logf("%s: %.2f Mbit/s, %.1f%% of the configured %.2f (attempt %d)", what, r, 100*r/want, want, attempt+1)
		require.LessOrEqual(t, r, hi*want, "%s: faster than the configured rate: shaping does not hold", what)
		if r >= lo*want {
			return
		}
	}
	t.Fatalf("%s: %v Mbit/s, below %.0f%% of the configured %.2f in every attempt", what, got, 100*lo, want)
}

func measureDur() time.Duration {
	if testing.Short() {
		return 2 * time.Second
	}
	return 3 * time.Second
}

// checkAddrs checks that every NIC has its address, that no namespace has
// a default route, and that each NIC routes exactly its subnet plus the
// subnets joined to it by backbones.
func checkAddrs(t *testing.T, l *Lab) {
	t.Helper()
	for i, h := range l.Topology.Hosts {
		ns := HostNamespace(l.Prefix, h.Name)
		addrs := ipIn(t, ns, "ip", "-4", "-o", "addr", "show")
		routes := ipIn(t, ns, "ip", "-4", "route", "show")
		require.NotContains(t, routes, "default", "host %s has a default route", h.Name)
		for n, nic := range h.NICs {
			want := l.r.addrs[i][n].String() + "/24"
			require.Regexp(t, regexp.MustCompile(NICDevice(n)+`\s+inet `+regexp.QuoteMeta(want)), addrs, "host %s", h.Name)
			b := l.r.bridge[nic.Bridge]
			for ob := range l.Topology.Bridges {
				line := l.r.subnets[ob].String() + " dev " + NICDevice(n)
				if l.r.comp[ob] == l.r.comp[b] {
					require.Contains(t, routes, line, "host %s", h.Name)
				} else {
					require.NotContains(t, routes, line, "host %s", h.Name)
				}
			}
		}
		cc, err := run(context.Background(), nil, Command{Args: []string{"ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control"}})
		require.NoError(t, err)
		require.Equal(t, l.r.cc, strings.TrimSpace(cc))
	}
	// The root namespace has none of the lab's addresses.
	rootAddrs, err := run(context.Background(), nil, Command{Args: []string{"ip", "-4", "-o", "addr", "show"}})
	require.NoError(t, err)
	for _, as := range l.r.addrs {
		for _, a := range as {
			require.NotContains(t, rootAddrs, " "+a.String()+"/", "lab address in the root namespace")
		}
	}
}

func TestRootSwitch8(t *testing.T) {
	needRoot(t)
	l := upLab(t, loadShipped(t, "switch8.json"))
	checkAddrs(t, l)
	// The agent, as hetrun calls it: AGENT HOST COMMAND, by address or name.
	for _, host := range []string{"10.77.1.3", "root@h3"} {
		out, err := exec.Command(l.AgentPath(), host, "uname -n; ip -4 -o addr show dev eth0").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.True(t, strings.HasPrefix(string(out), "h3\n"), "%s", out)
		require.Contains(t, string(out), "inet 10.77.1.3/24")
	}
	out, err := exec.Command(l.AgentPath(), "10.77.1.99", "true").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "has no host or address 10.77.1.99")
	flows := []flow{
		{"h3", "h4", "10.77.1.4"}, // 100 out, 50 in: ingress-limited
		{"h4", "h3", "10.77.1.3"}, // the other way: 100
		{"h7", "h1", "10.77.1.1"}, // 20 out: egress-limited
	}
	if !testing.Short() {
		flows = append(flows, flow{"h1", "h2", "10.77.1.2"}) // 200
	}
	checkRates(t, l, measureDur(), flows...)
}

func TestRootDualNIC4(t *testing.T) {
	needRoot(t)
	l := upLab(t, loadShipped(t, "dualnic4.json"))
	checkAddrs(t, l)
	slow, err := l.Addr("n2", 0)
	require.NoError(t, err)
	fast, err := l.Addr("n2", 1)
	require.NoError(t, err)
	require.Equal(t, "10.77.1.2", slow)
	require.Equal(t, "10.77.2.2", fast)
	// Each subnet uses its own NIC, at its own rate.
	checkBand(t, "n1 -> n2 slow NIC", 50, func() (float64, error) {
		rs, err := measureTCP(t, l, measureDur(), flow{"n1", "n2", slow})
		if err != nil {
			return 0, err
		}
		return rs[0], nil
	})
	checkBand(t, "n1 -> n2 fast NIC", 200, func() (float64, error) {
		rs, err := measureTCP(t, l, measureDur(), flow{"n1", "n2", fast})
		if err != nil {
			return 0, err
		}
		return rs[0], nil
	})
	if !testing.Short() {
		// Both NICs at once: the rails add up.
		checkBand(t, "n3 -> n4 both NICs at once", 250, func() (float64, error) {
			rs, err := measureTCP(t, l, measureDur(), flow{"n3", "n4", "10.77.1.4"}, flow{"n3", "n4", "10.77.2.4"})
			if err != nil {
				return 0, err
			}
			return rs[0] + rs[1], nil
		})
	}
}

func TestRootTwoClusters(t *testing.T) {
	needRoot(t)
	l := upLab(t, loadShipped(t, "twoclusters.json"))
	checkAddrs(t, l)
	// One flow inside a cluster and one across: each NIC-limited (100).
	checkRates(t, l, measureDur(), flow{"a1", "a2", "10.77.1.2"}, flow{"a1", "b1", "10.77.2.1"})
	// Three flows across share the 200 Mbit/s backbone (k = 2).
	checkBand(t, "a1,a2,a3 -> b1,b2,b3 across the backbone", 200, func() (float64, error) {
		rs, err := measureTCP(t, l, measureDur(),
			flow{"a1", "b1", "10.77.2.1"}, flow{"a2", "b2", "10.77.2.2"}, flow{"a3", "b3", "10.77.2.3"})
		if err != nil {
			return 0, err
		}
		t.Logf("per flow: %.1f", rs)
		return rs[0] + rs[1] + rs[2], nil
	})
}

func TestRootGUSTO5(t *testing.T) {
	needRoot(t)
	l := upLab(t, loadShipped(t, "gusto5.json"))
	checkAddrs(t, l)
	addr := func(h string) string {
		a, err := l.Addr(h, 0)
		require.NoError(t, err)
		return a
	}
	// Per-pair rates: the paper's kb/s, times rate_scale 10.
	checkRates(t, l, measureDur(), flow{"ames", "usc-isi", addr("usc-isi")}, flow{"ind", "ames", addr("ames")})
	// One sender to two destinations at once: each pair keeps its own rate.
	want := []float64{24.02, 5.12}
	for attempt := 0; ; attempt++ {
		rs, err := measureTCP(t, l, measureDur(), flow{"anl", "ncsa", addr("ncsa")}, flow{"anl", "ames", addr("ames")})
		require.NoError(t, err)
		ok := true
		for i := range rs {
			t.Logf("anl concurrently to %s: %.2f Mbit/s, %.1f%% of %.2f", []string{"ncsa", "ames"}[i], rs[i], 100*rs[i]/want[i], want[i])
			require.LessOrEqual(t, rs[i], 1.05*want[i])
			ok = ok && rs[i] >= 0.8*want[i]
		}
		if ok {
			break
		}
		require.Less(t, attempt, 2, "concurrent pair rates below 80%% of the configured ones in every attempt")
	}
	// The latency matrix is data for user space.
	m := l.Topology.LatencyMatrix()
	require.Equal(t, 4.5, m[1][4]) // ANL-NCSA
	require.Equal(t, 89.5, m[2][0])
}

func TestRootLoss(t *testing.T) {
	needRoot(t)
	const loss = 10.0
	topo, err := ParseBytes([]byte(`{"name": "loss", "congestion_control": "reno", "bridges": [{"name": "lan"}], "hosts": [
		{"name": "a", "nics": [{"bridge": "lan", "rate_out": 100, "rate_in": 100}]},
		{"name": "b", "nics": [{"bridge": "lan", "rate_out": 100, "rate_in": 100, "loss": 10}]}]}`))
	require.NoError(t, err)
	l := upLab(t, topo)
	checkAddrs(t, l) // also checks that reno is set
	rules, err := run(context.Background(), nil, Command{Args: []string{"ip", "netns", "exec", l.SwitchNamespace(), "nft", "list", "ruleset"}})
	require.NoError(t, err)
	require.Contains(t, rules, "numgen random mod 10000 < 1000 drop")
	const n = 3000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recv, out := startHelper(ctx, t, l, "b", "udprecv", "10.77.1.2:16000", "0")
	_, err = readField(out, "ready")
	require.NoError(t, err)
	send, _ := startHelper(ctx, t, l, "a", "udpsend", "10.77.1.2:16000", strconv.Itoa(n))
	require.NoError(t, send.Wait())
	v, err := readField(out, "received")
	require.NoError(t, err)
	require.NoError(t, recv.Wait())
	got, err := strconv.Atoi(v)
	require.NoError(t, err)
	dropped := 100 * float64(n-got) / n
	t.Logf("loss %.0f%% configured on b: %d of %d datagrams arrived, %.2f%% dropped", loss, got, n, dropped)
	// Binomial: sd = sqrt(n p (1-p)) = 16 datagrams = 0.55%; allow 5 sd.
	require.InDelta(t, loss, dropped, 2.8)
}

func ipNetnsList(t *testing.T) string {
	out, err := run(context.Background(), nil, Command{Args: []string{"ip", "netns", "list"}})
	require.NoError(t, err)
	return out
}

func TestRootTwoLabsAndDown(t *testing.T) {
	needRoot(t)
	topo := loadShipped(t, "switch8.json")
	a := upLab(t, topo)
	b := upLab(t, topo) // same topology, same addresses, another prefix
	require.NotEqual(t, a.Prefix, b.Prefix)

	// Up again under an existing name fails, or recreates it.
	_, err := Up(context.Background(), topo, Config{Name: a.Name, StateDir: a.cfg.StateDir})
	require.ErrorIs(t, err, ErrExists)

	// A process left running in a's namespaces (as after a crash).
	ctx := context.Background()
	sleeper, err := a.Command(ctx, "h3", "sleep", "600")
	require.NoError(t, err)
	require.NoError(t, sleeper.Start())
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	infos, err := List(a.cfg)
	require.NoError(t, err)
	found := false
	for _, li := range infos {
		if li.Prefix == a.Prefix {
			found = true
			require.Len(t, li.Namespaces, 9)
			require.True(t, li.State)
		}
	}
	require.True(t, found, "List does not show lab %s", a.Name)
	require.Eventually(t, func() bool {
		pids, _ := pidsIn([]string{HostNamespace(a.Prefix, "h3")})
		return len(pids) == 1
	}, 10*time.Second, 20*time.Millisecond)

	// Crash: the state is gone; down still finds everything by name.
	require.NoError(t, os.RemoveAll(a.stateDir()))
	require.NoError(t, Down(ctx, a.Name, a.cfg))
	select {
	case err := <-waited:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the lab survived down")
	}
	assertGone(t, a)
	require.NoError(t, Down(ctx, a.Name, a.cfg), "down twice")

	// b is untouched and still carries traffic.
	nss, err := namespacesOf(b.Prefix)
	require.NoError(t, err)
	require.Len(t, nss, 9)
	require.NotContains(t, ipNetnsList(t), a.Prefix+".")
	checkRates(t, b, 2*time.Second, flow{"h7", "h8", "10.77.1.8"})

	// Recreate: b comes back cleanly under the same name.
	b2, err := Up(ctx, topo, Config{Name: b.Name, StateDir: b.cfg.StateDir, Recreate: true})
	require.NoError(t, err)
	require.Equal(t, b.Prefix, b2.Prefix)
	checkAddrs(t, b2)
}

// TestRootUpFailureCleansUp fails a plan half-way and checks that Up's
// error names the command with its stderr and that nothing is left.
func TestRootUpFailureCleansUp(t *testing.T) {
	needRoot(t)
	topo := loadShipped(t, "twoclusters.json")
	cfg := Config{Name: testLabName(), StateDir: t.TempDir()}
	l, err := newLab(topo, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { Down(context.Background(), l.Name, cfg) })
	require.NoError(t, l.writeState())
	cmds := l.r.upCommands(l.Prefix)
	bad := Command{Args: []string{"ip", "-n", l.SwitchNamespace(), "link", "add", "bogus0", "type", "no-such-kind"}}
	cmds = append(cmds[:len(cmds)/2:len(cmds)/2], append([]Command{bad}, cmds[len(cmds)/2:]...)...)
	err = l.apply(context.Background(), cmds)
	require.Error(t, err)
	var ce *CmdError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, bad.Args, ce.Cmd.Args)
	require.Contains(t, err.Error(), "netlab: ip -n "+l.SwitchNamespace()+" link add bogus0 type no-such-kind: exit status")
	t.Logf("error: %v", err)
	assertGone(t, l)

	// An existing namespace of the lab makes Up refuse without Recreate.
	_, err = run(context.Background(), nil, Command{Args: []string{"ip", "netns", "add", HostNamespace(l.Prefix, "a1")}})
	require.NoError(t, err)
	_, err = Up(context.Background(), topo, cfg)
	require.ErrorIs(t, err, ErrExists)
	require.NoError(t, Down(context.Background(), l.Name, cfg))
	assertGone(t, l)
}

// TestRootHetrunSwitch8 runs the brief's end-to-end check: hetrun starts 8
// ranks of examples/alltoallv through the lab's agent, one per host of
// switch8, and rank 0's coordinator is reached inside the lab.
func TestRootHetrunSwitch8(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("netlab: builds hetrun and an example; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("netlab: go not in PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	l := upLab(t, loadShipped(t, "switch8.json"))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", filepath.Join(dir, "hetrun"), "./cmd/hetrun")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "hetrun"), "-n", "8", "--hosts", strings.Join(l.Addrs(), ","),
		"--rsh", l.AgentPath(), "--build-dir", dir, "./examples/alltoallv", "-seed", "1", "-max", "1048576", "-algo", "openshop")
	cmd.Dir = root
	out, err = cmd.CombinedOutput()
	t.Logf("hetrun in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	require.NoError(t, err)
	require.Contains(t, string(out), "[0] alltoallv: OK: 8 ranks")
}
