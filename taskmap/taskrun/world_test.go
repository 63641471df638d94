package taskrun

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/transport"
	"github.com/stretchr/testify/require"
)

// startWorld starts n ranks in this process over comm's in-memory
// network and returns their world communicators.
func startWorld(t testing.TB, n int) []*comm.Comm {
	t.Helper()
	netw := transport.NewMemNetwork(1)
	job := fmt.Sprintf("taskrun-%s-%d", t.Name(), time.Now().UnixNano())
	comms := make([]*comm.Comm, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = comm.Init(ctx, &comm.Config{
				Bootstrap: &comm.Bootstrap{Rank: r, Size: n, Coord: "coord", Secret: []byte("taskrun test secret, 32 bytes+"), Job: job, Transport: "mem", Timeout: 20 * time.Second},
				Network:   netw,
			})
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Add(1)
			go func(c *comm.Comm) { defer wg.Done(); c.Close() }(c)
		}
		wg.Wait()
	})
	return comms
}

// onAll runs f on every rank at once and returns the results.
func onAll[T any](comms []*comm.Comm, f func(c *comm.Comm) (T, error)) ([]T, []error) {
	out := make([]T, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *comm.Comm) {
			defer wg.Done()
			out[r], errs[r] = f(c)
		}(r, c)
	}
	wg.Wait()
	return out, errs
}
