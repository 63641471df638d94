package comm

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

func TestRedistribute(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			comms := startWorld(t, 7, tr, nil)
			ctx := context.Background()
			senders, receivers := []int{0, 2, 4}, []int{1, 3, 5} // rank 6 takes no part
			size := func(s, r int) int {
				if (s+r)%4 == 3 {
					return 0 // some pairs have nothing to move
				}
				return 1000 + 300000*((s*7+r*3)%5)
			}
			for _, algo := range append(collective.Algorithms(collective.KindRedistribute), collective.Paced) {
				for _, barrier := range []bool{false, true} {
					for _, k := range []int{1, 2, 3} {
						name := fmt.Sprintf("%s/barrier=%v/k=%d", algo, barrier, k)
						commtest.OnAll(t, comms, func(c *Comm) error {
							var send [][]byte
							for i, s := range senders {
								if s == c.Rank() {
									for j := range receivers {
										send = append(send, pattern(i, j, 13, size(i, j)))
									}
								}
							}
							o := RedistributeOptions{Algorithm: algo, PerPair: !barrier, K: k}
							for j, r := range receivers {
								if r == c.Rank() && k == 2 {
									// Receive buffers: large enough for even
									// senders, too small (so unused) for odd.
									o.Recv = make([][]byte, len(senders))
									for i := range senders {
										o.Recv[i] = make([]byte, 7, 7+(1-i%2)*size(i, j))
									}
								}
							}
							out, err := c.Redistribute(ctx, senders, receivers, send, o)
							if err != nil {
								return fmt.Errorf("%s: %w", name, err)
							}
							for j, r := range receivers {
								if r != c.Rank() {
									continue
								}
								for i := range senders {
									if !bytes.Equal(out[i], pattern(i, j, 13, size(i, j))) {
										return fmt.Errorf("%s: data from sender %d wrong (%d bytes)", name, i, len(out[i]))
									}
									if o.Recv != nil && len(out[i]) > 0 && (&out[i][0] == &o.Recv[i][:1][0]) != (i%2 == 0) {
										return fmt.Errorf("%s: data from sender %d: the receive buffer was used %v, want %v", name, i, i%2 != 0, i%2 == 0)
									}
								}
								return nil
							}
							if out != nil {
								return fmt.Errorf("%s: a non-receiver got data", name)
							}
							return nil
						})
					}
				}
			}
		})
	}
}

func TestRedistributeErrors(t *testing.T) {
	comms := startWorld(t, 4, "mem", nil)
	c := comms[0]
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"empty group": func() error { _, err := c.Redistribute(ctx, nil, []int{1}, nil, RedistributeOptions{}); return err },
		"out of range": func() error {
			_, err := c.Redistribute(ctx, []int{9}, []int{1}, nil, RedistributeOptions{})
			return err
		},
		"both sides": func() error {
			_, err := c.Redistribute(ctx, []int{0, 1}, []int{1}, nil, RedistributeOptions{})
			return err
		},
		"twice": func() error {
			_, err := c.Redistribute(ctx, []int{0, 0}, []int{1}, nil, RedistributeOptions{})
			return err
		},
		"receive buffers": func() error {
			_, err := c.Redistribute(ctx, []int{1}, []int{0}, nil, RedistributeOptions{Recv: make([][]byte, 3)})
			return err
		},
		"buffers": func() error {
			_, err := c.Redistribute(ctx, []int{0}, []int{1, 2}, make([][]byte, 1), RedistributeOptions{})
			return err
		},
		"algorithm": func() error {
			_, err := c.Redistribute(ctx, []int{0}, []int{1}, make([][]byte, 1), RedistributeOptions{Algorithm: collective.OpenShop})
			return err
		},
		"negative k": func() error {
			_, err := c.Redistribute(ctx, []int{0}, []int{1}, make([][]byte, 1), RedistributeOptions{K: -1})
			return err
		},
	} {
		require.ErrorIs(t, call(), ErrArgument, name)
	}
}

// TestBackboneKRemembered: the k ProbeBackbone measures is the one
// Redistribute and PlanRedistribution use when K is left at 0.
func TestBackboneKRemembered(t *testing.T) {
	comms := startWorld(t, 4, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	senders, receivers := []int{0, 1}, []int{2, 3}
	k, measured := comms[0].BackboneK(senders, receivers)
	require.False(t, measured)
	require.Equal(t, 2, k)
	ks := make([]int, 4)
	commtest.OnAll(t, comms, func(c *Comm) error {
		var err error
		ks[c.Rank()], _, err = c.ProbeBackbone(ctx, senders, receivers)
		return err
	})
	for r, c := range comms {
		k, measured := c.BackboneK(senders, receivers)
		require.True(t, measured, "rank %d", r)
		require.Equal(t, ks[0], k, "rank %d", r)
		require.Equal(t, ks[0], ks[r], "every rank measures the same k")
	}
	require.True(t, ks[0] >= 1 && ks[0] <= 2, "k = %d", ks[0])
}
