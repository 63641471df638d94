package comm

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentRunningCallRefusesWhatCame: a collective that is running
// when a second one is called on its communicator takes nothing more,
// even what had already arrived for it: the ranks may have paired the
// two goroutines' calls differently, so it may be the other call's.
//
// Rank 0's Alltoallv (goroutine X) is held at its first wait while rank
// 1's Alltoallv (another goroutine's, Y) sends it all it needs (the
// blocks are small and ride with the sizes). Then another collective on
// rank 0 finds X running. X must fail with ErrConcurrent, not return Y's
// blocks as X's. (Before the fix, a wait whose message was already there
// returned it, whatever had broken the communicator meanwhile.)
func TestConcurrentRunningCallRefusesWhatCame(t *testing.T) {
	for it := range 20 {
		comms := startWorld(t, 2, "mem", nil)
		ctx := context.Background()
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		hook := func(c *Comm) {
			if c == comms[0] {
				once.Do(func() { close(held) })
				<-release
			}
		}
		awaitHook.Store(&hook)
		t.Cleanup(func() { awaitHook.Store(nil) })

		x := make(chan error, 1)
		var got [][]byte
		go func() {
			var err error
			got, err = comms[0].Alltoallv(ctx, [][]byte{[]byte("x0"), []byte("x to 1")})
			x <- err
		}()
		<-held
		// Y, on rank 1, completes with what X sent before it was held (X's
		// blocks went out before any rank could see two calls: see
		// ErrConcurrent), or fails once rank 0's notice comes.
		y := make(chan error, 1)
		go func() {
			recv, err := comms[1].Alltoallv(ctx, [][]byte{[]byte("y to 0"), []byte("y1")})
			if err == nil && !bytes.Equal(recv[0], []byte("x to 1")) {
				err = errors.New("rank 1 received something no one sent it")
			}
			y <- err
		}()
		// Y's blocks have reached rank 0 (queued for X's receive) once Y
		// returned: its head carried them, and it needs nothing more.
		require.NoError(t, <-y, "iteration %d", it)

		_, err := comms[0].Allgather(ctx, []byte("z"))
		require.ErrorIs(t, err, ErrConcurrent)
		close(release)
		select {
		case err := <-x:
			require.ErrorIs(t, err, ErrConcurrent, "iteration %d: the running call returned %q", it, got)
		case <-time.After(time.Minute):
			t.Fatal("the running call did not return")
		}
		awaitHook.Store(nil)
	}
}
