// Package netlab builds the network-namespace testbed on which hetcomm runs
// for real over links of different speeds: one network namespace per host,
// each NIC a veth whose egress (on the host's end) and ingress (on the
// switch's end) are shaped with tc htb (an acknowledgement class first, then
// the rest, so the link behaves like a host with a flow-isolating qdisc),
// NICs plugged into Linux bridges
// (one /24 each) that live in a dedicated switch namespace, optional
// second NICs on a second bridge, backbones between bridges shaped in both
// directions, per-pair rates (htb classes by destination address on the
// sender's NIC), and per-NIC packet loss (nftables numgen in the switch).
//
// Everything it creates lives in namespaces named after the lab (prefix
// "nl-" + lab name): the root namespace gets no device, address, route or
// firewall rule, and no namespace gets a default route, so lab traffic
// cannot leave the lab. [Down] finds a lab by its namespace names, kills
// what still runs there and deletes it, also after a crash.
//
// A topology is JSON (see docs/netlab.md and bench/topologies); [Parse]
// validates it, [Topology.UpCommands] turns it into the ip/tc/nft commands
// (pure, testable without root), and [Up] runs them as root. The command
// internal/netlab/cmd/netlab wraps this (up, down, status, exec, agent)
// and writes, per lab, an agent script that hetrun uses as --rsh to start
// ranks inside the hosts' namespaces.
//
// The kernel here offers tbf and htb but no netem, so latencies cannot be
// emulated in the kernel: a topology records them (pairs' latency_ms) for
// the transport's user-space emulation.
//
// This package imports only the standard library and runs ip, tc, nft and
// unshare; nothing outside it may depend on it, and its tests that build
// labs run only with HETCOMM_ROOT_TESTS=1 (see internal/roottest).
package netlab
