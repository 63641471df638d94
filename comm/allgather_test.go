package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := 10
			if r == 2 {
				size = 4 << 20 // large enough for another plan
			}
			_, errs[r] = c.Allgather(ctx, make([]byte, size))
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "the ranks waited for the deadline: %v", errs)
	for r, err := range errs {
		require.True(t, errors.Is(err, ErrMismatch), "rank %d: %v", r, err)
	}
}
