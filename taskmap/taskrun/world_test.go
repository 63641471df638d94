package taskrun

import (
	"sync"
	"testing"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/worldtest"
)

// startWorld starts n ranks in this process over comm's in-memory
// network and returns their world communicators.
func startWorld(t testing.TB, n int) []*comm.Comm {
	t.Helper()
	return worldtest.Start(t, n, nil, nil)
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
