package rudp

import "sync"

// Packet buffers come from two size classes so that the hot path allocates
// nothing and a small packet does not pin a 64 KiB buffer.
const (
	smallBufSize = 2048
	largeBufSize = 65536 // any UDP datagram fits; a read that fills it is treated as truncated
)

// pbuf is a pooled buffer (a pointer so that sync.Pool stores it without
// allocating).
type pbuf struct{ b []byte }

var (
	smallPool = sync.Pool{New: func() any { return &pbuf{b: make([]byte, smallBufSize)} }}
	largePool = sync.Pool{New: func() any { return &pbuf{b: make([]byte, largeBufSize)} }}
)

// getBuf returns a buffer of at least n bytes.
func getBuf(n int) *pbuf {
	if n <= smallBufSize {
		return smallPool.Get().(*pbuf)
	}
	return largePool.Get().(*pbuf)
}

func putBuf(p *pbuf) {
	if p == nil {
		return
	}
	switch cap(p.b) {
	case smallBufSize:
		p.b = p.b[:smallBufSize]
		smallPool.Put(p)
	case largeBufSize:
		p.b = p.b[:largeBufSize]
		largePool.Put(p)
	}
}

// bufCharge is the memory a buffer holding n bytes costs, used for the send
// and receive buffer limits.
func bufCharge(n int) int {
	if n <= smallBufSize {
		return smallBufSize
	}
	return largeBufSize
}
