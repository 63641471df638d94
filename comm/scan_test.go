package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
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

func TestElementwiseOps(t *testing.T) {
	require.True(t, elementwise(Sum[float64]))
	require.True(t, elementwise(Max[int32]))
	require.True(t, elementwise(OpFunc(func(a, b int) int { return a ^ b })))
	require.False(t, elementwise(Op[int](digits)), "an op on (value, width) pairs must see whole vectors")
	require.False(t, elementwise(Op[float64](func(dst, src []float64) {})))
}

// TestAllreduceAlgorithms: both algorithms give the same result, forced
// by Config.Allreduce, on world sizes that do not divide the vector.
func TestAllreduceAlgorithms(t *testing.T) {
	for _, algo := range []collective.Algorithm{collective.AllreduceTree, collective.AllreduceRSAG} {
		t.Run(string(algo), func(t *testing.T) {
			comms := startWorld(t, 3, "mem", func(c *Config) { c.Allreduce = algo })
			commtest.OnAll(t, comms, func(c *Comm) error {
				vec := make([]float64, 10)
				for i := range vec {
					vec[i] = float64(c.Rank()*100 + i)
				}
				sum, err := Allreduce(context.Background(), c, vec, Sum)
				if err != nil {
					return err
				}
				for i, v := range sum {
					if v != float64(300+3*i) {
						return fmt.Errorf("%s: sum[%d] = %v", algo, i, v)
					}
				}
				pairs, err := Allreduce(context.Background(), c, []int{c.Rank(), 1, c.Rank(), 1}, digits)
				if err != nil {
					return err
				}
				if pairs[0] != 12 || pairs[1] != 3 || pairs[2] != 12 {
					return fmt.Errorf("%s: a pair op gave %v", algo, pairs)
				}
				return nil
			})
		})
	}
	_, err := Config{Allreduce: "ring"}.normalize()
	require.ErrorContains(t, err, `unknown Allreduce algorithm "ring"`)
}
