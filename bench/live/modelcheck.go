package live

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/netlab"
)

// RateCheck is one probed rate next to what the shaping lets through, both
// in bytes per second.
type RateCheck struct {
	What      string
	Got, Want float64
}

// Off is how far the probed rate is from the shaping's, as a factor of 1
// or more (1.1: 10% above, or 1/1.1 of, what the shaping allows).
func (r RateCheck) Off() float64 {
	if r.Got <= 0 || r.Want <= 0 {
		return math.Inf(1)
	}
	return max(r.Got/r.Want, r.Want/r.Got)
}

func (r RateCheck) String() string {
	return fmt.Sprintf("%s: probed %.3g B/s, shaped %.3g B/s", r.What, r.Got, r.Want)
}

// ModelCheck is a probed model compared with the netlab topology it was
// probed on (CheckModel).
type ModelCheck struct {
	// Pairs has every ordered pair of ranks on different hosts (none when
	// the check was asked for segments only).
	Pairs []RateCheck
	// Segments has each direction of every backbone the probe found.
	Segments []RateCheck
	// Problems are what no tolerance excuses: a rank whose host is not in
	// the topology, a backbone with no segment found between the ranks on
	// either side of it, a segment where the topology has none.
	Problems []string
}

// tcpCarries is the share of a tbf-shaped link's rate that a TCP flow's
// payload gets (the framing: 1,448 bytes of payload in a 1,514-byte
// frame; ../shared/testbed-notes.md measured 95.5%). The probe measures
// payload, so this is what a pair or a segment reaches alone.
const tcpCarries = 0.955

// CheckModel compares a probed model with what the topology's shaping lets
// through. hosts names each rank's host (ModelFile.Hosts: netlab gives each
// namespace its host's name) and nic the NIC the ranks ran on (its index in
// every host's list). With pairs, every pair of ranks on different hosts is
// compared with Topology.ExpectedRate as TCP carries it (tcpCarries); the
// segments are always compared with the backbones: one segment per
// backbone, between the ranks on either side of it, each direction with
// the backbone's rate as TCP carries it.
func CheckModel(t *netlab.Topology, hosts []string, nic int, pairs bool, bw [][]float64, segs []collective.Segment) ModelCheck {
	var c ModelCheck
	index := map[string]int{}
	for i, h := range t.Hosts {
		index[h.Name] = i
	}
	for r, h := range hosts {
		i, ok := index[h]
		if !ok {
			c.Problems = append(c.Problems, fmt.Sprintf("rank %d runs on %q, which is not a host of topology %s", r, h, t.Name))
			continue
		}
		if nic < 0 || nic >= len(t.Hosts[i].NICs) {
			c.Problems = append(c.Problems, fmt.Sprintf("host %s has no NIC %d", h, nic))
		}
	}
	if len(c.Problems) > 0 {
		return c
	}
	if pairs {
		for i, a := range hosts {
			for j, b := range hosts {
				if a == b || i >= len(bw) || j >= len(bw[i]) {
					continue
				}
				mbit, err := t.ExpectedRate(a, b)
				if err != nil {
					c.Problems = append(c.Problems, err.Error())
					return c
				}
				c.Pairs = append(c.Pairs, RateCheck{What: fmt.Sprintf("%s->%s", a, b), Got: bw[i][j], Want: mbit * 1e6 / 8 * tcpCarries})
			}
		}
	}
	if len(t.Backbones) == 0 {
		for _, s := range segs {
			c.Problems = append(c.Problems, fmt.Sprintf("a segment where the topology has none: %v and %v", s.A, s.B))
		}
		return c
	}
	used := make([]bool, len(segs))
	sides := make([][2][]int, len(segs)) // each segment's sides, sorted
	for i, sg := range segs {
		sides[i] = [2][]int{slices.Sorted(slices.Values(sg.A)), slices.Sorted(slices.Values(sg.B))}
	}
	for k, bb := range t.Backbones {
		sideA := backboneSide(t, k, nic)
		var a, b []int
		for r, h := range hosts {
			if sideA[index[h]] {
				a = append(a, r)
			} else {
				b = append(b, r)
			}
		}
		found := -1
		flip := false
		for i, sd := range sides {
			switch {
			case slices.Equal(sd[0], a) && slices.Equal(sd[1], b):
				found = i
			case slices.Equal(sd[0], b) && slices.Equal(sd[1], a):
				found, flip = i, true
			}
		}
		if found < 0 {
			c.Problems = append(c.Problems, fmt.Sprintf("no segment found between ranks %v and %v (backbone %s-%s)", a, b, bb.A, bb.B))
			continue
		}
		used[found] = true
		ab, ba := segs[found].AB, segs[found].BA
		if flip {
			ab, ba = ba, ab
		}
		want := bb.Rate * 1e6 / 8 * tcpCarries
		c.Segments = append(c.Segments,
			RateCheck{What: "segment " + bb.A + "->" + bb.B, Got: ab, Want: want},
			RateCheck{What: "segment " + bb.B + "->" + bb.A, Got: ba, Want: want})
	}
	for i, s := range segs {
		if !used[i] {
			c.Problems = append(c.Problems, fmt.Sprintf("a segment between %v and %v, where the topology has no backbone", s.A, s.B))
		}
	}
	return c
}

// backboneSide marks the hosts (by index) on backbone k's A side: those
// whose NIC nic is on a bridge that reaches bridge A without crossing k.
func backboneSide(t *netlab.Topology, k, nic int) []bool {
	adj := map[string][]string{}
	for i, bb := range t.Backbones {
		if i != k {
			adj[bb.A] = append(adj[bb.A], bb.B)
			adj[bb.B] = append(adj[bb.B], bb.A)
		}
	}
	seen := map[string]bool{t.Backbones[k].A: true}
	queue := []string{t.Backbones[k].A}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, y := range adj[x] {
			if !seen[y] {
				seen[y] = true
				queue = append(queue, y)
			}
		}
	}
	side := make([]bool, len(t.Hosts))
	for i, h := range t.Hosts {
		side[i] = nic < len(h.NICs) && seen[h.NICs[nic].Bridge]
	}
	return side
}

// Worst returns the rate (pair or segment) farthest from the shaping, and
// whether there is any.
func (c ModelCheck) Worst() (RateCheck, bool) {
	var w RateCheck
	ok := false
	for _, r := range slices.Concat(c.Pairs, c.Segments) {
		if !ok || r.Off() > w.Off() {
			w, ok = r, true
		}
	}
	return w, ok
}

// Outside returns the rates more than a factor off from the shaping
// (1.1: outside 10%).
func (c ModelCheck) Outside(factor float64) []RateCheck {
	var out []RateCheck
	for _, r := range slices.Concat(c.Pairs, c.Segments) {
		if r.Off() > factor {
			out = append(out, r)
		}
	}
	return out
}

// Within says whether the model has no problem and every rate within
// factor of the shaping.
func (c ModelCheck) Within(factor float64) bool {
	return len(c.Problems) == 0 && len(c.Outside(factor)) == 0
}

// Report prints the comparison: the problems, how many pairs and segments
// are within 10%, the worst of each, and every rate outside 10% (at most
// the first 20).
func (c ModelCheck) Report(w io.Writer) {
	for _, p := range c.Problems {
		fmt.Fprintf(w, "# check: PROBLEM: %s\n", p)
	}
	count := func(what string, rs []RateCheck) {
		if len(rs) == 0 {
			return
		}
		in, worst := 0, rs[0]
		for _, r := range rs {
			if r.Off() <= 1.1 {
				in++
			}
			if r.Off() > worst.Off() {
				worst = r
			}
		}
		fmt.Fprintf(w, "# check: %s within 10%% of the shaping: %d of %d; worst %s (%.2fx off)\n", what, in, len(rs), worst, worst.Off())
	}
	count("pairs", c.Pairs)
	count("segments", c.Segments)
	out := c.Outside(1.1)
	for i, r := range out {
		if i == 20 {
			fmt.Fprintf(w, "# check: ... and %d more outside 10%%\n", len(out)-20)
			break
		}
		fmt.Fprintf(w, "# check: outside 10%%: %s\n", r)
	}
}
