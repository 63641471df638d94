package netlab

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// Naming. Every namespace of a lab starts with its prefix, "nl-" + the lab
// name: hosts are PREFIX.HOST and the switch namespace, which holds the
// bridges, the switch-side veth ends and the backbones, is PREFIX_sw.
// Neither '.' nor '_' may occur in lab or host names, so two labs never
// share a namespace name. Devices live only inside these namespaces (never
// in the root namespace), so their names need no prefix: a host's NICs are
// eth0, eth1, ...; in the switch namespace, bridge B is br-B, host i's
// NIC n plugs into port h<i>e<n>, and backbone k is the pair bb<k>a (on
// its A bridge) and bb<k>b.
const (
	// NamespacePrefix starts every lab's prefix.
	NamespacePrefix = "nl-"
	switchSuffix    = "_sw"
)

// Prefix returns the namespace prefix of the lab called name.
func Prefix(name string) string { return NamespacePrefix + name }

// SwitchNamespace returns the name of a lab's switch namespace.
func SwitchNamespace(prefix string) string { return prefix + switchSuffix }

// HostNamespace returns the name of a host's namespace.
func HostNamespace(prefix, host string) string { return prefix + "." + host }

// BridgeDevice, PortDevice and BackboneDevices name devices inside the
// switch namespace.
func BridgeDevice(bridge string) string { return "br-" + bridge }

// PortDevice is the switch-side end of host i's nic-th NIC.
func PortDevice(host, nic int) string { return fmt.Sprintf("h%de%d", host, nic) }

// NICDevice is the host-side end of a host's nic-th NIC.
func NICDevice(nic int) string { return fmt.Sprintf("eth%d", nic) }

// BackboneDevices names the two ends of backbone k.
func BackboneDevices(k int) (a, b string) { return fmt.Sprintf("bb%da", k), fmt.Sprintf("bb%db", k) }

// labOf returns the lab prefix of a namespace name, or "" if the name is
// not a netlab namespace.
func labOf(ns string) string {
	if !strings.HasPrefix(ns, NamespacePrefix) {
		return ""
	}
	var p string
	if i := strings.IndexByte(ns, '.'); i > 0 {
		p = ns[:i]
	} else if s, ok := strings.CutSuffix(ns, switchSuffix); ok {
		p = s
	} else {
		return ""
	}
	if !labNameRE.MatchString(strings.TrimPrefix(p, NamespacePrefix)) {
		return ""
	}
	return p
}

// Command is one external command of a plan. Stdin, if not empty, is fed
// to it.
type Command struct {
	Args  []string
	Stdin string
}

// String renders the command as a shell line (with a here-document for
// Stdin).
func (c Command) String() string {
	q := make([]string, len(c.Args))
	for i, a := range c.Args {
		q[i] = shellQuote(a)
	}
	s := strings.Join(q, " ")
	if c.Stdin != "" {
		s += " <<'EOF'\n" + c.Stdin + "EOF"
	}
	return s
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bits renders a rate in Mbit/s as a tc rate in bit/s.
func bits(mbit float64) string {
	return strconv.FormatInt(int64(math.Round(mbit*1e6)), 10) + "bit"
}

// burstBytes is the tbf bucket for a rate in Mbit/s: max(16000 B, 2 ms of
// traffic).
func burstBytes(mbit float64) int {
	return max(MinBurstBytes, int(mbit*1e6/8*BurstMillis/1000))
}

// portQueueBytes is a switch port's queue: max(PortMinBytes, PortMillis of
// traffic at the rate).
func (r *resolved) portQueueBytes(mbit float64) int {
	return max(r.queues.PortMinBytes, int(mbit*1e6/8*r.queues.PortMillis/1000))
}

// shaper shapes dev to mbit Mbit/s with a queue of limit bytes. It is an
// htb tree rather than a plain tbf so that the link behaves like a host
// with a flow-isolating qdisc (fq_codel, Linux's default, which this kernel
// lacks): small TCP packets (IP length < 128 bytes: pure acknowledgements)
// go in a class served first, so the ACKs of a flow coming in are never
// queued behind megabytes of a flow going out on the same NIC. With one
// FIFO, a slow host that sends and receives at once starves its incoming
// flow (measured: -30% at 20 Mbit/s). Both classes are capped at the link's
// rate, which they share.
func shaper(tc []string, dev string, mbit float64, limit int) []Command {
	var cmds []Command
	add := func(args ...string) { cmds = append(cmds, Command{Args: append(append([]string{}, tc...), args...)}) }
	add("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
	cmds = append(cmds, shaperClasses(tc, "add", dev, mbit)...)
	add("qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", "pfifo", "limit", "1000")
	add("qdisc", "add", "dev", dev, "parent", "1:20", "handle", "20:", "bfifo", "limit", strconv.Itoa(limit))
	add(ackFilter(dev, "1:10")...)
	return cmds
}

// shaperClasses adds (verb "add") or re-rates (verb "change") the classes
// of shaper's tree for mbit Mbit/s.
func shaperClasses(tc []string, verb, dev string, mbit float64) []Command {
	var cmds []Command
	add := func(args ...string) { cmds = append(cmds, Command{Args: append(append([]string{}, tc...), args...)}) }
	htbClass(add, verb, dev, "1:", "1:1", mbit, mbit, "")
	htbClass(add, verb, dev, "1:1", "1:10", mbit/10, mbit, "0")
	htbClass(add, verb, dev, "1:1", "1:20", mbit*0.9, mbit, "1")
	return cmds
}

// htbClass adds or changes (verb) an htb class with the burst and quantum
// suited to its ceil, and a priority when prio is not empty.
func htbClass(add func(...string), verb, dev, parent, id string, rate, ceil float64, prio string) {
	b := strconv.Itoa(burstBytes(ceil))
	quantum := strconv.Itoa(min(200000, max(1514, int(ceil*1e6/8/1000))))
	args := []string{"class", verb, "dev", dev, "parent", parent, "classid", id, "htb",
		"rate", bits(rate), "ceil", bits(ceil), "burst", b, "cburst", b, "quantum", quantum}
	if prio != "" {
		args = append(args, "prio", prio)
	}
	add(args...)
}

// ackFilter sends TCP packets shorter than 128 bytes (IP total length) to
// flowid: matched before any other filter (u32 prio 1).
func ackFilter(dev, flowid string) []string {
	return []string{"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
		"u32", "match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000", "0xff80", "at", "2", "flowid", flowid}
}

// hostSetup is the script run in a fresh host or switch namespace: no
// IPv6 (no router solicitations or DAD traffic on the shaped links), the
// congestion control, and nothing else.
func hostSetup(cc string) string {
	s := "set -e; if [ -d /proc/sys/net/ipv6 ]; then echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; fi"
	if cc != "" {
		s += "; echo " + cc + " > /proc/sys/net/ipv4/tcp_congestion_control"
	}
	return s
}

// UpCommands returns the commands that build the lab with the given
// prefix, in order. They touch nothing outside the lab's namespaces: every
// device is created inside one (ip -n), the veths directly with their ends
// in the switch and host namespaces.
func (t *Topology) UpCommands(prefix string) ([]Command, error) {
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	if labOf(SwitchNamespace(prefix)) != prefix {
		return nil, fmt.Errorf("netlab: prefix %q: want %s followed by a lab name", prefix, NamespacePrefix)
	}
	return r.upCommands(prefix), nil
}

func (r *resolved) upCommands(prefix string) []Command {
	t := r.t
	sw := SwitchNamespace(prefix)
	ipSW := []string{"ip", "-n", sw}
	tcSW := []string{"tc", "-n", sw}
	var cmds []Command
	add := func(args ...string) { cmds = append(cmds, Command{Args: args}) }
	cat := func(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }

	add("ip", "netns", "add", sw)
	add("ip", "netns", "exec", sw, "sh", "-c", hostSetup(""))
	add(cat(ipSW, "link", "set", "lo", "up")...)
	for _, b := range t.Bridges {
		add(cat(ipSW, "link", "add", BridgeDevice(b.Name), "type", "bridge", "stp_state", "0", "mcast_snooping", "0")...)
		add(cat(ipSW, "link", "set", BridgeDevice(b.Name), "up")...)
	}
	for k, bb := range t.Backbones {
		da, db := BackboneDevices(k)
		rate := bb.Rate * r.scale
		add(cat(ipSW, "link", "add", da, "type", "veth", "peer", "name", db)...)
		add(cat(ipSW, "link", "set", da, "master", BridgeDevice(bb.A))...)
		add(cat(ipSW, "link", "set", db, "master", BridgeDevice(bb.B))...)
		add(cat(ipSW, "link", "set", da, "up")...)
		add(cat(ipSW, "link", "set", db, "up")...)
		cmds = append(cmds, shaper(tcSW, da, rate, r.portQueueBytes(rate))...)
		cmds = append(cmds, shaper(tcSW, db, rate, r.portQueueBytes(rate))...)
	}

	for i, h := range t.Hosts {
		ns := HostNamespace(prefix, h.Name)
		ipH := []string{"ip", "-n", ns}
		tcH := []string{"tc", "-n", ns}
		add("ip", "netns", "add", ns)
		add("ip", "netns", "exec", ns, "sh", "-c", hostSetup(r.cc))
		add(cat(ipH, "link", "set", "lo", "up")...)
		for n, nic := range h.NICs {
			port, eth := PortDevice(i, n), NICDevice(n)
			b := r.bridge[nic.Bridge]
			add(cat(ipSW, "link", "add", port, "type", "veth", "peer", "name", eth, "netns", ns)...)
			add(cat(ipSW, "link", "set", port, "master", BridgeDevice(nic.Bridge))...)
			add(cat(ipSW, "link", "set", port, "up")...)
			add(cat(ipH, "addr", "add", netip.PrefixFrom(r.addrs[i][n], 24).String(), "dev", eth)...)
			add(cat(ipH, "link", "set", eth, "up")...)
			// Subnets of the bridges reachable over backbones are on-link:
			// the backbone is layer 2, so no router is needed.
			for ob := range t.Bridges {
				if ob != b && r.comp[ob] == r.comp[b] {
					add(cat(ipH, "route", "add", r.subnets[ob].String(), "dev", eth)...)
				}
			}
			out := nic.RateOut * r.scale
			if classes := r.pairClasses(i, n); len(classes) > 0 {
				cmds = append(cmds, r.htbCommands(tcH, eth, out, classes)...)
			} else {
				cmds = append(cmds, shaper(tcH, eth, out, r.queues.NICBytes)...)
			}
			in := nic.RateIn * r.scale
			cmds = append(cmds, shaper(tcSW, port, in, r.portQueueBytes(in))...)
		}
	}
	if rules := r.lossRules(); rules != "" {
		cmds = append(cmds, Command{Args: []string{"ip", "netns", "exec", sw, "nft", "-f", "-"}, Stdin: rules})
	}
	return cmds
}

// pairClass is one per-destination htb class on a host's NIC.
type pairClass struct {
	dst   int // destination host index
	rate  float64
	addrs []netip.Addr
}

// pairClasses lists the per-destination caps that apply on host i's NIC n.
func (r *resolved) pairClasses(i, n int) []pairClass {
	var out []pairClass
	for j := range r.t.Hosts {
		rate, ok := r.pairOut[[2]int{i, j}]
		if !ok {
			continue
		}
		pc := pairClass{dst: j, rate: rate}
		for _, nm := range r.routesBetween(i, j) {
			if nm[0] == n {
				pc.addrs = append(pc.addrs, r.addrs[j][nm[1]])
			}
		}
		if len(pc.addrs) > 0 {
			out = append(out, pc)
		}
	}
	return out
}

// htbCommands shapes a NIC to out Mbit/s in total (class 1:1) and every
// destination with a pair rate to that rate (its ceil), with u32 filters
// on the destination address. Each leaf's guaranteed rate is its ceil
// times one share, chosen so that the guarantees add up to at most out:
// htb then never exceeds out in total and a lone flow still reaches its
// pair's ceil by borrowing. Unclassified traffic goes to class 1:2 (ceil
// out). Leaves get a bfifo of the NIC queue size.
func (r *resolved) htbCommands(tc []string, dev string, out float64, classes []pairClass) []Command {
	sum := out
	for _, c := range classes {
		sum += c.rate
	}
	share := min(1, out/sum)
	var cmds []Command
	add := func(args ...string) { cmds = append(cmds, Command{Args: append(append([]string{}, tc...), args...)}) }
	class := func(parent, id string, rate, ceil float64) { htbClass(add, "add", dev, parent, id, rate, ceil, "1") }
	limit := strconv.Itoa(r.queues.NICBytes)
	add("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2")
	htbClass(add, "add", dev, "1:", "1:1", out, out, "")
	class("1:1", "1:2", out*share, out)
	add("qdisc", "add", "dev", dev, "parent", "1:2", "handle", "2:", "bfifo", "limit", limit)
	// Acknowledgements first, as in shaper.
	htbClass(add, "add", dev, "1:1", "1:3", out*share/10, out, "0")
	add("qdisc", "add", "dev", dev, "parent", "1:3", "handle", "3:", "pfifo", "limit", "1000")
	add(ackFilter(dev, "1:3")...)
	for _, c := range classes {
		minor := fmt.Sprintf("%x", 0x10+c.dst)
		id := "1:" + minor
		class("1:1", id, c.rate*share, c.rate)
		add("qdisc", "add", "dev", dev, "parent", id, "handle", minor+":", "bfifo", "limit", limit)
		for _, a := range c.addrs {
			add("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "2",
				"u32", "match", "ip", "dst", a.String()+"/32", "flowid", id)
		}
	}
	return cmds
}

// lossRules is the nftables script (for the switch namespace) that drops
// the configured share of IPv4 packets entering and leaving each lossy
// NIC's switch port. Loss has a resolution of 0.01 %.
func (r *resolved) lossRules() string {
	var b strings.Builder
	for i, h := range r.t.Hosts {
		for n, nic := range h.NICs {
			if nic.Loss <= 0 {
				continue
			}
			lim := int(math.Round(nic.Loss * 100))
			port := PortDevice(i, n)
			fmt.Fprintf(&b, "\t\tiifname %q ether type ip numgen random mod 10000 < %d drop\n", port, lim)
			fmt.Fprintf(&b, "\t\toifname %q ether type ip numgen random mod 10000 < %d drop\n", port, lim)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "table bridge " + lossTable + " {\n\tchain loss {\n\t\ttype filter hook forward priority 0; policy accept;\n" +
		b.String() + "\t}\n}\n"
}

// lossTable is the nftables table netlab adds, in the switch namespace
// only (it goes away with the namespace).
const lossTable = "netlab_loss"

// downCommands deletes the given namespaces: hosts first, the switch last.
func downCommands(namespaces []string) []Command {
	var cmds []Command
	var last []Command
	for _, ns := range namespaces {
		c := Command{Args: []string{"ip", "netns", "del", ns}}
		if strings.HasSuffix(ns, switchSuffix) {
			last = append(last, c)
		} else {
			cmds = append(cmds, c)
		}
	}
	return append(cmds, last...)
}
