package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
)

// unexpectedLeft counts the messages queued on c's collective context that
// no receive took.
func unexpectedLeft(c *Comm) int {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return len(c.w.queue(collCtx(c.id)).unexpected)
}

// TestAlltoallvSendsEachMessageOnce: a message that rode inline with the
// sizes must not be sent again by the executor (naive used to, leaving an
// unmatched copy queued on the receiver for every exchange).
func TestAlltoallvSendsEachMessageOnce(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	ctx := context.Background()
	for _, algo := range []collective.Algorithm{Naive, collective.OpenShop} {
		for _, size := range []int{10, DefaultEagerLimit, DefaultEagerLimit + 1} {
			onAll(t, comms, func(c *Comm) error {
				send := make([][]byte, 3)
				for j := range send {
					send[j] = make([]byte, size)
				}
				for it := 0; it < 3; it++ {
					if _, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: algo}); err != nil {
						return err
					}
				}
				return c.Barrier(ctx)
			})
			for r, c := range comms {
				require.Zero(t, unexpectedLeft(c), "rank %d, %s, %d bytes: messages nobody received", r, algo, size)
			}
		}
	}
}

// TestAlltoallvRecycledBuffers: received payloads go back to the pool once
// copied into the caller's buffers. Results handed out without a buffer
// must survive later exchanges untouched, and every byte must be right
// while buffers are recycled.
func TestAlltoallvRecycledBuffers(t *testing.T) {
	const n = 3
	comms := startWorld(t, n, "tcp", nil)
	ctx := context.Background()
	fill := func(src, dst, it, size int) []byte {
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(src*31 + dst*7 + it*13 + k)
		}
		return b
	}
	onAll(t, comms, func(c *Comm) error {
		me := c.Rank()
		bufs := make([][]byte, n)
		var kept [][][]byte // results received without buffers, checked at the end
		for it := 0; it < 12; it++ {
			size := []int{5000, 9000, 40000, DefaultEagerLimit}[it%4]
			send := make([][]byte, n)
			for j := range send {
				send[j] = fill(me, j, it, size)
			}
			o := AlltoallvOptions{Algorithm: Naive}
			if it%2 == 0 {
				for i := range bufs {
					if cap(bufs[i]) < size {
						bufs[i] = make([]byte, DefaultEagerLimit)
					}
				}
				o.Recv = bufs
			}
			got, err := c.AlltoallvWith(ctx, send, o)
			if err != nil {
				return err
			}
			for i := range got {
				if want := fill(i, me, it, size); string(got[i]) != string(want) {
					return fmt.Errorf("iteration %d: the message from rank %d is corrupt", it, i)
				}
			}
			if o.Recv == nil {
				kept = append(kept, got)
				// A returned slice has no spare capacity to append into.
				for i := range got {
					if i != me && cap(got[i]) != len(got[i]) {
						return fmt.Errorf("iteration %d: the message from rank %d has capacity %d beyond its %d bytes", it, i, cap(got[i]), len(got[i]))
					}
				}
			}
		}
		for k, got := range kept {
			it := 2*k + 1
			size := []int{5000, 9000, 40000, DefaultEagerLimit}[it%4]
			for i := range got {
				if want := fill(i, me, it, size); string(got[i]) != string(want) {
					return fmt.Errorf("iteration %d's message from rank %d changed after later exchanges", it, i)
				}
			}
		}
		return nil
	})
}

func TestPayloadPool(t *testing.T) {
	require.Equal(t, -1, poolClass(100))
	require.Equal(t, 0, poolClass(4096))
	require.Equal(t, 1, poolClass(4097))
	require.Equal(t, -1, poolClass(4<<20+1))
	b := getPayload(5000)
	require.Len(t, b, 5000)
	require.Equal(t, 8192, cap(b))
	require.Len(t, getPayload(10), 10)
	// Slices that are not a class size are not taken.
	putPayload(make([]byte, 5000))
	putPayload(nil)
}
