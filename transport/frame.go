package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/transport/internal/linkutil"
)

// Frame I/O on byte streams. A frameWriter and a frameReader turn any
// ordered byte stream with deadlines (a TCP or TLS connection, a QUIC
// stream, a reliable UDP connection) into a message channel.

// aLongTimeAgo is a deadline in the past, used to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// coalesceMax is the largest payload copied next to its header so that the
// message goes out in one write; larger payloads use vectored writes.
const coalesceMax = 16 << 10

// allocStep is the most a link allocates for a payload before its bytes
// arrive. Larger payloads grow (by allocGrow times what has arrived) as
// bytes come in, so a header that lies about its length costs nothing.
const (
	allocStep = 64 << 10
	allocGrow = 8
)

// lock is a mutex whose acquisition can be abandoned when ctx ends or the
// link closes (shared with transport/quic).
type lock = linkutil.Lock

func newLock() lock { return linkutil.NewLock() }

// interruptible runs op, and if ctx ends before op returns, sets a deadline
// in the past with set so that op's blocking I/O returns. The deadline is
// cleared afterwards.
func interruptible(ctx context.Context, set func(time.Time) error, op func() error) error {
	if ctx.Done() == nil {
		return op()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = set(aLongTimeAgo)
		close(fired)
	})
	err := op()
	if !stop() {
		<-fired
		_ = set(time.Time{})
	}
	return err
}

// vectorWriter is a stream that writes several buffers in one system call.
type vectorWriter interface {
	writeVec(bufs [][]byte) (int64, error)
}

// frameWriter writes framed messages to a byte stream.
type frameWriter struct {
	mu          lock
	w           io.Writer
	setDeadline func(time.Time) error
	vectored    bool // w is a *net.TCPConn-like writer where net.Buffers uses writev
	buf         []byte
	bufs        net.Buffers
	arr         [3][]byte // the header and up to two parts, without allocating
}

func newFrameWriter(w io.Writer, setDeadline func(time.Time) error, vectored bool) *frameWriter {
	return &frameWriter{mu: newLock(), w: w, setDeadline: setDeadline, vectored: vectored,
		buf: make([]byte, HeaderSize+coalesceMax)}
}

// write writes h (already complete, h.Len the parts' total) and the
// payload parts. It reports how many bytes reached the stream, so the
// caller knows whether a failure broke framing. The caller holds mu.
func (fw *frameWriter) write(ctx context.Context, h *Header, parts ...[]byte) (int64, error) {
	var n int64
	err := interruptible(ctx, fw.setDeadline, func() error {
		PutHeader(fw.buf, h)
		if h.Len <= coalesceMax {
			m := HeaderSize
			for _, p := range parts {
				m += copy(fw.buf[m:], p)
			}
			k, err := fw.w.Write(fw.buf[:m])
			n = int64(k)
			return err
		}
		bufs := append(append(fw.arr[:0], fw.buf[:HeaderSize]), parts...)
		defer clear(bufs) // hold no payload alive
		if vw, ok := fw.w.(vectorWriter); ok {
			k, err := vw.writeVec(bufs)
			n = k
			return err
		}
		if fw.vectored {
			fw.bufs = bufs
			k, err := fw.bufs.WriteTo(fw.w)
			fw.bufs = nil
			n = k
			return err
		}
		for _, b := range bufs {
			k, err := fw.w.Write(b)
			n += int64(k)
			if err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// frameReader reads framed messages from a byte stream.
type frameReader struct {
	mu          lock
	raw         io.Reader     // the stream itself
	r           *bufio.Reader // buffers raw for headers and small payloads
	setDeadline func(time.Time) error
	maxLen      uint64
	job         uint64
	peer        int
	alloc       func(Header) []byte
	hdr         [HeaderSize]byte
	payload     drainThenRaw
}

// countInto makes the reader add the bytes of large payloads to *n as
// they arrive from the stream (see Progress).
func (fr *frameReader) countInto(n *atomic.Uint64) { fr.payload.progress = n }

// drainThenRaw reads n bytes from r (what r has buffered), then from raw.
// With lowat and mark set, it asks the stream to wake a reader that waits
// for the rest of a large payload only once mark() bytes of it have
// arrived (Config.LowWater).
type drainThenRaw struct {
	r     *bufio.Reader
	n     int
	raw   io.Reader
	lowat func(int) // sets the stream's receive low-water mark; may be nil
	mark  func() int
	cur   int // the low-water mark set; 0 or 1: the default
	// progress, if set, counts the bytes read from raw (countInto).
	progress *atomic.Uint64
}

// lowatMin is the least low-water mark worth a system call.
const lowatMin = 64 << 10

func (d *drainThenRaw) Read(p []byte) (int, error) {
	if d.n > 0 {
		k, err := d.r.Read(p[:min(len(p), d.n)])
		d.n -= k
		return k, err
	}
	if d.lowat != nil {
		// len(p) is never more than what is left of the payload, so the
		// mark never waits for bytes of a message not yet sent.
		want := min(len(p), d.mark())
		if want < lowatMin {
			want = 1
		}
		if want != max(d.cur, 1) {
			d.lowat(want)
			d.cur = want
		}
	}
	k, err := d.raw.Read(p)
	if d.progress != nil && k > 0 {
		d.progress.Add(uint64(k))
	}
	return k, err
}

// done restores the default low-water mark after a payload.
func (d *drainThenRaw) done() {
	if d.cur > 1 {
		d.lowat(1)
	}
	d.cur = 0
}

// readBufferSize is the read buffer of a stream link: big enough for a
// header and a small payload in one read, small enough that reading ahead
// into a large payload costs little. (64 KiB made the TCP link a quarter
// slower on loopback: every large message dragged 64 KiB through it.)
const readBufferSize = 16 << 10

func newFrameReader(r io.Reader, setDeadline func(time.Time) error, cfg *Config, peer int) *frameReader {
	fr := &frameReader{
		mu:          newLock(),
		raw:         r,
		r:           bufio.NewReaderSize(r, readBufferSize),
		setDeadline: setDeadline,
		maxLen:      uint64(cfg.MaxMessage),
		job:         cfg.JobID,
		peer:        peer,
		alloc:       cfg.Alloc,
	}
	if tc := tcpConn(r); tc != nil && cfg.LowWater != nil {
		fr.payload.lowat, fr.payload.mark = rcvLowat(tc), cfg.LowWater
	}
	return fr
}

// read reads one message. started reports whether any byte of it was
// consumed, i.e. whether a failure broke framing. The caller holds mu.
func (fr *frameReader) read(ctx context.Context) (m Message, started bool, err error) {
	// Wait for the first byte without consuming it: a ctx that ends here
	// leaves the stream intact. (A ctx that cannot end needs no such care.)
	if ctx.Done() != nil || fr.r.Buffered() == 0 {
		if err := interruptible(ctx, fr.setDeadline, func() error {
			_, err := fr.r.Peek(1)
			return err
		}); err != nil {
			return m, false, err
		}
	}
	err = interruptible(ctx, fr.setDeadline, func() error {
		if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
			return err
		}
		h, err := ParseHeader(fr.hdr[:], fr.maxLen)
		if err != nil {
			return err
		}
		if err := checkHeader(&h, fr.job, fr.peer); err != nil {
			return err
		}
		m.Header = h
		var src io.Reader = fr.r
		if buffered := fr.r.Buffered(); uint64(buffered) < h.Len {
			// Take what is buffered, then read the rest straight from
			// the stream: a large payload is not copied through the
			// buffer, and the buffer does not read ahead into the next
			// message's payload.
			fr.payload.r = fr.r
			fr.payload.n = buffered
			fr.payload.raw = fr.raw
			src = &fr.payload
		}
		m.Payload, err = readPayload(src, &h, fr.alloc)
		fr.payload.done()
		return err
	})
	return m, true, err
}

// tcpConn returns the TCP connection under r, if it is one.
func tcpConn(r io.Reader) *net.TCPConn {
	switch c := r.(type) {
	case *net.TCPConn:
		return c
	case interface{ tcp() *net.TCPConn }:
		return c.tcp()
	}
	return nil
}

// readPayload reads h.Len bytes from r into the buffer chosen by alloc, or
// into a slice grown as the bytes arrive.
func readPayload(r io.Reader, h *Header, alloc func(Header) []byte) ([]byte, error) {
	n := int(h.Len)
	if alloc != nil {
		if b := alloc(*h); cap(b) >= n {
			b = b[:n]
			_, err := io.ReadFull(r, b)
			return b, err
		}
	}
	if n <= allocStep {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b := make([]byte, 0, allocStep)
	for len(b) < n {
		if len(b) == cap(b) {
			c := min(allocGrow*len(b), n)
			nb := make([]byte, len(b), c)
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// closer implements idempotent close with a quit channel (shared with
// transport/quic).
type closer = linkutil.Closer

func newCloser() closer { return linkutil.NewCloser() }
