package comm

import (
	"math/bits"
	"sync"
)

// Eager payloads arrive in buffers from a pool of power-of-two size
// classes, and go back to it once their bytes have been copied into the
// caller's buffer (RecvInto, Alltoallv's Recv buffers). An iterative
// program that receives into its own buffers then allocates nothing per
// message. That matters more than the allocation itself: a freshly
// allocated large slice is memory the runtime may just have returned to
// the kernel, and faulting it back in a page at a time cost about half of
// a 64 KiB Alltoallv on loopback before the pool.
//
// A buffer goes back to the pool only where nothing else can reach it: a
// payload handed to the caller as is (Recv without a buffer, Irecv) is the
// caller's for good.

const (
	poolMinShift = 12 // 4 KiB: smaller payloads come from the allocator's size classes
	poolMaxShift = 22 // 4 MiB
)

var payloadPools [poolMaxShift - poolMinShift + 1]sync.Pool

// poolClass returns the index of the smallest class holding n bytes, or
// -1 when n is outside the pooled range.
func poolClass(n int) int {
	if n < 1<<poolMinShift || n > 1<<poolMaxShift {
		return -1
	}
	return bits.Len(uint(n-1)) - poolMinShift
}

// getPayload returns a slice of n bytes, from the pool when n is in the
// pooled range. Its contents are undefined: the caller overwrites them.
func getPayload(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := payloadPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+poolMinShift))
}

// putPayload gives b back to the pool. The caller must hold the only
// reference to b's array. Slices whose capacity is not a class size are
// left to the garbage collector.
func putPayload(b []byte) {
	c := cap(b)
	if c&(c-1) != 0 {
		return
	}
	k := poolClass(c)
	if k < 0 {
		return
	}
	b = b[:0]
	payloadPools[k].Put(&b)
}
