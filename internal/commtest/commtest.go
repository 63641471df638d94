// Package commtest starts worlds of in-process ranks for tests: comm's own
// tests (which cannot import a package that imports comm) and, through
// package worldtest, the tests of the packages built on comm. It knows
// nothing of comm itself: a test gives it the function that starts one
// rank.
package commtest

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
)

// Secret is the job secret of the worlds Start makes.
const Secret = "commtest secret of at least 32 bytes"

// Start starts n ranks at once, each with start(b), where b is that rank's
// bootstrap in an in-process world: the mem transport, a job of the
// test's own, Secret, a 20 s timeout (start may change any of it, the
// same way on every rank). It returns the ranks, and closes them all at
// once when the test ends (a world's Close waits for the others). It
// fails the test, naming the rank, if a rank cannot start.
func Start[R io.Closer](t testing.TB, n int, start func(b *bootstrap.Bootstrap) (R, error)) []R {
	t.Helper()
	job := fmt.Sprintf("commtest-%s-%d", t.Name(), time.Now().UnixNano())
	ranks := make([]R, n)
	started := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &bootstrap.Bootstrap{Rank: r, Size: n, Coord: "coord", Secret: []byte(Secret), Job: job, Transport: "mem", Timeout: 20 * time.Second}
			ranks[r], errs[r] = start(b)
			started[r] = errs[r] == nil
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for r, x := range ranks {
			if started[r] {
				wg.Add(1)
				go func() { defer wg.Done(); x.Close() }()
			}
		}
		wg.Wait()
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("commtest: rank %d: %v", r, err)
		}
	}
	return ranks
}

// Errors runs f on every rank at once, with the rank's index, and
// returns each rank's error.
func Errors[R any](ranks []R, f func(i int, x R) error) []error {
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, x := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i, x)
		}()
	}
	wg.Wait()
	return errs
}

// OnAll runs f on every rank at once and fails the test with every
// rank's error, naming the rank.
func OnAll[R any](t testing.TB, ranks []R, f func(R) error) {
	t.Helper()
	failed := false
	for i, err := range Errors(ranks, func(_ int, x R) error { return f(x) }) {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}
