package taskrun

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The executor's messages travel on a private communicator (Split from
// the caller's), so its tags cannot meet the application's.
const (
	tagCtl     = 1 // root -> rank: assign, forward, stop, abort
	tagReport  = 2 // rank -> root: started, finished, failed
	tagData    = 16
	tagCollect = 1 << 30
)

func dataTag(d int) int    { return tagData + d }
func collectTag(d int) int { return tagCollect + d }

// Message kinds.
const (
	msgAssign   = 1 // task, then (item, source rank) per input
	msgForward  = 2 // item, destination rank
	msgStop     = 3 // items to send to the root
	msgAbort    = 4 // reason
	msgStarted  = 5 // task, start
	msgFinished = 6 // task, start, end
	msgFailed   = 7 // task, reason
)

// msg is a decoded message; which fields mean something depends on kind.
type msg struct {
	kind    byte
	task    int
	item    int
	rank    int
	inputs  [][2]int // (item, source rank)
	items   []int
	t0, t1  float64
	message string
}

type enc struct{ b []byte }

func (e *enc) int(v int)       { e.b = binary.AppendVarint(e.b, int64(v)) }
func (e *enc) float(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) str(s string)    { e.int(len(s)); e.b = append(e.b, s...) }

func (m *msg) encode() []byte {
	e := &enc{b: []byte{m.kind}}
	switch m.kind {
	case msgAssign:
		e.int(m.task)
		e.int(len(m.inputs))
		for _, in := range m.inputs {
			e.int(in[0])
			e.int(in[1])
		}
	case msgForward:
		e.int(m.item)
		e.int(m.rank)
	case msgStop:
		e.int(len(m.items))
		for _, d := range m.items {
			e.int(d)
		}
	case msgAbort:
		e.str(m.message)
	case msgStarted:
		e.int(m.task)
		e.float(m.t0)
	case msgFinished:
		e.int(m.task)
		e.float(m.t0)
		e.float(m.t1)
	case msgFailed:
		e.int(m.task)
		e.str(m.message)
	}
	return e.b
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || v > math.MaxInt32 || v < math.MinInt32 {
		d.err = fmt.Errorf("taskrun: malformed message")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *dec) float() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = fmt.Errorf("taskrun: malformed message")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.err = fmt.Errorf("taskrun: malformed message: time %v", v)
	}
	return v
}

func (d *dec) count() int {
	n := d.int()
	if n < 0 || n > len(d.b) { // every element takes at least one byte
		d.err = fmt.Errorf("taskrun: malformed message")
		return 0
	}
	return n
}

func (d *dec) str() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func decode(b []byte) (*msg, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("taskrun: empty message")
	}
	m := &msg{kind: b[0]}
	d := &dec{b: b[1:]}
	switch m.kind {
	case msgAssign:
		m.task = d.int()
		n := d.count()
		for k := 0; k < n && d.err == nil; k++ {
			m.inputs = append(m.inputs, [2]int{d.int(), d.int()})
		}
	case msgForward:
		m.item, m.rank = d.int(), d.int()
	case msgStop:
		n := d.count()
		for k := 0; k < n && d.err == nil; k++ {
			m.items = append(m.items, d.int())
		}
	case msgAbort:
		m.message = d.str()
	case msgStarted:
		m.task, m.t0 = d.int(), d.float()
	case msgFinished:
		m.task, m.t0, m.t1 = d.int(), d.float(), d.float()
	case msgFailed:
		m.task, m.message = d.int(), d.str()
	default:
		return nil, fmt.Errorf("taskrun: unknown message kind %d", m.kind)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("taskrun: %d trailing bytes in a message of kind %d", len(d.b), m.kind)
	}
	return m, nil
}
