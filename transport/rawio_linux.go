package transport

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// rawTCP reads and writes a TCP connection with raw system calls
// (syscall.RawSyscall) on its non-blocking socket, still waiting for
// readiness through the runtime's poller.
//
// Why: a Go system call that lasts longer than the scheduler's 20 us tick
// (copying a large payload into or out of a socket often does) makes the
// runtime hand the calling thread's P to another thread, wake a thread for
// it, and park the caller's thread when the call returns. With several
// ranks on few cores (four on two here) those hand-offs and the monitor's
// wake-ups every 20 us compete with the ranks themselves for the CPU. A
// raw call on a non-blocking socket never blocks (it returns EAGAIN, and
// the goroutine then parks in the poller as usual), so it can keep its P
// for the few tens of microseconds a copy takes.
//
// One goroutine reads and one writes at a time (the link's frame reader and
// writer hold their locks): the state of a call lives in the struct, and
// the functions handed to RawConn are made once, so a call allocates
// nothing.
type rawTCP struct {
	*net.TCPConn
	rc syscall.RawConn

	readFn func(fd uintptr) bool
	rbuf   []byte
	rn     uintptr
	rerr   syscall.Errno

	writeFn func(fd uintptr) bool
	one     [1][]byte
	wbufs   [][]byte
	wtotal  int64
	werr    syscall.Errno
	iov     []syscall.Iovec
}

// rawStream wraps tc, or returns nil if its descriptor is not reachable.
func rawStream(tc *net.TCPConn) io.ReadWriter {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	c := &rawTCP{TCPConn: tc, rc: rc}
	c.readFn, c.writeFn = c.read, c.writev
	return c
}

// ioSync tells the race detector what the kernel guarantees: bytes read
// from a socket were written before. syscall.Read and syscall.Write say it
// with the detector's own annotations, which raw calls skip; an atomic
// add before every write and a load after every read say the same.
var ioSync atomic.Uint64

func (c *rawTCP) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerr
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	ioSync.Load()
	return int(n), nil
}

// read is one attempt of Read on the descriptor; false: wait until it is
// readable.
func (c *rawTCP) read(fd uintptr) bool {
	for {
		c.rn, _, c.rerr = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch c.rerr {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		return true
	}
}

func (c *rawTCP) Write(p []byte) (int, error) {
	c.one[0] = p
	n, err := c.writeVec(c.one[:])
	c.one[0] = nil
	return int(n), err
}

// iovMax bounds the buffers one writev takes (the kernel's IOV_MAX).
const iovMax = 1024

// writeVec writes every byte of bufs, in as few writev calls as the
// socket buffer allows. It consumes bufs (the slices are advanced).
func (c *rawTCP) writeVec(bufs [][]byte) (int64, error) {
	c.wbufs, c.wtotal, c.werr = bufs, 0, 0
	ioSync.Add(1)
	err := c.rc.Write(c.writeFn)
	total, errno := c.wtotal, c.werr
	c.wbufs = nil
	clear(c.iov[:cap(c.iov)]) // hold no payload alive
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("writev", errno)}
	}
	return total, err
}

// writev writes what is left of c.wbufs until it is all written (true),
// the socket is full (false: wait until it is writable) or a call fails
// (true, with c.werr set).
func (c *rawTCP) writev(fd uintptr) bool {
	for {
		iov := c.iov[:0]
		for _, b := range c.wbufs {
			if len(b) > 0 && len(iov) < iovMax {
				v := syscall.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				iov = append(iov, v)
			}
		}
		c.iov = iov
		if len(iov) == 0 {
			return true
		}
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.werr = errno
			return true
		}
		c.wtotal += int64(n)
		for n > 0 && len(c.wbufs) > 0 {
			k := min(int(n), len(c.wbufs[0]))
			c.wbufs[0] = c.wbufs[0][k:]
			n -= uintptr(k)
			if len(c.wbufs[0]) == 0 {
				c.wbufs = c.wbufs[1:]
			}
		}
	}
}

func (c *rawTCP) tcp() *net.TCPConn { return c.TCPConn }
