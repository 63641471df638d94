package live

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/netlab"
)

// shapedModel returns the hosts of a topology in order, the bandwidth
// matrix its shaping allows and one segment per backbone (B/s), each at
// what TCP carries of its rate, as a perfect probe would find them.
func shapedModel(t *testing.T, topo *netlab.Topology) ([]string, [][]float64, []collective.Segment) {
	t.Helper()
	var hosts []string
	for _, h := range topo.Hosts {
		hosts = append(hosts, h.Name)
	}
	bw := make([][]float64, len(hosts))
	for i, a := range hosts {
		bw[i] = make([]float64, len(hosts))
		for j, b := range hosts {
			if i != j {
				r, err := topo.ExpectedRate(a, b)
				require.NoError(t, err)
				bw[i][j] = r * 1e6 / 8 * tcpCarries
			}
		}
	}
	var segs []collective.Segment
	for k, bb := range topo.Backbones {
		side := backboneSide(topo, k, 0)
		var s collective.Segment
		for r := range hosts {
			if side[r] {
				s.A = append(s.A, r)
			} else {
				s.B = append(s.B, r)
			}
		}
		s.AB = bb.Rate * 1e6 / 8 * tcpCarries
		s.BA = s.AB
		segs = append(segs, s)
	}
	return hosts, bw, segs
}

func TestCheckModel(t *testing.T) {
	topo, err := netlab.Load(filepath.Join("..", "topologies", "racks32.json"))
	require.NoError(t, err)
	hosts, bw, segs := shapedModel(t, topo)
	require.Len(t, segs, 4)

	c := CheckModel(topo, hosts, 0, true, bw, segs)
	require.Empty(t, c.Problems)
	require.Len(t, c.Pairs, 32*31)
	require.Len(t, c.Segments, 8)
	require.True(t, c.Within(1.1))

	// One pair 20% low, one uplink direction 30% high (a segment's sides
	// may come in either order).
	bw[3][17] *= 0.8
	segs[2].A, segs[2].B = segs[2].B, segs[2].A
	segs[2].AB *= 1.3
	c = CheckModel(topo, hosts, 0, true, bw, segs)
	require.Empty(t, c.Problems)
	require.False(t, c.Within(1.1))
	require.True(t, c.Within(1.31))
	out := c.Outside(1.1)
	require.Len(t, out, 2)
	require.Equal(t, "r1h4->r3h2", out[0].What)
	require.InDelta(t, 1.25, out[0].Off(), 1e-9)
	require.Equal(t, "segment core->rack3", out[1].What, "AB of the flipped segment is core to rack3")
	w, ok := c.Worst()
	require.True(t, ok)
	require.Equal(t, out[1], w)
	var rep bytes.Buffer
	c.Report(&rep)
	require.Contains(t, rep.String(), "pairs within 10% of the shaping: 991 of 992")
	require.Contains(t, rep.String(), "segments within 10% of the shaping: 7 of 8")
	require.Contains(t, rep.String(), "outside 10%: r1h4->r3h2")

	// Segments only (rails): the pairs are not compared.
	c = CheckModel(topo, hosts, 0, false, bw, segs)
	require.Empty(t, c.Pairs)
	require.Len(t, c.Outside(1.1), 1)

	// A missing uplink, one with the wrong sides, and an unknown host.
	c = CheckModel(topo, hosts, 0, true, bw, segs[:3])
	require.Len(t, c.Problems, 1)
	require.Contains(t, c.Problems[0], "no segment found between ranks [24 25 26 27 28 29 30 31]")
	require.False(t, c.Within(100))
	wrong := append([]collective.Segment(nil), segs...)
	wrong[0].A, wrong[0].B = []int{0, 1, 2}, []int{3, 4, 5}
	c = CheckModel(topo, hosts, 0, true, bw, wrong)
	require.Len(t, c.Problems, 2, "%v", c.Problems)
	require.Contains(t, c.Problems[0], "backbone rack1-core")
	require.Contains(t, c.Problems[1], "where the topology has no backbone")
	bad := append([]string(nil), hosts...)
	bad[5] = "elsewhere"
	c = CheckModel(topo, bad, 0, true, bw, segs)
	require.Len(t, c.Problems, 1)
	require.Contains(t, c.Problems[0], `rank 5 runs on "elsewhere"`)
	require.Empty(t, CheckModel(topo, hosts, 1, true, bw, segs).Pairs, "racks32's hosts have one NIC")

	// No backbone: any segment is a problem.
	sw, err := netlab.Load(filepath.Join("..", "topologies", "switch8.json"))
	require.NoError(t, err)
	swHosts, swBW, swSegs := shapedModel(t, sw)
	require.Empty(t, swSegs)
	require.True(t, CheckModel(sw, swHosts, 0, true, swBW, nil).Within(1.1))
	c = CheckModel(sw, swHosts, 0, true, swBW, []collective.Segment{{A: []int{0, 1}, B: []int{2, 3}, AB: 1, BA: 1}})
	require.Len(t, c.Problems, 1)
	require.Contains(t, c.Problems[0], "a segment where the topology has none")
}

func TestProbeCheckFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := ProbeCommand([]string{"-check", "no-such-topology.json"}, &out, &errb)
	require.Equal(t, 2, code, "a missing topology is a usage error: %s", errb.String())
	require.Contains(t, errb.String(), "hetbench probe: -check:")
	require.Contains(t, errb.String(), "no-such-topology.json")
}
