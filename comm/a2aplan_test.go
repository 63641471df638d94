package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

// testPlanner returns c's Alltoallv planner for algo (nil: none yet) and
// what it did.
func testPlanner(c *Comm, algo collective.Algorithm) (*a2aPlanner, collective.PlannerStats) {
	c.planMu.Lock()
	defer c.planMu.Unlock()
	p := c.a2a[algo]
	if p == nil {
		return nil, collective.PlannerStats{}
	}
	return p.planner, p.planner.Stats()
}

// TestAlltoallvPlanCache: repeated Alltoallv calls move the right bytes
// every time while their plans come from the communicator's planner: a
// repeat of recent sizes is a cache hit, a call with one size changed
// patches the last plan, and one with many changed is planned in full,
// on every rank alike (in an in-process world the ranks share the
// planner; over TCP each rank has its own). When one rank's planner has
// planned other calls than the others' (as after a call that failed on
// it before its planning), its size row says so and every rank starts
// again from an empty planner.
func TestAlltoallvPlanCache(t *testing.T) {
	const n = 5
	// Rank 0 sends the most, so that the patch (rank 3 sends rank 4
	// less) leaves the lower bound and the plan's ratio to it alone.
	sizes := map[string][][]int{}
	for _, name := range []string{"base", "few", "many"} {
		s := make([][]int, n)
		for i := range s {
			s[i] = make([]int, n)
			for j := range s[i] {
				s[i][j] = 4000 + 100*i + 10*j
				switch {
				case i == 0:
					s[i][j] = 40000
				case name == "many":
					s[i][j]++
				}
			}
		}
		if name == "few" {
			s[3][4] = 3000
		}
		sizes[name] = s
	}
	msg := func(src, dst, call, size int) []byte {
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(src*37 + dst*11 + call*5 + k)
		}
		return b
	}
	for _, tc := range []struct {
		transport string
		algo      collective.Algorithm
	}{
		{"mem", collective.OpenShop},
		{"mem", collective.Greedy},
		{"tcp", collective.OpenShop},
	} {
		t.Run(tc.transport+"/"+string(tc.algo), func(t *testing.T) {
			comms := startWorld(t, n, tc.transport, func(c *Config) { c.EagerLimit = 1024 })
			calls := 0
			run := func(seq ...string) {
				t.Helper()
				first := calls
				calls += len(seq)
				commtest.OnAll(t, comms, func(c *Comm) error {
					me := c.Rank()
					for k, name := range seq {
						call := first + k
						send := make([][]byte, n)
						for j := range send {
							send[j] = msg(me, j, call, sizes[name][me][j])
						}
						got, err := c.AlltoallvWith(context.Background(), send, AlltoallvOptions{Algorithm: tc.algo})
						if err != nil {
							return err
						}
						for i := range got {
							if want := msg(i, me, call, sizes[name][i][me]); string(got[i]) != string(want) {
								return fmt.Errorf("call %d (%s): the message from rank %d is wrong", call, name, i)
							}
						}
						if a := c.LastAlgorithm(); a != tc.algo {
							return fmt.Errorf("call %d ran %q", call, a)
						}
					}
					return nil
				})
			}
			check := func(want collective.PlannerStats) *a2aPlanner {
				t.Helper()
				first, _ := testPlanner(comms[0], tc.algo)
				for r, c := range comms {
					pl, got := testPlanner(c, tc.algo)
					require.Equal(t, want, got, "rank %d", r)
					if tc.transport == "mem" {
						require.Same(t, first, pl, "rank %d shares rank 0's planner", r)
					}
				}
				return first
			}

			run("base", "base", "few", "few", "base", "many")
			old := check(collective.PlannerStats{Hits: 3, Patches: 1, Plans: 2})

			comms[0].planMu.Lock()
			comms[0].a2a[tc.algo].digest++ // rank 0's planner planned other calls
			comms[0].planMu.Unlock()
			run("base", "base")
			require.NotSame(t, old, check(collective.PlannerStats{Hits: 1, Plans: 1}), "a new planner")
		})
	}
}
