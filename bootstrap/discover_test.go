package bootstrap

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func ipnet(t *testing.T, s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	require.NoError(t, err)
	n.IP = ip
	return n
}

func TestDiscoverRails(t *testing.T) {
	addrs := func() ([]net.Addr, error) {
		var out []net.Addr
		for _, s := range []string{"10.77.2.1/24", "10.77.1.1/24", "127.0.0.1/8", "169.254.1.1/16", "172.17.0.1/16", "10.77.2.5/24", "10.77.1.9/24", "fe80::1/64"} {
			out = append(out, ipnet(t, s))
		}
		return out, nil
	}
	c, err := discoverRails("10.77.2.1", nil, addrs)
	require.NoError(t, err)
	require.Len(t, c, 2, "%v", c)
	require.Equal(t, "10.77.1.1", c[0].ip)
	require.Equal(t, "10.77.1.0/24", c[0].net.String())
	require.Equal(t, "172.17.0.1", c[1].ip, "not the primary's network, loopback, link-local, IPv6 or a second address in one network")
	_, limit, _ := net.ParseCIDR("10.77.0.0/16")
	c, err = discoverRails("10.77.2.1", []*net.IPNet{limit}, addrs)
	require.NoError(t, err)
	require.Len(t, c, 1)
	for _, primary := range []string{"127.0.0.1", "0.0.0.0", "localhost"} {
		c, err = discoverRails(primary, nil, addrs)
		require.NoError(t, err)
		require.Empty(t, c, "a job on loopback finds no rail")
	}
	require.True(t, virtualInterface("docker0"))
	require.True(t, virtualInterface("veth1234"))
	require.False(t, virtualInterface("eth1"))
}

func TestParseRailsAuto(t *testing.T) {
	for v, on := range map[string]bool{"": true, "on": true, "ON": true, "off": false, "10.1.0.0/16,10.2.0.0/16": true} {
		_, got, err := parseRailsAuto(v)
		require.NoError(t, err, v)
		require.Equal(t, on, got, v)
	}
	limit, _, _ := parseRailsAuto("10.1.0.0/16, 10.2.0.0/16")
	require.Len(t, limit, 2)
	_, _, err := parseRailsAuto("eth1")
	require.ErrorContains(t, err, `"eth1" is not a network`)
}

func TestChooseRails(t *testing.T) {
	// Four hosts with a second NIC on 10.77.1.0/24, a docker bridge at
	// the same address everywhere, and rank 3 with a third NIC no one
	// else has.
	dir := &Directory{}
	for r := 0; r < 4; r++ {
		p := Peer{Rank: r,
			Addrs: []string{net.JoinHostPort("10.77.2."+string(rune('1'+r)), "4000"), net.JoinHostPort("10.77.1."+string(rune('1'+r)), "4001"), "172.17.0.1:4002"},
			Nets:  []string{"", "10.77.1.0/24", "172.17.0.0/16"}}
		if r == 3 {
			p.Addrs = append(p.Addrs, "192.168.9.1:4003")
			p.Nets = append(p.Nets, "192.168.9.0/24")
		}
		dir.Peers = append(dir.Peers, p)
	}
	kept := chooseRails(dir)
	for r := range dir.Peers {
		require.Equal(t, []int{0, 1}, kept[r])
		require.Len(t, dir.Peers[r].Addrs, 2)
		require.Nil(t, dir.Peers[r].Nets)
	}
	require.Equal(t, "10.77.1.4:4001", dir.Peers[3].Addrs[1])

	// Two ranks per host share their addresses: still a rail. The rail's
	// index differs between hellos (rank 1 lists it second).
	dir = &Directory{Peers: []Peer{
		{Rank: 0, Addrs: []string{"10.0.0.1:1", "10.1.0.1:2"}, Nets: []string{"", "10.1.0.0/16"}},
		{Rank: 1, Addrs: []string{"10.0.0.1:3", "192.168.0.1:4", "10.1.0.1:5"}, Nets: []string{"", "192.168.0.0/24", "10.1.0.0/16"}},
		{Rank: 2, Addrs: []string{"10.0.0.2:1", "10.1.0.2:2"}, Nets: []string{"", "10.1.0.0/16"}},
	}}
	kept = chooseRails(dir)
	require.Equal(t, [][]int{{0, 1}, {0, 2}, {0, 1}}, kept)
	require.Equal(t, []string{"10.0.0.1:3", "10.1.0.1:5"}, dir.Peers[1].Addrs)

	// A rank that found nothing (or had it off): one rail for everyone.
	dir = &Directory{Peers: []Peer{
		{Rank: 0, Addrs: []string{"10.0.0.1:1", "10.1.0.1:2"}, Nets: []string{"", "10.1.0.0/16"}},
		{Rank: 1, Addrs: []string{"10.0.0.2:1"}},
	}}
	require.Equal(t, [][]int{{0}, {0}}, chooseRails(dir))
	require.Equal(t, []string{"10.0.0.1:1"}, dir.Peers[0].Addrs)
}
