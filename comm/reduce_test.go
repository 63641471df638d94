package comm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/stretchr/testify/require"
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

// TestReduceTree: Reduce with Sum, Min and Max goes up the tree
// collective.PlanReduce plans (whole or in pieces, from every root) and
// gives root the exact result; an op not known to be commutative keeps
// the binomial tree in rank order.
func TestReduceTree(t *testing.T) {
	const n = 6
	model := mixedModel(n)
	// A rank that fails leaves the others waiting: the op timeout makes
	// them fail too, so that OnAll reports every rank's error.
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model, c.OpTimeout = model, 30*time.Second })
	for _, elems := range []int{0, 1, 3000, 70001} {
		p, err := reducePlan(context.Background(), comms[0], 2, elems, 8, Sum[int64])
		require.NoError(t, err)
		require.NotNil(t, p, "Sum is planned")
		if elems == 70001 {
			require.Greater(t, p.Chunks, 1, "a large vector goes in pieces")
		}
		p, err = reducePlan(context.Background(), comms[0], 2, elems, 8, OpFunc(func(a, b int64) int64 { return a - b }))
		require.NoError(t, err)
		require.Nil(t, p, "a user's op keeps rank order")
	}
	commtest.OnAll(t, comms, func(c *Comm) error {
		ctx := WithAlgorithm(context.Background(), collective.AllreduceTree)
		for _, elems := range []int{0, 1, 3000, 70001} {
			data := make([]int64, elems)
			for i := range data {
				data[i] = int64((c.Rank()+1)*7919+i) % 1000
			}
			for root := 0; root < n; root++ {
				for _, o := range []struct {
					name string
					op   Op[int64]
				}{{"sum", Sum[int64]}, {"min", Min[int64]}, {"max", Max[int64]}} {
					name, op := o.name, o.op
					got, err := Reduce(ctx, c, root, data, op)
					if err != nil {
						return fmt.Errorf("%s of %d from root %d: %w", name, elems, root, err)
					}
					if c.Rank() != root {
						if got != nil {
							return fmt.Errorf("rank %d got a result", c.Rank())
						}
						continue
					}
					if len(got) != elems {
						return fmt.Errorf("%s: %d elements, want %d", name, len(got), elems)
					}
					for i, v := range got {
						want := int64((1*7919 + i) % 1000)
						for r := 1; r < n; r++ {
							x := int64(((r+1)*7919 + i) % 1000)
							switch name {
							case "sum":
								want += x
							case "min":
								want = min(want, x)
							case "max":
								want = max(want, x)
							}
						}
						if v != want {
							return fmt.Errorf("%s of %d from root %d: element %d is %d, want %d", name, elems, root, i, v, want)
						}
					}
				}
			}
		}
		return nil
	})
}

// TestReduceTreeMismatch: ranks that pass vectors of different lengths
// to a planned Reduce fail on every rank with ErrMismatch (whichever rank
// finds it), and none waits for ever.
func TestReduceTreeMismatch(t *testing.T) {
	const n = 5
	for _, lens := range [][2]int{{10, 11}, {9000, 12000}} {
		comms := startWorld(t, n, "mem", func(c *Config) { c.Model = mixedModel(n) })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		errs := commtest.Errors(comms, func(r int, c *Comm) error {
			elems := lens[0]
			if r == 3 {
				elems = lens[1]
			}
			_, err := Reduce(WithAlgorithm(ctx, collective.AllreduceTree), c, 0, make([]float64, elems), Sum[float64])
			if err == nil {
				// A rank that finished its part finds out at the next call.
				err = c.Barrier(ctx)
			}
			return err
		})
		require.NoError(t, ctx.Err(), "lengths %v: the ranks waited for the deadline: %v", lens, errs)
		cancel()
		for r, err := range errs {
			require.ErrorIs(t, err, ErrMismatch, "lengths %v, rank %d", lens, r)
		}
	}
}
