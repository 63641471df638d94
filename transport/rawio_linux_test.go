package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawTCPPair returns the two ends of a loopback TCP connection, the first
// wrapped for raw system calls, both with small socket buffers so that
// large writes are partial and wait for the reader.
func rawTCPPair(t *testing.T) (*rawTCP, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	s := <-accepted
	require.NotNil(t, s)
	for _, x := range []net.Conn{c, s} {
		tc := x.(*net.TCPConn)
		require.NoError(t, tc.SetReadBuffer(16<<10))
		require.NoError(t, tc.SetWriteBuffer(16<<10))
		t.Cleanup(func() { _ = tc.Close() })
	}
	raw, ok := rawStream(c.(*net.TCPConn)).(*rawTCP)
	require.True(t, ok)
	return raw, s.(*net.TCPConn)
}

// A stream link over TCP uses the raw calls for both directions.
func TestTCPLinkUsesRawCalls(t *testing.T) {
	ca := testConfig(0)
	ca.LowWater = func() int { return 256 << 10 }
	a, _ := pair(t, socketFactory(KindTCP), ca, testConfig(1))
	l, ok := a.(*streamLink)
	require.True(t, ok, "a TCP link is a stream link")
	_, ok = l.w.w.(*rawTCP)
	require.True(t, ok, "the frame writer writes with raw calls")
	_, ok = l.r.raw.(*rawTCP)
	require.True(t, ok, "the frame reader reads with raw calls")
	require.Same(t, l.conn, tcpConn(l.r.raw))
	require.NotNil(t, l.r.payload.lowat, "the low-water mark still reaches the socket")
}

// writeVec delivers every byte of many buffers (empty ones, more than
// iovMax of them, and more than the socket buffers hold) in order, across
// partial writes and waits for the reader; Read sees them all, then EOF.
func TestRawTCPWriteVec(t *testing.T) {
	raw, peer := rawTCPPair(t)
	var bufs [][]byte
	var want []byte
	for i := range 3000 {
		n := (i * 37) % 4001
		if i%7 == 0 {
			n = 0
		}
		b := pattern(n + i%3)
		if i%1000 == 999 {
			b = pattern(1 << 20)
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	got := make(chan []byte, 1)
	go func() {
		var out []byte
		buf := make([]byte, 5000)
		for {
			n, err := peer.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
			time.Sleep(10 * time.Microsecond) // a slow reader: the writer waits
		}
		got <- out
	}()
	n, err := raw.writeVec(bufs)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.NoError(t, raw.CloseWrite())
	require.True(t, bytes.Equal(want, <-got), "the bytes arrive in order")

	// The other way, through Read: small reads, then EOF.
	go func() {
		_, _ = peer.Write(want[:100000])
		_ = peer.CloseWrite()
	}()
	var back []byte
	buf := make([]byte, 3000)
	for {
		n, err := raw.Read(buf)
		back = append(back, buf[:n]...)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		require.Positive(t, n, "a read returns bytes, an error or both")
	}
	require.True(t, bytes.Equal(want[:100000], back))
	n0, err := raw.Read(nil)
	require.NoError(t, err)
	require.Zero(t, n0)
}

// A write that cannot finish stops at its deadline, saying how much went
// out; a read with nothing to read stops at its deadline too.
func TestRawTCPDeadlines(t *testing.T) {
	raw, _ := rawTCPPair(t)
	require.NoError(t, raw.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
	big := pattern(8 << 20)
	start := time.Now()
	n, err := raw.writeVec([][]byte{big})
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Positive(t, n, "part of the payload fits the socket buffers")
	require.Less(t, n, int64(len(big)))
	require.Less(t, time.Since(start), 5*time.Second)

	require.NoError(t, raw.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = raw.Read(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

// Errors keep their meaning: a reset peer is a gone peer, a closed
// connection is net.ErrClosed, and a read waiting in the poller returns
// when the connection is closed.
func TestRawTCPErrors(t *testing.T) {
	raw, peer := rawTCPPair(t)
	require.NoError(t, peer.SetLinger(0)) // close with a reset
	require.NoError(t, peer.Close())
	var err error
	for range 100 { // the reset arrives on a later write
		if _, err = raw.writeVec([][]byte{pattern(1000)}); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Error(t, err)
	require.True(t, isPeerGone(err), "%v", err)
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE), "%v", err)

	raw2, _ := rawTCPPair(t)
	var wg sync.WaitGroup
	wg.Add(1)
	var rerr error
	go func() {
		defer wg.Done()
		_, rerr = raw2.Read(make([]byte, 10))
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, raw2.Close())
	wg.Wait()
	require.ErrorIs(t, rerr, net.ErrClosed)
	_, err = raw2.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// SetLoopbackBuffers retunes a TCP or TLS link to a loopback peer whose
// buffers follow the default policy, and nothing else.
func TestSetLoopbackBuffers(t *testing.T) {
	rcvbuf := func(l Link) int {
		sl := l.(*streamLink)
		tc := tcpConn(sl.r.raw)
		if tc == nil {
			tc = sl.conn.(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn)
		}
		rc, err := tc.SyscallConn()
		require.NoError(t, err)
		var v int
		require.NoError(t, rc.Control(func(fd uintptr) {
			v, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		}))
		require.NoError(t, err)
		return v
	}
	for _, k := range []Kind{KindTCP, KindTLS} {
		a, _ := pair(t, socketFactory(k), testConfig(0), testConfig(1))
		require.Less(t, rcvbuf(a), 1<<20, "%v: the default loopback buffer", k)
		require.True(t, SetLoopbackBuffers(a, 512<<10), "%v", k)
		require.GreaterOrEqual(t, rcvbuf(a), 1<<20, "%v: the kernel doubles what it is asked for", k)
	}
	fixed := testConfig(0)
	fixed.SocketBuffer = 128 << 10
	a, _ := pair(t, socketFactory(KindTCP), fixed, testConfig(1))
	require.False(t, SetLoopbackBuffers(a, 512<<10), "a size the caller chose stays")
	m, _ := pair(t, transports()[0], testConfig(0), testConfig(1))
	require.False(t, SetLoopbackBuffers(m, 512<<10), "a mem link has no socket")
}
