// Package commtest starts worlds of in-process ranks for the tests of the
// packages built on comm.
package commtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/transport"
)

// Secret is the job secret of the worlds Start makes.
const Secret = "commtest secret of at least 32 bytes"

// Start starts n ranks in this process over netw (a fresh in-memory
// network when nil) and returns their world communicators, closed when
// the test ends. Each rank's config has the bootstrap filled in (mem
// transport, a job of its own, a 20 s timeout) and then goes through tweak,
// if set, which may change anything (a nil Network and a tcp transport with
// a Coord run the ranks over real sockets). It fails the test, naming the rank, if a rank cannot start.
func Start(t testing.TB, n int, netw transport.Network, tweak func(rank int, c *comm.Config)) []*comm.Comm {
	t.Helper()
	if netw == nil {
		netw = transport.NewMemNetwork(1)
	}
	job := fmt.Sprintf("commtest-%s-%d", t.Name(), time.Now().UnixNano())
	comms := make([]*comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			cfg := &comm.Config{
				Bootstrap: &bootstrap.Bootstrap{Rank: r, Size: n, Coord: "coord", Secret: []byte(Secret), Job: job, Transport: "mem", Timeout: 20 * time.Second},
				Network:   netw,
			}
			if tweak != nil {
				tweak(r, cfg)
			}
			comms[r], errs[r] = comm.Init(context.Background(), cfg)
		}(r)
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(comms) })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("commtest: rank %d: %v", r, err)
		}
	}
	return comms
}

// closeAll closes every started communicator at once (Close of the world
// waits for the others).
func closeAll(comms []*comm.Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func(c *comm.Comm) { defer wg.Done(); c.Close() }(c)
	}
	wg.Wait()
}
