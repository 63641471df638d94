package comm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/internal/commtest"
)

func TestReductionArguments(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	ctx := context.Background()
	c := comms[0]
	for name, call := range map[string]func() error{
		"counts length": func() error { _, err := ReduceScatter(ctx, c, []int{1, 2}, []int{2}, Sum); return err },
		"negative":      func() error { _, err := ReduceScatter(ctx, c, []int{1, 2}, []int{3, -1}, Sum); return err },
		"data length":   func() error { _, err := ReduceScatter(ctx, c, []int{1, 2}, []int{2, 1}, Sum); return err },
		"nil op":        func() error { _, err := ReduceScatter[int](ctx, c, []int{1, 2}, []int{1, 1}, nil); return err },
		"blocks":        func() error { _, err := ReduceScatterBlock(ctx, c, []int{1, 2, 3}, Sum); return err },
		"scan op":       func() error { _, err := Scan[int](ctx, c, []int{1}, nil); return err },
		"into length":   func() error { return AllreduceInto(ctx, c, []int{1, 2}, make([]int, 1), Sum) },
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(), ErrArgument)
		})
	}
	// The world is still usable: no rank started a collective.
	commtest.OnAll(t, comms, func(c *Comm) error { return c.Barrier(ctx) })
}

func TestReductionMismatch(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	ctx := context.Background()
	errs := make([]error, 3)
	done := make(chan int, 3)
	for r, c := range comms {
		go func() {
			_, errs[r] = Scan(ctx, c, make([]float64, 1+r%2), Sum)
			done <- r
		}()
	}
	for range comms {
		<-done
	}
	// Lengths that differ between ranks fail the call on every rank, also
	// on rank 2, which never meets rank 1 and would otherwise wait for a
	// rank that already gave up.
	for r, err := range errs {
		require.ErrorIs(t, err, ErrMismatch, "rank %d", r)
	}
}
