package netlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Topology describes a lab: bridges (switches, one /24 each), hosts with
// one or more NICs on those bridges, optional backbones joining bridges,
// and optional per-pair rates and latencies. The JSON form is documented
// in docs/netlab.md. Rates are in Mbit/s (10^6 bit/s), before RateScale.
type Topology struct {
	// Name names the lab; it becomes part of every namespace name
	// (prefix "nl-" + Name). Lower-case letters, digits and '-', at most
	// 20 characters. Required.
	Name string `json:"name"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// Subnet is the /16 from which bridges without an explicit subnet get
	// their /24, in order: the i-th bridge gets x.y.(i+1).0/24. Zero:
	// 10.77.0.0/16. Must lie inside 10.0.0.0/8.
	Subnet string `json:"subnet,omitempty"`
	// CongestionControl is the TCP congestion control of every host
	// namespace: "bbr" or "reno" (cubic is refused inside a namespace on
	// these kernels). Zero: "bbr".
	CongestionControl string `json:"congestion_control,omitempty"`
	// RateScale multiplies every rate in the file (NICs, backbones,
	// pairs). Zero: 1. It lets a file keep a paper's numbers verbatim and
	// still run at a practical speed.
	RateScale float64 `json:"rate_scale,omitempty"`
	// Queues overrides the queue sizes; zero fields keep the defaults.
	Queues Queues `json:"queues,omitzero"`
	// Bridges lists the switches. Required: at least one.
	Bridges []Bridge `json:"bridges"`
	// Backbones joins pairs of bridges by a shaped link. They must not
	// form a cycle (there is no spanning tree).
	Backbones []Backbone `json:"backbones,omitempty"`
	// Hosts lists the hosts, each in its own network namespace.
	Hosts []Host `json:"hosts"`
	// Pairs sets per-pair rates (shaped on the sender's egress with htb
	// classes selected by destination address) and records per-pair
	// latencies, which the kernel here cannot emulate (no netem): they
	// are data for user-space emulation.
	Pairs []Pair `json:"pairs,omitempty"`
}

// Queues sets the queue sizes of the shaped devices. Zero fields take the
// defaults of testbed-notes.md: a NIC's egress queue of 4 MiB, and switch
// ports (a NIC's ingress, backbone ends) of max(1 MiB, 100 ms of traffic).
type Queues struct {
	// NICBytes is the egress queue of a host's NIC. Zero: 4 MiB.
	NICBytes int `json:"nic_bytes,omitempty"`
	// PortMinBytes is the smallest switch-port queue. Zero: 1 MiB.
	PortMinBytes int `json:"port_min_bytes,omitempty"`
	// PortMillis sizes a switch-port queue as that many milliseconds of
	// traffic at the port's rate, if that is more than PortMinBytes.
	// Zero: 100.
	PortMillis float64 `json:"port_ms,omitempty"`
}

// Bridge is one switch: a Linux bridge in the lab's switch namespace.
type Bridge struct {
	// Name is lower-case letters, digits and '-', at most 12 characters.
	Name string `json:"name"`
	// Subnet is a /24 inside 10.0.0.0/8. Zero: allocated from
	// Topology.Subnet by position.
	Subnet string `json:"subnet,omitempty"`
}

// Backbone is a veth pair between two bridges, shaped to Rate Mbit/s in
// each direction.
type Backbone struct {
	A    string  `json:"a"`
	B    string  `json:"b"`
	Rate float64 `json:"rate"`
}

// Host is one machine of the lab.
type Host struct {
	// Name is lower-case letters, digits and '-', at most 32 characters;
	// it is also the host's hostname when commands run through exec or the
	// agent.
	Name string `json:"name"`
	// Cluster optionally groups hosts (free text, for reports).
	Cluster string `json:"cluster,omitempty"`
	// Labels are optional free key/value pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// NICs are the host's network interfaces, eth0, eth1, ... in order.
	NICs []NIC `json:"nics"`
}

// NIC is one network interface of a host: a veth whose host end is ethN
// in the host's namespace and whose other end is a port of Bridge.
type NIC struct {
	// Bridge names the bridge the NIC is plugged into. Required.
	Bridge string `json:"bridge"`
	// RateOut is the NIC's egress rate, RateIn its ingress rate, in
	// Mbit/s. Both required and positive.
	RateOut float64 `json:"rate_out"`
	RateIn  float64 `json:"rate_in"`
	// Loss is the percentage (0-100) of IPv4 packets dropped in each
	// direction through this NIC (by nftables in the switch namespace,
	// so that the host's own stack never sees a local drop).
	Loss float64 `json:"loss,omitempty"`
	// Addr is the NIC's IPv4 address inside the bridge's /24. Zero: the
	// next free one from .1, in host order.
	Addr string `json:"addr,omitempty"`
}

// Pair sets what is specific to a pair of hosts. Rate, if set, caps the
// traffic from A to B (and from B to A, at RateBA if set, else Rate).
// LatencyMS records the one-way latency in milliseconds, for user-space
// emulation only.
type Pair struct {
	A         string  `json:"a"`
	B         string  `json:"b"`
	Rate      float64 `json:"rate,omitempty"`
	RateBA    float64 `json:"rate_ba,omitempty"`
	LatencyMS float64 `json:"latency_ms,omitempty"`
}

// Defaults used when the corresponding fields are zero.
const (
	DefaultSubnet            = "10.77.0.0/16"
	DefaultCongestionControl = "bbr"
	DefaultNICQueueBytes     = 4 << 20
	DefaultPortMinBytes      = 1 << 20
	DefaultPortMillis        = 100
	// MinBurstBytes is the smallest tbf bucket; the bucket is
	// max(MinBurstBytes, BurstMillis of traffic at the rate).
	MinBurstBytes = 16000
	BurstMillis   = 2
	// MaxRate bounds every rate, in Mbit/s after scaling.
	MaxRate = 100000
)

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	defer f.Close()
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// Parse decodes a topology from JSON, rejects unknown fields, and
// validates it (see [Topology.Validate]).
func Parse(r io.Reader) (*Topology, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var t Topology
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("netlab: topology: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("netlab: topology: trailing data after the JSON object")
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// ParseBytes is Parse on a byte slice.
func ParseBytes(b []byte) (*Topology, error) { return Parse(bytes.NewReader(b)) }

var (
	labNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`)
	bridgeRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,11}$`)
	hostNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	tenNet     = netip.MustParsePrefix("10.0.0.0/8")
)

// Validate checks the topology and fills nothing in: it reports the first
// problem with a message that names the offending field.
func (t *Topology) Validate() error {
	_, err := t.resolve()
	return err
}

// resolved is a validated topology with every default applied: scaled
// rates, subnets and addresses.
type resolved struct {
	t       *Topology
	cc      string
	scale   float64
	queues  Queues
	subnets []netip.Prefix // per bridge
	bridge  map[string]int
	host    map[string]int
	addrs   [][]netip.Addr // per host, per NIC
	comp    []int          // per bridge: its backbone-connected component
	pairOut map[[2]int]float64
}

func errf(format string, args ...any) error {
	return fmt.Errorf("netlab: topology: "+format, args...)
}

func checkRate(what string, r float64, scale float64) error {
	switch {
	case r == 0:
		return errf("%s: missing rate (Mbit/s)", what)
	case math.IsNaN(r) || r < 0:
		return errf("%s: rate %v must be positive", what, r)
	case r*scale > MaxRate:
		return errf("%s: rate %v Mbit/s (scaled %v) exceeds %d", what, r, r*scale, MaxRate)
	case r*scale < 0.01:
		return errf("%s: rate %v Mbit/s (scaled %v) is below 0.01 Mbit/s", what, r, r*scale)
	}
	return nil
}

// resolve validates the topology and applies every default, reporting the
// first problem in the order the fields are documented: the lab's
// settings, bridges, backbones, hosts and their NICs, the addresses left
// to allocate, and pairs.
func (t *Topology) resolve() (*resolved, error) {
	r := &resolved{t: t, bridge: map[string]int{}, host: map[string]int{}, pairOut: map[[2]int]float64{}}
	if err := r.resolveSettings(); err != nil {
		return nil, err
	}
	if err := r.resolveBridges(); err != nil {
		return nil, err
	}
	if err := r.joinBackbones(); err != nil {
		return nil, err
	}
	used, err := r.resolveHosts()
	if err != nil {
		return nil, err
	}
	if err := r.allocateAddrs(used); err != nil {
		return nil, err
	}
	if err := r.resolvePairs(); err != nil {
		return nil, err
	}
	return r, nil
}

// resolveSettings checks the lab-wide fields (name, rate scale,
// congestion control, queue sizes) and sets r's scale, cc and queues,
// defaults applied.
func (r *resolved) resolveSettings() error {
	t := r.t
	if !labNameRE.MatchString(t.Name) {
		return errf("name %q: want 1-20 lower-case letters, digits or '-', starting with a letter or digit", t.Name)
	}
	r.scale = t.RateScale
	if r.scale == 0 {
		r.scale = 1
	}
	if math.IsNaN(r.scale) || r.scale <= 0 || r.scale > 1e6 {
		return errf("rate_scale %v: must be positive", t.RateScale)
	}
	r.cc = t.CongestionControl
	if r.cc == "" {
		r.cc = DefaultCongestionControl
	}
	if r.cc != "bbr" && r.cc != "reno" {
		return errf("congestion_control %q: want bbr or reno (cubic is not permitted inside a namespace here)", t.CongestionControl)
	}
	q := t.Queues
	if q.NICBytes == 0 {
		q.NICBytes = DefaultNICQueueBytes
	}
	if q.PortMinBytes == 0 {
		q.PortMinBytes = DefaultPortMinBytes
	}
	if q.PortMillis == 0 {
		q.PortMillis = DefaultPortMillis
	}
	if q.NICBytes < 16<<10 || q.NICBytes > 1<<30 || q.PortMinBytes < 16<<10 || q.PortMinBytes > 1<<30 || q.PortMillis < 0 || q.PortMillis > 10000 {
		return errf("queues %+v: byte sizes must lie in [16 KiB, 1 GiB] and port_ms in [0, 10000]", t.Queues)
	}
	r.queues = q
	return nil
}

// resolveBridges checks the lab's /16 and the bridges' names and subnets,
// and fills r.bridge and r.subnets (a bridge without a subnet gets the
// (i+1)-th /24 of the lab's /16).
func (r *resolved) resolveBridges() error {
	t := r.t
	base := DefaultSubnet
	if t.Subnet != "" {
		base = t.Subnet
	}
	basePfx, err := netip.ParsePrefix(base)
	if err != nil || !basePfx.Addr().Is4() || basePfx.Bits() != 16 || basePfx.Masked() != basePfx || !tenNet.Contains(basePfx.Addr()) {
		return errf("subnet %q: want a /16 inside 10.0.0.0/8 such as 10.77.0.0/16", base)
	}

	if len(t.Bridges) == 0 {
		return errf("no bridges")
	}
	if len(t.Bridges) > 250 {
		return errf("%d bridges: at most 250", len(t.Bridges))
	}
	seenSubnet := map[netip.Prefix]string{}
	for i, b := range t.Bridges {
		if !bridgeRE.MatchString(b.Name) {
			return errf("bridges[%d]: name %q: want 1-12 lower-case letters, digits or '-'", i, b.Name)
		}
		if _, dup := r.bridge[b.Name]; dup {
			return errf("bridges[%d]: duplicate bridge name %q", i, b.Name)
		}
		r.bridge[b.Name] = i
		var p netip.Prefix
		if b.Subnet == "" {
			a := basePfx.Addr().As4()
			a[2] = byte(i + 1)
			p = netip.PrefixFrom(netip.AddrFrom4(a), 24)
		} else {
			p, err = netip.ParsePrefix(b.Subnet)
			if err != nil || !p.Addr().Is4() || p.Bits() != 24 || p.Masked() != p || !tenNet.Contains(p.Addr()) {
				return errf("bridge %q: subnet %q: want a /24 inside 10.0.0.0/8 such as 10.77.1.0/24", b.Name, b.Subnet)
			}
		}
		if other, dup := seenSubnet[p]; dup {
			return errf("bridge %q: subnet %s is also bridge %q's", b.Name, p, other)
		}
		seenSubnet[p] = b.Name
		r.subnets = append(r.subnets, p)
	}
	return nil
}

// joinBackbones checks the backbones (known bridges, a rate, no loop) and
// sets r.comp, every bridge's backbone-connected component, by union-find
// over the forest they form.
func (r *resolved) joinBackbones() error {
	t := r.t
	parent := make([]int, len(t.Bridges))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i, bb := range t.Backbones {
		what := fmt.Sprintf("backbones[%d] (%s-%s)", i, bb.A, bb.B)
		a, okA := r.bridge[bb.A]
		b, okB := r.bridge[bb.B]
		switch {
		case !okA:
			return errf("%s: unknown bridge %q", what, bb.A)
		case !okB:
			return errf("%s: unknown bridge %q", what, bb.B)
		case a == b:
			return errf("%s: joins bridge %q to itself", what, bb.A)
		}
		if err := checkRate(what, bb.Rate, r.scale); err != nil {
			return err
		}
		if find(a) == find(b) {
			return errf("%s: bridges %q and %q are already connected: backbones must not form a loop", what, bb.A, bb.B)
		}
		parent[find(a)] = find(b)
	}
	r.comp = make([]int, len(t.Bridges))
	for i := range r.comp {
		r.comp[i] = find(i)
	}
	return nil
}

// resolveHosts checks the hosts and their NICs, fills r.host, and sizes
// r.addrs with the explicitly given addresses in place. It returns, per
// bridge, the addresses taken so far and by which host.
func (r *resolved) resolveHosts() ([]map[netip.Addr]string, error) {
	t := r.t
	if len(t.Hosts) == 0 {
		return nil, errf("no hosts")
	}
	used := make([]map[netip.Addr]string, len(t.Bridges))
	for i := range used {
		used[i] = map[netip.Addr]string{}
	}
	r.addrs = make([][]netip.Addr, len(t.Hosts))
	for i, h := range t.Hosts {
		if !hostNameRE.MatchString(h.Name) {
			return nil, errf("hosts[%d]: name %q: want 1-32 lower-case letters, digits or '-'", i, h.Name)
		}
		if _, dup := r.host[h.Name]; dup {
			return nil, errf("hosts[%d]: duplicate host name %q", i, h.Name)
		}
		r.host[h.Name] = i
		if len(h.NICs) == 0 {
			return nil, errf("host %q: no nics", h.Name)
		}
		if len(h.NICs) > 8 {
			return nil, errf("host %q: %d nics: at most 8", h.Name, len(h.NICs))
		}
		r.addrs[i] = make([]netip.Addr, len(h.NICs))
		comps := map[int]string{}
		for n := range h.NICs {
			if err := r.resolveNIC(i, n, comps, used); err != nil {
				return nil, err
			}
		}
	}
	return used, nil
}

// resolveNIC checks NIC n of host i: its bridge (comps maps the
// components of the host's earlier NICs to their bridges, so that two
// NICs never share a network), rates, loss and, if given, its address,
// which it records in r.addrs and used.
func (r *resolved) resolveNIC(i, n int, comps map[int]string, used []map[netip.Addr]string) error {
	h := &r.t.Hosts[i]
	nic := h.NICs[n]
	what := fmt.Sprintf("host %q nics[%d]", h.Name, n)
	b, ok := r.bridge[nic.Bridge]
	if !ok {
		if nic.Bridge == "" {
			return errf("%s: missing bridge", what)
		}
		return errf("%s: unknown bridge %q", what, nic.Bridge)
	}
	if other, dup := comps[r.comp[b]]; dup {
		if other == nic.Bridge {
			return errf("%s: a second NIC on bridge %q: put each NIC of a host on its own bridge (subnet)", what, nic.Bridge)
		}
		return errf("%s: bridges %q and %q are joined by backbones: two NICs of a host must be on separate networks", what, other, nic.Bridge)
	}
	comps[r.comp[b]] = nic.Bridge
	if err := checkRate(what+" rate_out", nic.RateOut, r.scale); err != nil {
		return err
	}
	if err := checkRate(what+" rate_in", nic.RateIn, r.scale); err != nil {
		return err
	}
	if math.IsNaN(nic.Loss) || nic.Loss < 0 || nic.Loss > 100 {
		return errf("%s: loss %v: want a percentage in [0, 100]", what, nic.Loss)
	}
	if nic.Addr == "" {
		return nil
	}
	a, err := netip.ParseAddr(nic.Addr)
	if err != nil || !a.Is4() || !r.subnets[b].Contains(a) {
		return errf("%s: addr %q: want an IPv4 address in bridge %q's subnet %s", what, nic.Addr, nic.Bridge, r.subnets[b])
	}
	last := a.As4()[3]
	if last == 0 || last == 255 {
		return errf("%s: addr %s: .0 and .255 are not host addresses", what, a)
	}
	if other, dup := used[b][a]; dup {
		return errf("%s: addr %s is also %s's", what, a, other)
	}
	used[b][a] = h.Name
	r.addrs[i][n] = a
	return nil
}

// allocateAddrs gives every NIC without an explicit address the lowest
// free one of its bridge's /24 from .1, in host order; used holds the
// addresses already taken.
func (r *resolved) allocateAddrs(used []map[netip.Addr]string) error {
	t := r.t
	next := make([]int, len(t.Bridges))
	for i, h := range t.Hosts {
		for n, nic := range h.NICs {
			if r.addrs[i][n].IsValid() {
				continue
			}
			b := r.bridge[nic.Bridge]
			for {
				next[b]++
				if next[b] > 254 {
					return errf("bridge %q: too many hosts for a /24 (at most 254 addresses, .1 to .254)", nic.Bridge)
				}
				a := r.subnets[b].Addr().As4()
				a[3] = byte(next[b])
				addr := netip.AddrFrom4(a)
				if _, taken := used[b][addr]; !taken {
					used[b][addr] = h.Name
					r.addrs[i][n] = addr
					break
				}
			}
		}
	}
	return nil
}

// resolvePairs checks the pairs (known, distinct hosts, each pair once,
// rates only between hosts that share a network, latencies in range) and
// fills r.pairOut with the scaled rate of each direction that has one.
func (r *resolved) resolvePairs() error {
	seenPair := map[[2]int]bool{}
	for i, p := range r.t.Pairs {
		what := fmt.Sprintf("pairs[%d] (%s-%s)", i, p.A, p.B)
		a, okA := r.host[p.A]
		b, okB := r.host[p.B]
		switch {
		case !okA:
			return errf("%s: unknown host %q", what, p.A)
		case !okB:
			return errf("%s: unknown host %q", what, p.B)
		case a == b:
			return errf("%s: a host paired with itself", what)
		}
		key := [2]int{min(a, b), max(a, b)}
		if seenPair[key] {
			return errf("%s: duplicate pair", what)
		}
		seenPair[key] = true
		if p.Rate == 0 && p.RateBA != 0 {
			return errf("%s: rate_ba without rate", what)
		}
		if p.Rate != 0 {
			if err := checkRate(what, p.Rate, r.scale); err != nil {
				return err
			}
			back := p.Rate
			if p.RateBA != 0 {
				if err := checkRate(what+" rate_ba", p.RateBA, r.scale); err != nil {
					return err
				}
				back = p.RateBA
			}
			if len(r.routesBetween(a, b)) == 0 {
				return errf("%s: the hosts share no network, so no rate can apply", what)
			}
			r.pairOut[[2]int{a, b}] = p.Rate * r.scale
			r.pairOut[[2]int{b, a}] = back * r.scale
		}
		if math.IsNaN(p.LatencyMS) || p.LatencyMS < 0 || p.LatencyMS > 60000 {
			return errf("%s: latency_ms %v: want [0, 60000]", what, p.LatencyMS)
		}
	}
	return nil
}

// routesBetween lists, for hosts a and b, the pairs (a's NIC, b's NIC)
// whose bridges are connected.
func (r *resolved) routesBetween(a, b int) [][2]int {
	var out [][2]int
	for n, na := range r.t.Hosts[a].NICs {
		for m, nb := range r.t.Hosts[b].NICs {
			if r.comp[r.bridge[na.Bridge]] == r.comp[r.bridge[nb.Bridge]] {
				out = append(out, [2]int{n, m})
			}
		}
	}
	return out
}

// Addr returns the IPv4 address of host's nic-th NIC.
func (t *Topology) Addr(host string, nic int) (string, error) {
	r, err := t.resolve()
	if err != nil {
		return "", err
	}
	i, ok := r.host[host]
	if !ok {
		return "", fmt.Errorf("netlab: unknown host %q", host)
	}
	if nic < 0 || nic >= len(r.addrs[i]) {
		return "", fmt.Errorf("netlab: host %q has no nic %d", host, nic)
	}
	return r.addrs[i][nic].String(), nil
}

// HostAddrs maps every host to its NICs' addresses, in NIC order.
func (t *Topology) HostAddrs() (map[string][]string, error) {
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i, h := range t.Hosts {
		for _, a := range r.addrs[i] {
			out[h.Name] = append(out[h.Name], a.String())
		}
	}
	return out, nil
}

// LatencyMatrix returns the pairs' latencies in milliseconds as a matrix in
// host order (row = sender, column = receiver), 0 where none is given.
func (t *Topology) LatencyMatrix() [][]float64 {
	idx := map[string]int{}
	for i, h := range t.Hosts {
		idx[h.Name] = i
	}
	m := make([][]float64, len(t.Hosts))
	for i := range m {
		m[i] = make([]float64, len(t.Hosts))
	}
	for _, p := range t.Pairs {
		a, okA := idx[p.A]
		b, okB := idx[p.B]
		if okA && okB {
			m[a][b], m[b][a] = p.LatencyMS, p.LatencyMS
		}
	}
	return m
}

// ExpectedRate returns the rate in Mbit/s (scaled) that one TCP flow from
// host a to host b should approach when nothing else runs: the minimum of
// a's egress, b's ingress, the pair's rate and every backbone on the way,
// over the best NIC pair. It returns 0 when the hosts share no network.
func (t *Topology) ExpectedRate(a, b string) (float64, error) {
	r, err := t.resolve()
	if err != nil {
		return 0, err
	}
	i, ok := r.host[a]
	if !ok {
		return 0, fmt.Errorf("netlab: unknown host %q", a)
	}
	j, ok := r.host[b]
	if !ok {
		return 0, fmt.Errorf("netlab: unknown host %q", b)
	}
	best := 0.0
	for _, nm := range r.routesBetween(i, j) {
		na, nb := t.Hosts[i].NICs[nm[0]], t.Hosts[j].NICs[nm[1]]
		rate := min(na.RateOut, nb.RateIn) * r.scale
		if p, ok := r.pairOut[[2]int{i, j}]; ok {
			rate = min(rate, p)
		}
		for _, bb := range r.backbonePath(r.bridge[na.Bridge], r.bridge[nb.Bridge]) {
			rate = min(rate, t.Backbones[bb].Rate*r.scale)
		}
		best = max(best, rate)
	}
	return best, nil
}

// Rates returns what the lab's shaping lets through, as matrices in host
// order (row = sender, column = receiver): each pair's latency in seconds
// and its rate in bytes per second (ExpectedRate), 0 on the diagonal. A
// user-space emulation of the lab (HETCOMM_EMULATE) uses them as its model.
func (t *Topology) Rates() (latency, rate [][]float64, err error) {
	n := len(t.Hosts)
	ms := t.LatencyMatrix()
	latency, rate = make([][]float64, n), make([][]float64, n)
	for i, a := range t.Hosts {
		latency[i], rate[i] = make([]float64, n), make([]float64, n)
		for j, b := range t.Hosts {
			if i == j {
				continue
			}
			mbit, err := t.ExpectedRate(a.Name, b.Name)
			if err != nil {
				return nil, nil, err
			}
			if mbit <= 0 {
				return nil, nil, fmt.Errorf("netlab: %s: hosts %s and %s share no network", t.Name, a.Name, b.Name)
			}
			rate[i][j] = mbit * 1e6 / 8
			latency[i][j] = ms[i][j] / 1e3
		}
	}
	return latency, rate, nil
}

// backbonePath returns the backbones crossed between bridges a and b
// (which must be connected); the backbones form a forest, so the path is
// unique.
func (r *resolved) backbonePath(a, b int) []int {
	type edge struct{ to, bb int }
	adj := map[int][]edge{}
	for k, bb := range r.t.Backbones {
		x, y := r.bridge[bb.A], r.bridge[bb.B]
		adj[x] = append(adj[x], edge{y, k})
		adj[y] = append(adj[y], edge{x, k})
	}
	prev := map[int]edge{a: {-1, -1}}
	queue := []int{a}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, e := range adj[x] {
			if _, seen := prev[e.to]; !seen {
				prev[e.to] = edge{x, e.bb}
				queue = append(queue, e.to)
			}
		}
	}
	var path []int
	for x := b; x != a; {
		e, ok := prev[x]
		if !ok || e.to < 0 {
			return nil
		}
		path = append(path, e.bb)
		x = e.to
	}
	sort.Ints(path)
	return path
}

// String renders the topology as indented JSON.
func (t *Topology) String() string {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return "netlab.Topology(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}
