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
