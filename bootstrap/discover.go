package bootstrap

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Automatic rails. Without HETCOMM_RAILS, a rank that reaches the others
// through a real network (not loopback) also listens on its other
// interfaces' IPv4 addresses and says in its hello which network each is
// in. Once the directory is in, every rank keeps the same rails
// (chooseRails): its first address, then one rail per network that every
// rank has an address in, the ranks of different machines at different
// addresses there. HETCOMM_RAILS_AUTO=off turns this off; a list of
// networks (CIDR) limits it to them, like Open MPI's btl_tcp_if_include.

// candidate is a local address that may become a rail, and its network.
type candidate struct {
	ip  string
	net *net.IPNet
}

// discoverRails lists this host's IPv4 addresses outside primary's
// network (and outside loopback and link-local), on interfaces that are
// up, in the networks of limit when it is given: the candidates for
// more rails. ifaces lists the interfaces' addresses (net.InterfaceAddrs
// for every up interface).
func discoverRails(primary string, limit []*net.IPNet, ifaces func() ([]net.Addr, error)) ([]candidate, error) {
	pip := net.ParseIP(primary)
	if pip == nil || pip.IsLoopback() || pip.IsUnspecified() {
		return nil, nil
	}
	addrs, err := ifaces()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: listing this host's addresses for rails: %w", err)
	}
	var primaryNet *net.IPNet
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(pip) {
			primaryNet = &net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}
		}
	}
	var out []candidate
	seen := map[string]bool{}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() || ipn.IP.Equal(pip) {
			continue
		}
		if primaryNet != nil && primaryNet.Contains(ipn.IP) {
			continue // the same network as the first rail
		}
		network := &net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}
		if limit != nil && !slices.ContainsFunc(limit, func(l *net.IPNet) bool { return l.Contains(ipn.IP) }) {
			continue
		}
		if seen[network.String()] {
			continue // one address per network
		}
		seen[network.String()] = true
		out = append(out, candidate{ip: ipn.IP.String(), net: network})
	}
	return out, nil
}

// virtualInterface reports the bridges and tunnels of containers and
// virtual machines, which are not paths to other hosts.
func virtualInterface(name string) bool {
	for _, p := range []string{"docker", "br-", "virbr", "veth", "lxcbr", "lxdbr", "cni", "flannel", "cali", "kube", "vxlan", "podman"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// upInterfaceAddrs is the addresses of the interfaces that are up and
// neither loopback nor virtual (virtualInterface).
func upInterfaceAddrs() ([]net.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []net.Addr
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || virtualInterface(i.Name) {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// parseRailsAuto reads HETCOMM_RAILS_AUTO: "" or "on" (every network),
// "off" (none: nil, false), or networks in CIDR form.
func parseRailsAuto(v string) (limit []*net.IPNet, on bool, err error) {
	switch v = strings.TrimSpace(strings.ToLower(v)); v {
	case "", "on":
		return nil, true, nil
	case "off":
		return nil, false, nil
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, false, fmt.Errorf("%q is not a network such as 10.1.0.0/16", s)
		}
		limit = append(limit, n)
	}
	return limit, true, nil
}

// chooseRails keeps, in every peer's hello, the rails that every rank
// keeps: the first (its address), then one per network in which every
// rank has an address (Peer.Nets) and ranks of different machines (told
// apart by their first address) have different addresses: the same
// address on two machines (a docker bridge on every host) is not a path
// between them. The networks are in increasing order. It returns, for
// each rank, the indices of its kept rails in its hello, and rewrites
// the directory to them.
func chooseRails(dir *Directory) [][]int {
	common := map[string]int{} // network -> ranks with an address in it
	for _, p := range dir.Peers {
		for i, n := range p.Nets {
			if i > 0 && n != "" && i < len(p.Addrs) {
				common[n]++
			}
		}
	}
	var nets []string
	for n, k := range common {
		if k == len(dir.Peers) && distinctPerMachine(dir, n) {
			nets = append(nets, n)
		}
	}
	slices.Sort(nets)
	kept := make([][]int, len(dir.Peers))
	for r := range dir.Peers {
		p := &dir.Peers[r]
		kept[r] = []int{0}
		for _, n := range nets {
			kept[r] = append(kept[r], slices.Index(p.Nets, n))
		}
		addrs := make([]string, 0, len(kept[r]))
		for _, i := range kept[r] {
			addrs = append(addrs, p.Addrs[i])
		}
		p.Addrs, p.Nets = addrs, nil
	}
	return kept
}

// distinctPerMachine reports whether the ranks of different machines
// have different addresses in network n.
func distinctPerMachine(dir *Directory, n string) bool {
	owner := map[string]string{} // address in n -> machine (first address's host)
	for _, p := range dir.Peers {
		i := slices.Index(p.Nets, n)
		if i <= 0 || i >= len(p.Addrs) || len(p.Addrs) == 0 {
			return false
		}
		ip, machine := hostOf(p.Addrs[i]), hostOf(p.Addrs[0])
		if m, ok := owner[ip]; ok && m != machine {
			return false
		}
		owner[ip] = machine
	}
	return true
}

// CheckRailsAuto reports whether v is a valid HETCOMM_RAILS_AUTO: on,
// off, or networks in CIDR form.
func CheckRailsAuto(v string) error {
	_, _, err := parseRailsAuto(v)
	return err
}
