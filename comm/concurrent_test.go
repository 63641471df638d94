package comm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentCollectives: a collective called while another runs on
// the same communicator (here a Barrier that waits for rank 1) fails at
// once with ErrConcurrent, and breaks the communicator on every rank: the
// waiting call and the other ranks' calls fail with ErrConcurrent too,
// instead of pairing with another goroutine's call. Other communicators
// (a Dup) are not affected.
func TestConcurrentCollectives(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	ctx := context.Background()
	dups := make([]*Comm, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			dups[r], err = c.Dup(ctx)
			require.NoError(t, err)
		}()
	}
	wg.Wait()

	waiting := make(chan error, 1)
	go func() { waiting <- comms[0].Barrier(ctx) }()
	// Rank 0's Barrier waits for rank 1, which has not called it yet.
	require.Eventually(t, func() bool { return comms[0].running.Load() != 0 }, 10*time.Second, time.Millisecond)

	_, err := comms[0].Alltoallv(ctx, [][]byte{{1}, {2}})
	require.ErrorIs(t, err, ErrConcurrent)
	require.ErrorContains(t, err, "Alltoallv while Barrier ran")
	require.ErrorIs(t, <-waiting, ErrConcurrent, "the running call fails too")
	// Every rank's communicator breaks (the notice is asynchronous).
	require.Eventually(t, func() bool { return comms[1].brokenErr() != nil }, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, comms[1].Barrier(ctx), ErrConcurrent, "and so do the other ranks' calls")

	// The Dup is another communicator: it still works.
	for _, d := range dups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, d.Barrier(ctx))
		}()
	}
	wg.Wait()
}

// TestCollectivesFromTwoGoroutinesInTurn: collectives from several
// goroutines are fine as long as they do not overlap.
func TestCollectivesFromTwoGoroutinesInTurn(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	for range 3 {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				require.NoError(t, c.Barrier(context.Background()))
			}()
		}
		wg.Wait()
	}
}

// TestOpTimeout: a collective that a rank never joins fails on the others
// once Config.OpTimeout (here from the bootstrap, as HETCOMM_OP_TIMEOUT
// sets it) has passed, with an error that wraps DeadlineExceeded and names
// the rank waited for.
func TestOpTimeout(t *testing.T) {
	comms := startWorld(t, 3, "mem", func(c *Config) { c.Bootstrap.OpTimeout = 200 * time.Millisecond })
	errs := make(chan error, 2)
	for _, c := range comms[:2] {
		go func() { errs <- c.Barrier(context.Background()) }()
	}
	for range 2 {
		err := <-errs
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Regexp(t, `rank \d`, err.Error())
	}
}

// TestPanicTellsThePeers: a rank whose goroutine panics with its world
// communicator's Close deferred tells the others that it failed, and why,
// instead of closing gracefully: their calls fail with a RankError naming
// it and the panic. The panic goes on after Close.
func TestPanicTellsThePeers(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		defer comms[1].Close()
		panic("boom in rank 1")
	}()
	require.Equal(t, "boom in rank 1", <-recovered, "Close lets the panic go on")
	for _, r := range []int{0, 2} {
		err := comms[r].Barrier(context.Background())
		var re *RankError
		require.ErrorAs(t, err, &re, "rank %d", r)
		require.Equal(t, 1, re.Rank, "%v", err)
		require.ErrorIs(t, err, ErrRankFailed)
		require.ErrorContains(t, err, "panicked: boom in rank 1")
		require.NotContains(t, err.Error(), "closed its communicator")
	}
}
