package comm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/stretchr/testify/require"
)

// sharedPlanRuns numbers TestSharedPlan's runs in this process.
var sharedPlanRuns atomic.Int32

// The ranks of an in-process world plan once and share the plan; ranks in
// processes of their own (here: over TCP) each plan for themselves.
func TestSharedPlan(t *testing.T) {
	// No other test's plans, nor this test's from an earlier run in this
	// process (-count).
	key := fmt.Sprintf("%s-%d", t.Name(), sharedPlanRuns.Add(1))
	var builds atomic.Int32
	build := func() (*int, error) {
		builds.Add(1)
		v := 42
		return &v, nil
	}
	comms := startWorld(t, 4, "mem", nil)
	got := make([]*int, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], _ = sharedPlan(c, "test", key, build)
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, builds.Load(), "one rank planned")
	for r := range got {
		require.Same(t, got[0], got[r], "rank %d shares the plan", r)
	}
	// Another key, another kind, or another type is another plan.
	_, _ = sharedPlan(comms[0], "test", key+"-other", build)
	_, _ = sharedPlan(comms[0], "other", key, build)
	_, _ = sharedPlan(comms[0], "test", key, func() (int, error) { builds.Add(1); return 7, nil })
	require.EqualValues(t, 4, builds.Load())
	// A sub-communicator's ranks are other ranks of the world.
	sub := commtest.Errors(comms, func(r int, c *Comm) error {
		s, err := c.Split(t.Context(), r%2, r)
		if err == nil {
			_, err = sharedPlan(s, "test", key, build)
		}
		return err
	})
	for _, err := range sub {
		require.NoError(t, err)
	}
	require.EqualValues(t, 6, builds.Load(), "one plan per sub-communicator")
	// Errors are not kept.
	_, err := sharedPlan(comms[0], "test", key+"-err", func() (*int, error) { builds.Add(1); return nil, ErrArgument })
	require.ErrorIs(t, err, ErrArgument)
	_, _ = sharedPlan(comms[0], "test", key+"-err", build)
	require.EqualValues(t, 8, builds.Load())

	tcp := startWorld(t, 2, "tcp", nil)
	for _, c := range tcp {
		_, _ = sharedPlan(c, "test", key, build)
	}
	require.EqualValues(t, 10, builds.Load(), "each TCP rank plans")
}
