package netlab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const twoHosts = `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [
	{"name": "a", "nics": [{"bridge": "lan", "rate_out": 100, "rate_in": 50}]},
	{"name": "b", "nics": [{"bridge": "lan", "rate_out": 20, "rate_in": 40}]}]}`

func TestParseErrors(t *testing.T) {
	host := func(nics string) string {
		return `{"name": "x", "bridges": [{"name": "lan"}, {"name": "wan"}], "hosts": [{"name": "a", "nics": [` + nics + `]}]}`
	}
	many := `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [`
	for i := range 255 {
		if i > 0 {
			many += ","
		}
		many += `{"name": "h` + strings.Repeat("x", i%3) + itoa(i) + `", "nics": [{"bridge": "lan", "rate_out": 1, "rate_in": 1}]}`
	}
	many += `]}`
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "netlab: topology: unexpected EOF"},
		{"unknown field", `{"name": "x", "colour": 1}`, `unknown field "colour"`},
		{"trailing", twoHosts + `{}`, "trailing data"},
		{"no name", `{"bridges": [{"name": "lan"}]}`, `name "": want 1-20`},
		{"bad name", `{"name": "Lab.1"}`, `name "Lab.1"`},
		{"no bridges", `{"name": "x", "hosts": []}`, "no bridges"},
		{"duplicate bridge", `{"name": "x", "bridges": [{"name": "lan"}, {"name": "lan"}]}`, `bridges[1]: duplicate bridge name "lan"`},
		{"long bridge name", `{"name": "x", "bridges": [{"name": "abcdefghijklm"}]}`, `want 1-12`},
		{"bridge subnet not /24", `{"name": "x", "bridges": [{"name": "lan", "subnet": "10.1.0.0/16"}]}`, `subnet "10.1.0.0/16": want a /24`},
		{"bridge subnet public", `{"name": "x", "bridges": [{"name": "lan", "subnet": "192.168.1.0/24"}]}`, `inside 10.0.0.0/8`},
		{"same subnet", `{"name": "x", "bridges": [{"name": "a"}, {"name": "b", "subnet": "10.77.1.0/24"}]}`, `subnet 10.77.1.0/24 is also bridge "a"'s`},
		{"lab subnet", `{"name": "x", "subnet": "172.16.0.0/16", "bridges": [{"name": "a"}]}`, `subnet "172.16.0.0/16"`},
		{"no hosts", `{"name": "x", "bridges": [{"name": "a"}]}`, "no hosts"},
		{"cubic", `{"name": "x", "congestion_control": "cubic", "bridges": [{"name": "a"}]}`, `congestion_control "cubic": want bbr or reno`},
		{"negative scale", `{"name": "x", "rate_scale": -1, "bridges": [{"name": "a"}]}`, `rate_scale -1`},
		{"tiny queue", `{"name": "x", "queues": {"nic_bytes": 100}, "bridges": [{"name": "a"}]}`, `queues`},
		{"unknown bridge", host(`{"bridge": "nope", "rate_out": 1, "rate_in": 1}`), `host "a" nics[0]: unknown bridge "nope"`},
		{"missing bridge", host(`{"rate_out": 1, "rate_in": 1}`), `host "a" nics[0]: missing bridge`},
		{"missing rate_out", host(`{"bridge": "lan", "rate_in": 1}`), `host "a" nics[0] rate_out: missing rate`},
		{"missing rate_in", host(`{"bridge": "lan", "rate_out": 1}`), `host "a" nics[0] rate_in: missing rate`},
		{"negative rate", host(`{"bridge": "lan", "rate_out": -5, "rate_in": 1}`), `rate -5 must be positive`},
		{"huge rate", host(`{"bridge": "lan", "rate_out": 1e9, "rate_in": 1}`), `exceeds 100000`},
		{"loss", host(`{"bridge": "lan", "rate_out": 1, "rate_in": 1, "loss": 101}`), `loss 101`},
		{"two nics one bridge", host(`{"bridge": "lan", "rate_out": 1, "rate_in": 1}, {"bridge": "lan", "rate_out": 1, "rate_in": 1}`), `a second NIC on bridge "lan"`},
		{"addr outside", host(`{"bridge": "lan", "rate_out": 1, "rate_in": 1, "addr": "10.77.2.1"}`), `addr "10.77.2.1": want an IPv4 address in bridge "lan"'s subnet 10.77.1.0/24`},
		{"addr .0", host(`{"bridge": "lan", "rate_out": 1, "rate_in": 1, "addr": "10.77.1.0"}`), `.0 and .255 are not host addresses`},
		{"no nics", `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [{"name": "a"}]}`, `host "a": no nics`},
		{"duplicate host", `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [
			{"name": "a", "nics": [{"bridge": "lan", "rate_out": 1, "rate_in": 1}]},
			{"name": "a", "nics": [{"bridge": "lan", "rate_out": 1, "rate_in": 1}]}]}`, `hosts[1]: duplicate host name "a"`},
		{"bad host name", `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [{"name": "a.b"}]}`, `name "a.b"`},
		{"duplicate addr", `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [
			{"name": "a", "nics": [{"bridge": "lan", "rate_out": 1, "rate_in": 1, "addr": "10.77.1.9"}]},
			{"name": "b", "nics": [{"bridge": "lan", "rate_out": 1, "rate_in": 1, "addr": "10.77.1.9"}]}]}`, `addr 10.77.1.9 is also a's`},
		{"too many hosts", many, `bridge "lan": too many hosts for a /24`},
		{"backbone unknown", `{"name": "x", "bridges": [{"name": "a"}], "backbones": [{"a": "a", "b": "z", "rate": 1}]}`, `backbones[0] (a-z): unknown bridge "z"`},
		{"backbone self", `{"name": "x", "bridges": [{"name": "a"}], "backbones": [{"a": "a", "b": "a", "rate": 1}]}`, `joins bridge "a" to itself`},
		{"backbone rate", `{"name": "x", "bridges": [{"name": "a"}, {"name": "b"}], "backbones": [{"a": "a", "b": "b"}]}`, `backbones[0] (a-b): missing rate`},
		{"backbone loop", `{"name": "x", "bridges": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "backbones": [
			{"a": "a", "b": "b", "rate": 1}, {"a": "b", "b": "c", "rate": 1}, {"a": "c", "b": "a", "rate": 1}]}`, `must not form a loop`},
		{"nics on joined bridges", `{"name": "x", "bridges": [{"name": "a"}, {"name": "b"}], "backbones": [{"a": "a", "b": "b", "rate": 1}],
			"hosts": [{"name": "h", "nics": [{"bridge": "a", "rate_out": 1, "rate_in": 1}, {"bridge": "b", "rate_out": 1, "rate_in": 1}]}]}`, `bridges "a" and "b" are joined by backbones`},
		{"pair unknown", strings.TrimSuffix(twoHosts, "}") + `, "pairs": [{"a": "a", "b": "c", "rate": 1}]}`, `pairs[0] (a-c): unknown host "c"`},
		{"pair self", strings.TrimSuffix(twoHosts, "}") + `, "pairs": [{"a": "a", "b": "a", "rate": 1}]}`, `a host paired with itself`},
		{"pair duplicate", strings.TrimSuffix(twoHosts, "}") + `, "pairs": [{"a": "a", "b": "b", "rate": 1}, {"a": "b", "b": "a", "rate": 2}]}`, `pairs[1] (b-a): duplicate pair`},
		{"pair rate_ba alone", strings.TrimSuffix(twoHosts, "}") + `, "pairs": [{"a": "a", "b": "b", "rate_ba": 1}]}`, `rate_ba without rate`},
		{"pair latency", strings.TrimSuffix(twoHosts, "}") + `, "pairs": [{"a": "a", "b": "b", "latency_ms": -1}]}`, `latency_ms -1`},
		{"pair no network", `{"name": "x", "bridges": [{"name": "p"}, {"name": "q"}], "hosts": [
			{"name": "a", "nics": [{"bridge": "p", "rate_out": 1, "rate_in": 1}]},
			{"name": "b", "nics": [{"bridge": "q", "rate_out": 1, "rate_in": 1}]}], "pairs": [{"a": "a", "b": "b", "rate": 1}]}`, `share no network`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBytes([]byte(tc.json))
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "netlab: "), "error %q lacks the package prefix", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

func TestAddresses(t *testing.T) {
	topo, err := ParseBytes([]byte(`{"name": "x", "subnet": "10.9.0.0/16", "bridges": [{"name": "p"}, {"name": "q", "subnet": "10.1.2.0/24"}],
		"hosts": [
			{"name": "a", "nics": [{"bridge": "p", "rate_out": 1, "rate_in": 1, "addr": "10.9.1.1"}]},
			{"name": "b", "nics": [{"bridge": "p", "rate_out": 1, "rate_in": 1}, {"bridge": "q", "rate_out": 1, "rate_in": 1}]},
			{"name": "c", "nics": [{"bridge": "q", "rate_out": 1, "rate_in": 1, "addr": "10.1.2.200"}, {"bridge": "p", "rate_out": 1, "rate_in": 1}]}]}`))
	require.NoError(t, err)
	got, err := topo.HostAddrs()
	require.NoError(t, err)
	require.Equal(t, map[string][]string{
		"a": {"10.9.1.1"},
		"b": {"10.9.1.2", "10.1.2.1"},
		"c": {"10.1.2.200", "10.9.1.3"},
	}, got)
	a, err := topo.Addr("c", 1)
	require.NoError(t, err)
	require.Equal(t, "10.9.1.3", a)
	_, err = topo.Addr("c", 2)
	require.ErrorContains(t, err, `host "c" has no nic 2`)
	_, err = topo.Addr("z", 0)
	require.ErrorContains(t, err, `unknown host "z"`)
}

func TestExpectedRate(t *testing.T) {
	topo, err := ParseBytes([]byte(`{"name": "x", "rate_scale": 2, "bridges": [{"name": "e"}, {"name": "w"}, {"name": "s"}],
		"backbones": [{"a": "e", "b": "w", "rate": 30}],
		"hosts": [
			{"name": "a", "nics": [{"bridge": "e", "rate_out": 100, "rate_in": 50}]},
			{"name": "b", "nics": [{"bridge": "e", "rate_out": 20, "rate_in": 40}, {"bridge": "s", "rate_out": 70, "rate_in": 70}]},
			{"name": "c", "nics": [{"bridge": "w", "rate_out": 100, "rate_in": 100}]},
			{"name": "d", "nics": [{"bridge": "s", "rate_out": 100, "rate_in": 100}]}],
		"pairs": [{"a": "a", "b": "c", "rate": 10, "rate_ba": 5}, {"a": "b", "b": "d", "latency_ms": 3}]}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		from, to string
		want     float64
	}{
		{"a", "b", 80},  // a out 100, b in 40 (x2)
		{"b", "a", 40},  // b out 20
		{"a", "c", 20},  // pair 10
		{"c", "a", 10},  // pair rate_ba 5
		{"b", "c", 40},  // b out 20 (backbone 30 is more)
		{"c", "b", 60},  // backbone 30 (x2) below b in 40 (x2)
		{"b", "d", 140}, // over the second NIC
		{"a", "d", 0},   // no common network
	} {
		got, err := topo.ExpectedRate(tc.from, tc.to)
		require.NoError(t, err)
		require.InDelta(t, tc.want, got, 1e-9, "%s -> %s", tc.from, tc.to)
	}
	m := topo.LatencyMatrix()
	require.Equal(t, 3.0, m[1][3])
	require.Equal(t, 3.0, m[3][1])
	require.Equal(t, 0.0, m[0][2])
}

func TestShippedTopologies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "bench", "topologies", "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			topo, err := Load(f)
			require.NoError(t, err)
			require.Equal(t, strings.TrimSuffix(filepath.Base(f), ".json"), topo.Name)
			cmds, err := topo.UpCommands(Prefix(topo.Name))
			require.NoError(t, err)
			require.NotEmpty(t, cmds)
			// Nothing may run outside the lab's namespaces: every ip and tc
			// command names one (ip -n / ip netns), and no default route.
			for _, c := range cmds {
				line := c.String()
				switch c.Args[0] {
				case "ip":
					if c.Args[1] == "netns" {
						require.True(t, strings.HasPrefix(c.Args[3], Prefix(topo.Name)), line)
					} else {
						require.Equal(t, "-n", c.Args[1], line)
						require.True(t, strings.HasPrefix(c.Args[2], Prefix(topo.Name)), line)
					}
				case "tc":
					require.Equal(t, "-n", c.Args[1], line)
					require.True(t, strings.HasPrefix(c.Args[2], Prefix(topo.Name)), line)
				default:
					t.Fatalf("unexpected command %s", line)
				}
				require.NotContains(t, line, "default via", line)
			}
		})
	}
	// The shipped rates.
	s8, err := Load(filepath.Join("..", "..", "bench", "topologies", "switch8.json"))
	require.NoError(t, err)
	require.Len(t, s8.Hosts, 8)
	asym := 0
	for _, h := range s8.Hosts {
		require.GreaterOrEqual(t, h.NICs[0].RateOut, 20.0)
		require.LessOrEqual(t, h.NICs[0].RateIn, 400.0)
		if h.NICs[0].RateOut != h.NICs[0].RateIn {
			asym++
		}
	}
	require.GreaterOrEqual(t, asym, 2)
	g, err := Load(filepath.Join("..", "..", "bench", "topologies", "gusto5.json"))
	require.NoError(t, err)
	// Table 2: USC-ISI - NCSA 4976 kb/s, AMES - IND 246 kb/s; x10.
	r, err := g.ExpectedRate("usc-isi", "ncsa")
	require.NoError(t, err)
	require.InDelta(t, 49.76, r, 1e-9)
	r, err = g.ExpectedRate("ind", "ames")
	require.NoError(t, err)
	require.InDelta(t, 2.46, r, 1e-9)
	require.Equal(t, 89.5, g.LatencyMatrix()[0][2])
	tc, err := Load(filepath.Join("..", "..", "bench", "topologies", "twoclusters.json"))
	require.NoError(t, err)
	r, err = tc.ExpectedRate("a1", "b4")
	require.NoError(t, err)
	require.Equal(t, 100.0, r)
	require.Equal(t, 2.0, tc.Backbones[0].Rate/tc.Hosts[0].NICs[0].RateOut, "k = 2")
}

func TestUpCommands(t *testing.T) {
	topo, err := ParseBytes([]byte(`{"name": "x", "congestion_control": "reno", "bridges": [{"name": "e"}, {"name": "w"}],
		"backbones": [{"a": "e", "b": "w", "rate": 200}],
		"hosts": [
			{"name": "a", "nics": [{"bridge": "e", "rate_out": 400, "rate_in": 20, "loss": 2.5}]},
			{"name": "b", "nics": [{"bridge": "w", "rate_out": 10, "rate_in": 10}]}],
		"pairs": [{"a": "a", "b": "b", "rate": 5}]}`))
	require.NoError(t, err)
	_, err = topo.UpCommands("lab-x")
	require.ErrorContains(t, err, `prefix "lab-x"`)
	cmds, err := topo.UpCommands("nl-x")
	require.NoError(t, err)
	var lines []string
	for _, c := range cmds {
		lines = append(lines, c.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"ip netns add nl-x_sw",
		"ip -n nl-x_sw link add br-e type bridge stp_state 0 mcast_snooping 0",
		// backbone: shaped both ways, port queue max(1 MiB, 100 ms) = 2.5 MB at 200 Mbit/s
		"ip -n nl-x_sw link add bb0a type veth peer name bb0b",
		"ip -n nl-x_sw link set bb0a master br-e",
		"ip -n nl-x_sw link set bb0b master br-w",
		// (htb: acknowledgements first, then the rest, sharing the rate)
		"tc -n nl-x_sw qdisc add dev bb0a root handle 1: htb default 20",
		"tc -n nl-x_sw class add dev bb0a parent 1: classid 1:1 htb rate 200000000bit ceil 200000000bit burst 50000 cburst 50000 quantum 25000",
		"tc -n nl-x_sw class add dev bb0a parent 1:1 classid 1:10 htb rate 20000000bit ceil 200000000bit burst 50000 cburst 50000 quantum 25000 prio 0",
		"tc -n nl-x_sw class add dev bb0a parent 1:1 classid 1:20 htb rate 180000000bit ceil 200000000bit burst 50000 cburst 50000 quantum 25000 prio 1",
		"tc -n nl-x_sw qdisc add dev bb0a parent 1:20 handle 20: bfifo limit 2500000",
		"tc -n nl-x_sw filter add dev bb0a parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match u16 0x0000 0xff80 at 2 flowid 1:10",
		"tc -n nl-x_sw qdisc add dev bb0b root handle 1: htb default 20",
		"ip netns add nl-x.a",
		"echo reno > /proc/sys/net/ipv4/tcp_congestion_control",
		"ip -n nl-x_sw link add h0e0 type veth peer name eth0 netns nl-x.a",
		"ip -n nl-x.a addr add 10.77.1.1/24 dev eth0",
		"ip -n nl-x.a route add 10.77.2.0/24 dev eth0",
		"ip -n nl-x.b route add 10.77.1.0/24 dev eth0",
		// a's egress: htb with an acknowledgement class and a 5 Mbit/s class
		// for b; ingress 20 Mbit/s with a 1 MiB queue
		"tc -n nl-x.a qdisc add dev eth0 root handle 1: htb default 2",
		"tc -n nl-x.a class add dev eth0 parent 1: classid 1:1 htb rate 400000000bit ceil 400000000bit burst 100000 cburst 100000 quantum 50000",
		"tc -n nl-x.a class add dev eth0 parent 1:1 classid 1:3 htb rate 39506173bit ceil 400000000bit burst 100000 cburst 100000 quantum 50000 prio 0",
		"tc -n nl-x.a filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match u16 0x0000 0xff80 at 2 flowid 1:3",
		"tc -n nl-x.a class add dev eth0 parent 1:1 classid 1:11 htb rate 4938272bit ceil 5000000bit burst 16000 cburst 16000 quantum 1514 prio 1",
		"tc -n nl-x.a qdisc add dev eth0 parent 1:11 handle 11: bfifo limit 4194304",
		"tc -n nl-x.a filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.77.2.1/32 flowid 1:11",
		"tc -n nl-x_sw qdisc add dev h0e0 root handle 1: htb default 20",
		"tc -n nl-x_sw class add dev h0e0 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 16000 cburst 16000 quantum 2500",
		"tc -n nl-x_sw qdisc add dev h0e0 parent 1:20 handle 20: bfifo limit 1048576",
		// b: the pair is symmetric, so b's egress also has a class for a
		"tc -n nl-x.b class add dev eth0 parent 1:1 classid 1:10 htb rate 3333333bit ceil 5000000bit",
		"tc -n nl-x.b filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.77.1.1/32 flowid 1:10",
		// loss on a's port, both directions, 0.01 % resolution
		"ip netns exec nl-x_sw nft -f - <<'EOF'\ntable bridge netlab_loss {",
		`iifname "h0e0" ether type ip numgen random mod 10000 < 250 drop`,
		`oifname "h0e0" ether type ip numgen random mod 10000 < 250 drop`,
	} {
		require.Contains(t, all, want)
	}
	require.NotContains(t, all, "route add default")
	// The switch namespace comes first; loss comes last.
	require.Equal(t, "ip netns add nl-x_sw", lines[0])
	require.Contains(t, lines[len(lines)-1], "nft -f -")

	// Without pairs or loss: the NIC shaper with a 4 MiB queue, no nft.
	topo2, err := ParseBytes([]byte(twoHosts))
	require.NoError(t, err)
	cmds, err = topo2.UpCommands("nl-y")
	require.NoError(t, err)
	lines = lines[:0]
	for _, c := range cmds {
		lines = append(lines, c.String())
	}
	all = strings.Join(lines, "\n")
	require.Contains(t, all, "tc -n nl-y.a class add dev eth0 parent 1: classid 1:1 htb rate 100000000bit ceil 100000000bit burst 25000 cburst 25000 quantum 12500")
	require.Contains(t, all, "tc -n nl-y.a qdisc add dev eth0 parent 1:20 handle 20: bfifo limit 4194304")
	require.Contains(t, all, "tc -n nl-y_sw class add dev h0e0 parent 1: classid 1:1 htb rate 50000000bit ceil 50000000bit burst 16000 cburst 16000 quantum 6250")
	require.Contains(t, all, "tc -n nl-y_sw qdisc add dev h0e0 parent 1:20 handle 20: bfifo limit 1048576")
	require.Contains(t, all, "echo bbr > /proc/sys/net/ipv4/tcp_congestion_control")
	require.NotContains(t, all, "nft")
	require.NotContains(t, all, " tbf ", "every shaped point is an htb tree with an acknowledgement class")
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ ns, lab string }{
		{"nl-switch8_sw", "nl-switch8"},
		{"nl-switch8.h1", "nl-switch8"},
		{"nl-a-b.c-d", "nl-a-b"},
		{"nl-a.b-c", "nl-a"},
		{"nl-", ""},
		{"nl-x", ""},
		{"other.h1", ""},
		{"nl-X.h1", ""},
		{"nl-.h1", ""},
	} {
		require.Equal(t, tc.lab, labOf(tc.ns), tc.ns)
	}
	require.Equal(t, "nl-lab.h1", HostNamespace(Prefix("lab"), "h1"))
	require.Equal(t, "nl-lab_sw", SwitchNamespace(Prefix("lab")))
	a, b := BackboneDevices(3)
	require.Equal(t, []string{"bb3a", "bb3b", "h12e1", "eth1", "br-lan"}, []string{a, b, PortDevice(12, 1), NICDevice(1), BridgeDevice("lan")})
	// Every device name fits IFNAMSIZ (15 characters).
	require.LessOrEqual(t, len(PortDevice(253, 7)), 15)
	require.LessOrEqual(t, len(BridgeDevice("abcdefghijkl")), 15)

	require.Equal(t, []Command{
		{Args: []string{"ip", "netns", "del", "nl-a.h1"}},
		{Args: []string{"ip", "netns", "del", "nl-a.h2"}},
		{Args: []string{"ip", "netns", "del", "nl-a_sw"}},
	}, downCommands([]string{"nl-a.h1", "nl-a_sw", "nl-a.h2"}))
	require.Equal(t, `sh -c 'echo "$0"' x`, Command{Args: []string{"sh", "-c", `echo "$0"`, "x"}}.String())
}

func TestAgentScriptAndExecArgs(t *testing.T) {
	topo, err := ParseBytes([]byte(twoHosts))
	require.NoError(t, err)
	s := AgentScript("nl-x", topo, "/usr/sbin/ip", "/usr/bin/unshare")
	require.True(t, strings.HasPrefix(s, "#!/bin/sh\n"))
	require.Contains(t, s, "a|10.77.1.1) ns=nl-x.a; name=a; addrs=10.77.1.1 ;;")
	require.Contains(t, s, "b|10.77.1.2) ns=nl-x.b; name=b; addrs=10.77.1.2 ;;")
	require.Contains(t, s, `export NETLAB_LAB=nl-x NETLAB_HOST="$name" NETLAB_ADDRS="$addrs"`)
	require.Contains(t, s, `host=${1##*@}`)
	require.Contains(t, s, `exec /usr/sbin/ip netns exec "$ns" /usr/bin/unshare --uts sh -c`)
	require.Contains(t, s, "--hosts 10.77.1.1,10.77.1.2")

	l, err := newLab(topo, Config{Name: "other"})
	require.NoError(t, err)
	args, err := l.ExecArgs("user@10.77.1.2", "echo", "hi there")
	require.NoError(t, err)
	require.Equal(t, []string{"ip", "netns", "exec", "nl-other.b", "unshare", "--uts", "sh", "-c", hostnameScript, "b", "echo", "hi there"}, args)
	_, err = l.ExecArgs("c", "true")
	require.ErrorIs(t, err, ErrNoLab)
	_, err = l.ExecArgs("a")
	require.ErrorContains(t, err, "no command")
	require.Equal(t, []string{"10.77.1.1", "10.77.1.2"}, l.Addrs())
	require.Equal(t, []string{"a", "b"}, l.Hosts())
	env, err := l.Env("b", func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, []string{"NETLAB_LAB=nl-other", "NETLAB_HOST=b", "NETLAB_ADDRS=10.77.1.2"}, env)
	dual, err := Load(filepath.Join("..", "..", "bench", "topologies", "dualnic4.json"))
	require.NoError(t, err)
	dl, err := newLab(dual, Config{})
	require.NoError(t, err)
	env, err = dl.Env("n3", func(string) string { return "" })
	require.NoError(t, err)
	require.NotContains(t, strings.Join(env, " "), "HETCOMM_RAILS", "rails are opt-in")
	rails := func(k string) string { return map[string]string{"NETLAB_RAILS": "1"}[k] }
	env, err = dl.Env("n3", rails)
	require.NoError(t, err)
	require.Contains(t, env, "HETCOMM_RAILS=10.77.1.3,10.77.2.3")
	env, err = dl.Env("10.77.2.3", rails)
	require.NoError(t, err)
	require.Contains(t, env, "HETCOMM_RAILS=10.77.2.3,10.77.1.3", "the addressed NIC first")
	_, err = newLab(topo, Config{Name: "Bad_Name"})
	require.ErrorContains(t, err, `lab name "Bad_Name"`)
}

func TestOpenMissing(t *testing.T) {
	_, err := Open("nothere", Config{StateDir: t.TempDir()})
	require.ErrorIs(t, err, ErrNoLab)
	_, err = Open("../etc", Config{StateDir: t.TempDir()})
	require.ErrorContains(t, err, "lab name")
	require.Error(t, Down(t.Context(), "../etc", Config{}))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(twoHosts), 0o644))
	topo, err := Load(filepath.Join(dir, "x.json"))
	require.NoError(t, err)
	require.Equal(t, "x", topo.Name)
	_, err = Load(filepath.Join(dir, "missing.json"))
	require.ErrorContains(t, err, "netlab: open")
}
