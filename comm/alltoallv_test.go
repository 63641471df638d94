package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
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
			commtest.OnAll(t, comms, func(c *Comm) error {
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
	commtest.OnAll(t, comms, func(c *Comm) error {
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

// TestAlltoallvPreGranted: in a naive exchange, a large message whose
// receiver passed a big enough buffer goes straight into it, with no
// rendezvous request or grant; larger messages fall back to the
// rendezvous, small ones ride inline, empty ones send nothing. Every byte
// arrives, granted payloads land in the caller's buffers, and no slot or
// message is left behind, including when a planner runs instead (the
// grants then go unused).
func TestAlltoallvPreGranted(t *testing.T) {
	const n = 4
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			comms := startWorld(t, n, tr, nil)
			ctx := context.Background()
			big := DefaultEagerLimit + 1000
			// size of the message from src to dst at iteration it
			size := func(src, dst, it int) int {
				switch (src + 2*dst + it) % 5 {
				case 0:
					return 0
				case 1:
					return 100 + src // inline
				case 2:
					return 2 * big // above the receiver's buffer: rendezvous
				default:
					return big + 37*src + dst // granted in advance
				}
			}
			fill := func(src, dst, it, sz int) []byte {
				b := make([]byte, sz)
				for k := range b {
					b[k] = byte(src*29 + dst*11 + it*5 + k*3)
				}
				return b
			}
			before := make([]int64, n)
			for r, c := range comms {
				before[r] = c.w.preGranted.Load()
			}
			want := int64(0) // pre-granted sends over all ranks
			for it := 0; it < 6; it++ {
				algo := Naive
				if it == 5 {
					algo = collective.OpenShop
				}
				for src := 0; src < n; src++ {
					for dst := 0; dst < n; dst++ {
						if sz := size(src, dst, it); src != dst && algo == Naive && sz > DefaultEagerLimit && sz <= 2*big-1 {
							want++
						}
					}
				}
				commtest.OnAll(t, comms, func(c *Comm) error {
					me := c.Rank()
					send := make([][]byte, n)
					bufs := make([][]byte, n)
					for j := range send {
						send[j] = fill(me, j, it, size(me, j, it))
						bufs[j] = make([]byte, 2*big-1)
					}
					got, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: algo, Recv: bufs})
					if err != nil {
						return err
					}
					for i := range got {
						sz := size(i, me, it)
						if string(got[i]) != string(fill(i, me, it, sz)) {
							return fmt.Errorf("iteration %d: the %d-byte message from rank %d is corrupt", it, sz, i)
						}
						if sz > 0 && sz <= len(bufs[i]) && &got[i][0] != &bufs[i][0] {
							return fmt.Errorf("iteration %d: the %d-byte message from rank %d is not in the caller's buffer", it, sz, i)
						}
					}
					return c.Barrier(ctx)
				})
			}
			var sent int64
			for r, c := range comms {
				sent += c.w.preGranted.Load() - before[r]
				c.w.mu.Lock()
				slots := len(c.w.slots)
				c.w.mu.Unlock()
				require.Zero(t, slots, "rank %d: slots left behind", r)
				require.Zero(t, unexpectedLeft(c), "rank %d: messages nobody received", r)
			}
			require.Equal(t, want, sent, "messages sent to buffers granted in advance")
		})
	}
}

// A payload for a buffer granted in advance whose receiver has left the
// call is dropped: the sender did nothing wrong and stays healthy.
func TestAbandonedPreGrantIsDropped(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	w := comms[0].w
	w.fireData(1, transport.Header{Type: transport.MsgRndvData, Comm: collCtx(comms[0].id), Tag: 99, Seq: preGrantSeq}, make([]byte, 10))
	require.False(t, w.isFailed(1))
	// Any other payload for an unknown rendezvous is a protocol error.
	w.fireData(1, transport.Header{Type: transport.MsgRndvData, Comm: collCtx(comms[0].id), Tag: 99, Seq: 5}, make([]byte, 10))
	require.True(t, w.isFailed(1))
}

// TestTimelineRates: the measured timeline gives each message the rate
// it achieved, and a paced plan's prediction the rate it paced to.
func TestTimelineRates(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	ctx := context.Background()
	for _, algo := range []collective.Algorithm{collective.Paced, collective.OpenShop} {
		commtest.OnAll(t, comms, func(c *Comm) error {
			send := make([][]byte, 3)
			for j := range send {
				send[j] = make([]byte, 256<<10)
			}
			if _, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: algo}); err != nil {
				return err
			}
			pred, meas, err := c.Timeline(ctx)
			if err != nil || c.Rank() != 0 {
				return err
			}
			if len(meas.Transfers) != 6 {
				return fmt.Errorf("%s: %d measured transfers, want 6", algo, len(meas.Transfers))
			}
			for _, tr := range meas.Transfers {
				want := float64(tr.Bytes) / (tr.End - tr.Start)
				if !(tr.Rate > 0) || tr.Rate < want*0.999 || tr.Rate > want*1.001 {
					return fmt.Errorf("%s: %d->%d moved %d bytes in %v s at rate %v", algo, tr.Src, tr.Dst, tr.Bytes, tr.End-tr.Start, tr.Rate)
				}
			}
			for _, tr := range pred.Transfers {
				if paced := tr.Rate > 0; paced != (algo == collective.Paced) {
					return fmt.Errorf("%s: predicted %d->%d at rate %v", algo, tr.Src, tr.Dst, tr.Rate)
				}
			}
			return nil
		})
	}
}
