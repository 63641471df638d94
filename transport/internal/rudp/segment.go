package rudp

import (
	"sync"
	"time"
)

type segState uint8

const (
	segQueued   segState = iota // written, never transmitted
	segInFlight                 // transmitted, unacknowledged, in the flight list
	segLost                     // declared lost, in the lost list awaiting retransmission
)

// segment is one data packet of the outgoing stream. Its buffer holds the
// payload at dataOff with room for the header in front, so a transmission
// writes the header in place and sends one contiguous slice.
type segment struct {
	buf     *pbuf
	n       int // payload bytes
	seq     uint64
	fin     bool
	state   segState
	tx      uint64        // transmission number of the latest transmission
	sentAt  time.Duration // time of the latest transmission
	txCount uint32
	// prev/next link the segment into the flight list (ordered by tx) or
	// the lost list (ordered by seq).
	prev, next *segment
}

// wire is the size counted against the congestion window.
func (s *segment) wire() int { return headerLen + s.n }

var segPool = sync.Pool{New: func() any { return new(segment) }}

func newSegment(capacity int) *segment {
	s := segPool.Get().(*segment)
	s.buf = getBuf(capacity)
	return s
}

func freeSegment(s *segment) {
	putBuf(s.buf)
	*s = segment{}
	segPool.Put(s)
}

// segList is an intrusive doubly linked list.
type segList struct {
	head, tail *segment
	n          int
}

func (l *segList) pushBack(s *segment) {
	s.prev, s.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = s
	} else {
		l.head = s
	}
	l.tail = s
	l.n++
}

func (l *segList) pushFront(s *segment) {
	s.prev, s.next = nil, l.head
	if l.head != nil {
		l.head.prev = s
	} else {
		l.tail = s
	}
	l.head = s
	l.n++
}

func (l *segList) remove(s *segment) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
	l.n--
}

// insertBySeq keeps the list sorted by seq (searching from the tail, where
// new losses usually belong).
func (l *segList) insertBySeq(s *segment) {
	p := l.tail
	for p != nil && p.seq > s.seq {
		p = p.prev
	}
	if p == nil {
		l.pushFront(s)
		return
	}
	s.prev, s.next = p, p.next
	if p.next != nil {
		p.next.prev = s
	} else {
		l.tail = s
	}
	p.next = s
	l.n++
}

// segRing is a deque of segments indexed from the oldest unacknowledged
// sequence number.
type segRing struct {
	buf  []*segment
	head int
	n    int
}

func (r *segRing) at(i int) *segment { return r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *segRing) set(i int, s *segment) { r.buf[(r.head+i)&(len(r.buf)-1)] = s }

func (r *segRing) push(s *segment) {
	if r.n == len(r.buf) {
		nb := make([]*segment, max(64, 2*len(r.buf)))
		for i := range r.n {
			nb[i] = r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = s
	r.n++
}

func (r *segRing) pop() *segment {
	s := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return s
}

// rxChunk is received in-order data waiting for Read: pb.b[off:end].
type rxChunk struct {
	pb       *pbuf
	off, end int
}

// rxSlot holds an out-of-order packet.
type rxSlot struct {
	pb       *pbuf
	off, end int
	fin      bool
	present  bool
}
