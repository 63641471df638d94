package comm

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
)

// The model says every link runs at 20 MB/s; the link 1->0 really runs at
// 5 MB/s. After a few exchanges every rank's model says so (the same on
// every rank), and the others are untouched.
func TestDriftUpdatesTheModel(t *testing.T) {
	const n = 3
	netw := memAt(t, 20e6)
	require.NoError(t, netw.SetShape(1, 0, transport.ShapeConfig{Rate: 5e6}))
	comms := startShaped(t, netw, collective.NewUniformModel(n, 1e-4, 20e6), nil)
	ctx := context.Background()
	for it := 0; it < 6; it++ {
		commtest.OnAll(t, comms, func(c *Comm) error {
			send := make([][]byte, n)
			for j := range send {
				send[j] = make([]byte, 512<<10)
			}
			_, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: collective.OpenShop})
			return err
		})
	}
	requireSlowLinkLearned(t, comms)
}

// requireSlowLinkLearned checks that every rank has the same model and
// that it learned that the link 1->0 runs at 5 MB/s. The other links may
// drift too on a loaded machine (they really run slower then); they never
// look slower than the slow one did.
func requireSlowLinkLearned(t *testing.T, comms []*Comm) {
	t.Helper()
	m0 := comms[0].Model()
	for r, c := range comms {
		require.Equal(t, m0, c.Model(), "rank %d has another model", r)
	}
	// One-sided below: a busy machine slows the emulated link's transfers
	// (it only ever reads slower); not learned, it would be 20 MB/s.
	require.LessOrEqual(t, m0.Bandwidth[1][0], 1.3*5e6, "the slow link was learned")
	require.GreaterOrEqual(t, m0.Bandwidth[1][0], 5e6/2, "the slow link was learned")
	n := len(comms)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && !(i == 1 && j == 0) {
				require.Greater(t, m0.Bandwidth[i][j], 1.5*m0.Bandwidth[1][0], "link %d->%d", i, j)
			}
		}
	}
}

func TestModelMismatchIsReported(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	comms[0].w.setModel(collective.NewUniformModel(2, 0, 1e6), nil)
	comms[1].w.setModel(collective.NewUniformModel(2, 0, 2e6), nil)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *Comm) {
			defer wg.Done()
			_, errs[r] = c.Alltoallv(context.Background(), [][]byte{{1}, {2}})
		}(r, c)
	}
	wg.Wait()
	require.ErrorIs(t, errs[0], ErrMismatch)
	require.ErrorContains(t, errs[0], "cost model")
	require.ErrorIs(t, errs[1], ErrMismatch)
}
