package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/stretchr/testify/require"
)

// Mismatches in which every rank waits for a message that no rank sends
// (see stall.go): the ranks that wait ask the others which call they are
// in, and every rank fails with ErrMismatch naming the rank that differs,
// long before the op timeout (which fails the test: it is only a safety
// net).
func TestStallMismatch(t *testing.T) {
	const n = 4
	worlds := startWorld(t, n, "mem", func(cfg *Config) { cfg.OpTimeout = time.Minute })
	cases := []struct {
		name string
		odd  int
		call func(ctx context.Context, c *Comm, odd bool) error
	}{
		// Rank 0 believes rank 2 is the root, rank 2 (like the others)
		// that rank 0 is: each waits for the other.
		{"bcast-roots", 0, func(ctx context.Context, c *Comm, odd bool) error {
			root := 0
			if odd {
				root = 2
			}
			var data []byte
			if c.Rank() == root {
				data = []byte("payload")
			}
			_, err := c.Bcast(ctx, root, data)
			return err
		}},
		// Ranks 0 and 1 both believe they are the root of a Gather.
		{"gather-two-roots", 1, func(ctx context.Context, c *Comm, odd bool) error {
			root := 0
			if odd {
				root = 1
			}
			_, err := c.Gather(ctx, root, []byte{byte(c.Rank())})
			return err
		}},
		{"reduce-two-roots", 3, func(ctx context.Context, c *Comm, odd bool) error {
			root := 0
			if odd {
				root = 3
			}
			_, err := Reduce(ctx, c, root, []float64{1, 2, 3}, Sum[float64])
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comms := dupAll(t, worlds)
			start := time.Now()
			errs := commtest.Errors(comms, func(r int, c *Comm) error {
				err := tc.call(context.Background(), c, r == tc.odd)
				if err == nil {
					// A rank whose part needs nothing back (a Gather or
					// Reduce sender) may return nil (see ErrMismatch);
					// its communicator must then break.
					select {
					case <-c.broken:
						err = c.brokenErr()
					case <-time.After(30 * time.Second):
						err = errors.New("the communicator did not break")
					}
				}
				return err
			})
			took := time.Since(start)
			for r, err := range errs {
				switch {
				case err == nil:
					t.Errorf("rank %d: no error", r)
				case errors.Is(err, context.DeadlineExceeded):
					t.Errorf("rank %d waited for the op timeout: %v", r, err)
				case !errors.Is(err, ErrMismatch):
					t.Errorf("rank %d: not ErrMismatch: %v", r, err)
				case !strings.Contains(err.Error(), fmt.Sprintf("rank %d", tc.odd)):
					t.Errorf("rank %d: the error does not name rank %d: %v", r, tc.odd, err)
				}
			}
			t.Logf("%s: every rank failed after %v: %v", tc.name, took.Round(time.Millisecond), errs[0])
		})
	}
}

// A call that waits long for a rank that is late, not wrong, is left
// alone: the root of a Bcast and of a Gather comes 2.5 s after the
// others (past two rounds of questions), and every call succeeds.
func TestStallLateRank(t *testing.T) {
	const n = 4
	worlds := startWorld(t, n, "mem", func(cfg *Config) { cfg.OpTimeout = time.Minute })
	comms := dupAll(t, worlds)
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		ctx := context.Background()
		if r == 0 {
			time.Sleep(2500 * time.Millisecond)
		}
		var data []byte
		if r == 0 {
			data = []byte("late root")
		}
		got, err := c.Bcast(ctx, 0, data)
		if err != nil {
			return err
		}
		if string(got) != "late root" {
			return fmt.Errorf("rank %d got %q", r, got)
		}
		if r == 0 {
			time.Sleep(2500 * time.Millisecond)
		}
		rows, err := c.Gather(ctx, 0, []byte{byte(r)})
		if err != nil {
			return err
		}
		if r == 0 && len(rows) != n {
			return fmt.Errorf("gathered %d rows", len(rows))
		}
		return c.Barrier(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// dupAll gives every rank a fresh communicator, closed at the end.
func dupAll(t *testing.T, worlds []*Comm) []*Comm {
	t.Helper()
	comms := make([]*Comm, len(worlds))
	errs := commtest.Errors(worlds, func(r int, w *Comm) error {
		var err error
		comms[r], err = w.Dup(context.Background())
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Dup: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// Without the call notices the same deadlock ends only at the op
// timeout: the notices, not some message, found it above.
func TestStallMismatchNeedsNotices(t *testing.T) {
	const n = 4
	worlds := startWorld(t, n, "mem", func(cfg *Config) { cfg.OpTimeout, cfg.noCallNotices = 2*time.Second, true })
	comms := dupAll(t, worlds)
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		root := 0
		if r == 0 {
			root = 2
		}
		_, err := c.Bcast(context.Background(), root, []byte("payload"))
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: %v, want the op timeout", r, err)
		}
	}
}

// A rank whose call waits asks only the ranks it waits for: in a Bcast
// whose root is late, every other rank waits for a message from its
// parent, which the root decides: it asks the root alone, not the eight
// members.
func TestStallAsksOnlyAwaited(t *testing.T) {
	const n = 8
	worlds := startWorld(t, n, "mem", func(cfg *Config) { cfg.OpTimeout = time.Minute })
	comms := dupAll(t, worlds)
	ctx := context.Background()
	done := make(chan error, n)
	for r := 1; r < n; r++ {
		go func() {
			got, err := comms[r].Bcast(ctx, 0, nil)
			if err == nil && string(got) != "late root" {
				err = fmt.Errorf("rank %d got %q", r, got)
			}
			done <- err
		}()
	}
	for r := 1; r < n; r++ {
		c := comms[r]
		var to []int
		require.Eventually(t, func() bool {
			tag := int32(c.collSeq.Load() & 0x7fffffff)
			if op := c.running.Load(); op == 0 || !c.isRunning(tag, uint16(op)) {
				return false
			}
			to = c.waitingOn(tag, 0)
			return len(to) < n
		}, 10*time.Second, time.Millisecond, "rank %d", r)
		require.Equal(t, []int{c.group[0]}, to, "rank %d", r)
	}
	_, err := comms[0].Bcast(ctx, 0, []byte("late root"))
	require.NoError(t, err)
	for r := 1; r < n; r++ {
		require.NoError(t, <-done)
	}
}
