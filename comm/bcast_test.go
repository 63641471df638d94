package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
)

// mixedModel is a switched network of n ranks with NICs from 20 to 400
// Mbit/s in an order that puts slow ranks where the binomial tree
// relays, so that the rate tree differs from it.
func mixedModel(n int) *collective.Model {
	mbit := 1e6 / 8
	nics := []float64{100, 50, 20, 100, 20, 200, 20, 400}
	m := collective.NewUniformModel(n, 100e-6, 1)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = mbit * min(nics[i%len(nics)], nics[j%len(nics)])
		}
	}
	return m
}

func TestBcastPlanned(t *testing.T) {
	const n = 8
	model := mixedModel(n)
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model = model })
	sizes := []int{0, 1, 8191, 8193, 100003, 1<<20 + 3}
	algos := []collective.Algorithm{collective.Auto, collective.BcastBinomial, collective.BcastPipeline}
	// The cases cover both trees and messages sent whole and in pieces.
	kinds := map[string]bool{}
	for _, algo := range algos {
		for _, size := range sizes {
			p, err := collective.PlanBcast(model, 0, int64(size), algo)
			require.NoError(t, err)
			kinds[fmt.Sprintf("%s/%v", p.Algorithm, p.Chunks > 1)] = true
		}
	}
	require.Len(t, kinds, 4, "plans made: %v", kinds)
	commtest.OnAll(t, comms, func(c *Comm) error {
		for _, algo := range algos {
			ctx := WithAlgorithm(context.Background(), algo)
			for _, size := range sizes {
				for root := 0; root < n; root++ {
					want := pattern(root, size, 3, size)
					var data []byte
					if c.Rank() == root {
						data = want
					}
					got, err := c.Bcast(ctx, root, data)
					if err != nil {
						return fmt.Errorf("%s, %d bytes from %d: %w", algo, size, root, err)
					}
					if !bytes.Equal(got, want) {
						return fmt.Errorf("%s, %d bytes from %d: wrong data", algo, size, root)
					}
				}
			}
		}
		// Into a caller's buffer, large enough or not.
		for _, capacity := range []int{10, 1 << 21} {
			buf := make([]byte, capacity)
			want := pattern(1, capacity, 4, 1<<20)
			var data []byte
			if c.Rank() == 1 {
				data = want
			}
			got, err := c.bcast(context.Background(), 1, data, buf)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("into a buffer of %d bytes: wrong data", capacity)
			}
			if c.Rank() != 1 && capacity >= len(want) && &got[0] != &buf[0] {
				return fmt.Errorf("a large enough buffer was not used")
			}
		}
		return nil
	})
}

func TestBcastAlgorithmMismatch(t *testing.T) {
	const n = 6
	model := mixedModel(n)
	bin, err := collective.PlanBcast(model, 0, 1<<20, collective.BcastBinomial)
	require.NoError(t, err)
	pipe, err := collective.PlanBcast(model, 0, 1<<20, collective.BcastPipeline)
	require.NoError(t, err)
	require.NotEqual(t, bin.Parent, pipe.Parent, "the test needs two different trees")
	comms := startWorld(t, n, "mem", func(c *Config) { c.Model = model })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		algo := collective.BcastPipeline
		if r%2 == 1 {
			algo = collective.BcastBinomial
		}
		var data []byte
		if r == 0 {
			data = make([]byte, 1<<20)
		}
		_, err := c.Bcast(WithAlgorithm(ctx, algo), 0, data)
		return err
	})
	require.NoError(t, ctx.Err(), "the ranks waited for the deadline: %v", errs)
	mismatch := false
	for _, err := range errs {
		mismatch = mismatch || errors.Is(err, ErrMismatch)
	}
	require.True(t, mismatch, "no rank reported the mismatch: %v", errs)
	// The communicator is broken on every rank that did not finish.
	for r, c := range comms {
		if errs[r] != nil {
			require.Error(t, c.Barrier(ctx), "rank %d", r)
		}
	}
}

func TestWithAlgorithm(t *testing.T) {
	ctx := WithAlgorithm(context.Background(), collective.BcastPipeline)
	require.Equal(t, collective.BcastPipeline, algorithmFor(ctx, "", collective.BcastBinomial, collective.BcastPipeline))
	// Another collective's algorithm is ignored.
	require.Equal(t, collective.AllreduceRSAG, algorithmFor(ctx, collective.AllreduceRSAG, collective.AllreduceTree, collective.AllreduceRSAG))
	require.Equal(t, collective.Auto, algorithmFor(WithAlgorithm(ctx, collective.Auto), collective.BcastBinomial, collective.BcastBinomial))
	require.Equal(t, collective.BcastBinomial, algorithmFor(context.Background(), collective.BcastBinomial))
	_, err := Config{Bcast: "ring"}.normalize()
	require.ErrorContains(t, err, `unknown Bcast algorithm "ring"`)
}

// TestMachines: ranks on one machine are one machine to the segment
// probe, over loopback sockets and in-process links alike, so that it
// does not mistake the machine's CPUs for a shared network segment.
func TestMachines(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		comms := startWorld(t, 4, tr, nil)
		hosts := comms[0].w.machines()
		require.Len(t, hosts, 4, tr)
		for _, h := range hosts {
			require.NotEmpty(t, h, tr)
			require.Equal(t, hosts[0], h, "%s: %v", tr, hosts)
		}
	}
}

// TestBcastRootMismatch: a rank that receives its first piece from a
// root other than the one it was told fails with ErrMismatch naming both,
// the communicator breaks on every rank, and none waits for ever. (Rank 1
// believes it is the root and broadcasts first, so that its pieces are
// the ones the others find.)
func TestBcastRootMismatch(t *testing.T) {
	const n = 4
	comms := startWorld(t, n, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, rogue := comms[1].Bcast(ctx, 1, []byte("hello")) // small: sent at once
	// Root 1's children (ranks 2 and 3) hold its pieces before anyone
	// else sends.
	require.Eventually(t, func() bool { return unexpectedLeft(comms[2]) == 1 && unexpectedLeft(comms[3]) == 1 }, 10*time.Second, time.Millisecond)
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		if r == 1 {
			return rogue
		}
		var data []byte
		if r == 0 {
			data = []byte("world")
		}
		_, err := c.Bcast(ctx, 0, data)
		return err
	})
	require.NoError(t, ctx.Err(), "the ranks waited for the deadline: %v", errs)
	found := false
	for _, err := range errs {
		if errors.Is(err, ErrMismatch) {
			found = true
			require.ErrorContains(t, err, "from root 1")
			require.ErrorContains(t, err, "expected root 0")
		}
	}
	require.True(t, found, "no rank saw the mismatch: %v", errs)
	// The communicator is broken everywhere: the next collective fails at
	// once on every rank instead of pairing with stray pieces.
	for r, c := range comms {
		require.ErrorIs(t, c.Barrier(ctx), ErrMismatch, "rank %d", r)
	}
}

// packedModel is a switch whose ranks receive at 100 MB/s and send at
// 50, except rank 0 at 100: no single tree from rank 0 gets near the
// bound, so Bcast packs several (collective.PlanBcast).
func packedModel(n int) *collective.Model {
	m := collective.NewUniformModel(n, 50e-6, 1)
	for i := 0; i < n; i++ {
		out := 50e6
		if i == 0 {
			out = 100e6
		}
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = min(out, 100e6)
		}
	}
	return m
}

// A packed Bcast delivers every byte whatever order its trees' pieces
// arrive in. The link from root to the first tree's relay is slowed, so
// that the others' pieces come before the first one everywhere else.
func TestBcastPacked(t *testing.T) {
	const n, size = 5, 1<<20 + 5
	model := packedModel(n)
	plan, err := collective.PlanBcast(model, 0, size, collective.Auto)
	require.NoError(t, err)
	require.Greater(t, plan.Trees(), 1, "the model must make Bcast pack trees")
	relay := plan.Children[0][0]
	netw := transport.NewMemNetwork(5)
	require.NoError(t, netw.SetShape(0, relay, transport.ShapeConfig{Delay: 30 * time.Millisecond}))
	worlds := [][]*Comm{startShaped(t, netw, model, nil)}
	// And over every socket transport (forced: on loopback Auto keeps the
	// binomial tree).
	for _, tr := range conformanceTransports[1:] {
		worlds = append(worlds, startWorld(t, n, tr, func(c *Config) { c.Model, c.Bcast = model, collective.BcastPipeline }))
	}
	commtest.OnAll(t, slices.Concat(worlds...), func(c *Comm) error {
		for it := 0; it < 3; it++ {
			for _, root := range []int{0, 2} {
				for _, sz := range []int{size, 300001} {
					want := pattern(root, sz, it, sz)
					var data []byte
					if c.Rank() == root {
						data = want
					}
					got, err := c.Bcast(context.Background(), root, data)
					if err != nil {
						return fmt.Errorf("%d bytes from %d: %w", sz, root, err)
					}
					if !bytes.Equal(got, want) {
						return fmt.Errorf("%d bytes from %d: wrong data", sz, root)
					}
				}
			}
		}
		return nil
	})
}
