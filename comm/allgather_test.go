package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

func TestAllgatherAlgorithms(t *testing.T) {
	const n = 5
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model = mixedModel(n) })
	for _, algo := range []collective.Algorithm{collective.Auto, collective.AllgatherRing, collective.AllgatherMesh} {
		commtest.OnAll(t, comms, func(c *Comm) error {
			ctx := WithAlgorithm(context.Background(), algo)
			for _, size := range []int{0, 7, 100 << 10} {
				mine := pattern(c.Rank(), size, 5, size)
				got, err := c.Allgather(ctx, mine)
				if err != nil {
					return fmt.Errorf("%s, %d bytes: %w", algo, size, err)
				}
				for r := range got {
					if !bytes.Equal(got[r], pattern(r, size, 5, size)) {
						return fmt.Errorf("%s, %d bytes: wrong block from rank %d", algo, size, r)
					}
				}
				// Allgatherv: every rank its own size.
				mine = pattern(c.Rank(), size, 6, size+1000*c.Rank())
				got, err = c.Allgatherv(ctx, mine)
				if err != nil {
					return fmt.Errorf("%s, Allgatherv: %w", algo, err)
				}
				for r := range got {
					if !bytes.Equal(got[r], pattern(r, size, 6, size+1000*r)) {
						return fmt.Errorf("%s, Allgatherv: wrong block from rank %d", algo, r)
					}
				}
			}
			return nil
		})
	}
}

// TestAllgatherMismatch: ranks that pass different sizes to Allgather
// may plan different algorithms; every rank fails with ErrMismatch, and
// none waits for a block that will not come.
func TestAllgatherMismatch(t *testing.T) {
	const n = 4
	comms := startWorld(t, n, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		size := 10
		if r == 2 {
			size = 4 << 20 // large enough for another plan
		}
		_, err := c.Allgather(ctx, make([]byte, size))
		return err
	})
	require.NoError(t, ctx.Err(), "the ranks waited for the deadline: %v", errs)
	for r, err := range errs {
		require.True(t, errors.Is(err, ErrMismatch), "rank %d: %v", r, err)
	}
}

// TestPacedMeshes: on a model slow enough for pacing to pay, the
// reduce-scatter's exchange and the mesh Allgather run paced, and their
// results are right.
func TestPacedMeshes(t *testing.T) {
	const n, count = 4, 12500 // 100 KB blocks at 10 MB/s: a 30 ms exchange
	model := collective.NewUniformModel(n, 1e-4, 1e7)
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model = model })
	commtest.OnAll(t, comms, func(c *Comm) error {
		plan, err := c.ReduceScatterPlan([]int{count, count, count, count}, 8)
		if err != nil {
			return err
		}
		rates := c.pacingRates(plan)
		if plan.Algorithm != collective.Paced || len(rates) != n || rates[(c.Rank()+1)%n] <= 0 {
			return fmt.Errorf("the exchange is not paced: rates %v", rates)
		}
		data := make([]float64, n*count)
		for i := range data {
			data[i] = float64(c.Rank()*7 + i%13)
		}
		got, err := ReduceScatterBlock(context.Background(), c, data, Sum[float64])
		if err != nil {
			return err
		}
		for i, v := range got {
			want := 0.0
			for r := 0; r < n; r++ {
				want += float64(r*7 + (c.Rank()*count+i)%13)
			}
			if v != want {
				return fmt.Errorf("element %d: %v, want %v", i, v, want)
			}
		}
		blocks, err := c.Allgather(WithAlgorithm(context.Background(), collective.AllgatherMesh), pattern(c.Rank(), 0, 9, 8*count))
		if err != nil {
			return err
		}
		for r, b := range blocks {
			if !bytes.Equal(b, pattern(r, 0, 9, 8*count)) {
				return fmt.Errorf("wrong block from rank %d", r)
			}
		}
		return nil
	})
}
