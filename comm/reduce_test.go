package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

// TestReduceAlgorithms: Reduce along the tree and reduce-scattered then
// gathered, from every root, gives root the sum and the others nil.
func TestReduceAlgorithms(t *testing.T) {
	const n, elems = 5, 30001
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model = mixedModel(n) })
	for _, algo := range []collective.Algorithm{collective.Auto, collective.AllreduceTree, collective.AllreduceRSAG} {
		commtest.OnAll(t, comms, func(c *Comm) error {
			ctx := WithAlgorithm(context.Background(), algo)
			data := make([]int64, elems)
			for i := range data {
				data[i] = int64(c.Rank()*1000 + i)
			}
			for root := 0; root < n; root++ {
				got, err := Reduce(ctx, c, root, data, Sum[int64])
				if err != nil {
					return fmt.Errorf("%s, root %d: %w", algo, root, err)
				}
				if c.Rank() != root {
					if got != nil {
						return fmt.Errorf("%s: rank %d got a result from root %d", algo, c.Rank(), root)
					}
					continue
				}
				for i, v := range got {
					if want := int64(1000*n*(n-1)/2 + n*i); v != want {
						return fmt.Errorf("%s, root %d: element %d is %d, want %d", algo, root, i, v, want)
					}
				}
			}
			return nil
		})
	}
}

// TestAllreducePipelined runs the overlapped reduce-scatter and
// allgather with blocks of every shape (empty ones, fewer elements than
// pieces), in place and not, and through AllreduceInto on a model whose
// plan overlaps them.
func TestAllreducePipelined(t *testing.T) {
	const n = 4
	comms := startWorld(t, n, "mem", nil)
	check := func(c *Comm, got []int64, elems int) error {
		for i, v := range got {
			if want := int64(100*n*(n-1)/2 + n*i); v != want {
				return fmt.Errorf("rank %d, element %d of %d: %d, want %d", c.Rank(), i, elems, v, want)
			}
		}
		return nil
	}
	for _, tc := range []struct {
		counts []int
		segs   int
	}{
		{[]int{3, 3, 3, 3}, 1},
		{[]int{1000, 10, 0, 2000}, 4},
		{[]int{2, 0, 1, 5}, 8},
		{[]int{4096, 4096, 4096, 4096}, 16},
	} {
		commtest.OnAll(t, comms, func(c *Comm) error {
			elems := 0
			for _, k := range tc.counts {
				elems += k
			}
			data := make([]int64, elems)
			for i := range data {
				data[i] = int64(c.Rank()*100 + i)
			}
			out := make([]int64, elems)
			if err := allreducePipelined(context.Background(), c, data, out, Sum[int64], tc.counts, tc.segs); err != nil {
				return fmt.Errorf("%v in %d: %w", tc.counts, tc.segs, err)
			}
			if err := check(c, out, elems); err != nil {
				return err
			}
			// In place.
			if err := allreducePipelined(context.Background(), c, data, data, Sum[int64], tc.counts, tc.segs); err != nil {
				return err
			}
			return check(c, data, elems)
		})
	}
	// Through AllreduceInto, on a model that overlaps the rounds.
	m := collective.NewUniformModel(n, 1e-4, 1)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = 50e6
			if i == 1 || j == 2 {
				m.Bandwidth[i][j] = 2.5e6
			}
		}
	}
	const elems = 1 << 17
	plan := collective.PlanAllreduce(m, elems, 8, collective.Auto)
	if plan.Segments < 2 {
		t.Fatalf("the model does not overlap the rounds: %+v", plan)
	}
	comms = startWorld(t, n, "mem", func(c *Config) { c.Model = m })
	commtest.OnAll(t, comms, func(c *Comm) error {
		data := make([]int64, elems)
		for i := range data {
			data[i] = int64(c.Rank()*100 + i)
		}
		got, err := Allreduce(context.Background(), c, data, Sum[int64])
		if err != nil {
			return err
		}
		return check(c, got, elems)
	})
}
