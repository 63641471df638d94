package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logCapture is a slog.Handler that collects the "err" attribute of every
// record, so tests can check that rejections are logged with typed errors.
type logCapture struct {
	mu   sync.Mutex
	errs []error
	ch   chan error
}

func newLogCapture() *logCapture { return &logCapture{ch: make(chan error, 64)} }

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.mu.Lock()
			h.errs = append(h.errs, e)
			h.mu.Unlock()
			select {
			case h.ch <- e:
			default:
			}
		}
		return true
	})
	return nil
}

// next waits for the next logged error.
func (h *logCapture) next(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no error was logged")
		return nil
	}
}

// listenLogged starts a listener of rank 1 whose log is captured.
func listenLogged(t *testing.T, n Network, addr string) (Listener, *logCapture) {
	t.Helper()
	lc := newLogCapture()
	cfg := testConfig(1)
	cfg.Logger = slog.New(lc)
	cfg.HandshakeTimeout = 2 * time.Second
	ln, err := n.Listen(addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return ln, lc
}

// requireNoAccept checks that the listener delivers no link.
func requireNoAccept(t *testing.T, ln Listener) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l, err := ln.Accept(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, l)
}

func requireAuthErr(t *testing.T, err, target error) {
	t.Helper()
	var ae *AuthError
	require.ErrorAs(t, err, &ae, "want *AuthError, got %v", err)
	require.ErrorIs(t, err, target)
}

// TestHandshakeRejects runs the membership failures over every transport:
// each is rejected with a typed error on the side that detects it and no
// link is delivered.
func TestHandshakeRejects(t *testing.T) {
	for _, f := range transports() {
		t.Run(f.name, func(t *testing.T) {
			t.Run("WrongSecret", func(t *testing.T) {
				n := f.newNet(t)
				ln, _ := listenLogged(t, n, f.addr(1))
				cfg := testConfig(0)
				cfg.Secret = []byte("another-secret-of-the-same-size")
				_, err := n.Dial(testCtx(t), ln.Addr().String(), 1, cfg)
				requireAuthErr(t, err, ErrBadSecret)
				requireNoAccept(t, ln)
			})
			t.Run("WrongJob", func(t *testing.T) {
				n := f.newNet(t)
				ln, lc := listenLogged(t, n, f.addr(1))
				cfg := testConfig(0)
				cfg.JobID = testJob + 1
				_, err := n.Dial(testCtx(t), ln.Addr().String(), 1, cfg)
				var ae *AuthError
				require.ErrorAs(t, err, &ae)
				requireAuthErr(t, lc.next(t), ErrJobMismatch)
				requireNoAccept(t, ln)
			})
			t.Run("WrongRank", func(t *testing.T) {
				n := f.newNet(t)
				ln, lc := listenLogged(t, n, f.addr(1))
				_, err := n.Dial(testCtx(t), ln.Addr().String(), 5, testConfig(0))
				var ae *AuthError
				require.ErrorAs(t, err, &ae)
				requireAuthErr(t, lc.next(t), ErrRankMismatch)
				requireNoAccept(t, ln)
			})
			t.Run("BadConfig", func(t *testing.T) {
				n := f.newNet(t)
				cfg := testConfig(0)
				cfg.Secret = []byte("short")
				_, err := n.Listen(f.addr(0), cfg)
				require.ErrorIs(t, err, ErrBadConfig)
				_, err = n.Dial(testCtx(t), "127.0.0.1:1", 1, cfg)
				require.ErrorIs(t, err, ErrBadConfig)
			})
		})
	}
}

// recorder is a TCP proxy that records the bytes each way.
type recorder struct {
	mu         sync.Mutex
	up, down   bytes.Buffer
	ln         net.Listener
	target     string
	done       chan struct{}
	closeConns []net.Conn
}

func newRecorder(t *testing.T, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &recorder{ln: ln, target: target, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		r.mu.Lock()
		r.closeConns = append(r.closeConns, c, s)
		r.mu.Unlock()
		var wg sync.WaitGroup
		cp := func(dst, src net.Conn, rec *bytes.Buffer) {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				k, err := src.Read(buf)
				if k > 0 {
					r.mu.Lock()
					rec.Write(buf[:k])
					r.mu.Unlock()
					_, _ = dst.Write(buf[:k])
				}
				if err != nil {
					_ = dst.Close()
					return
				}
			}
		}
		wg.Add(2)
		go cp(s, c, &r.up)
		go cp(c, s, &r.down)
		wg.Wait()
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range r.closeConns {
			_ = c.Close()
		}
		r.mu.Unlock()
		<-r.done
	})
	return r
}

// TestReplayedHandshake records a genuine handshake and replays each side's
// bytes against a fresh peer: the nonces differ, so both are rejected with
// ErrBadSecret.
func TestReplayedHandshake(t *testing.T) {
	ctx := testCtx(t)
	n := tcpNetwork{}
	ln, lc := listenLogged(t, n, "127.0.0.1:0")
	rec := newRecorder(t, ln.Addr().String())
	good, err := n.Dial(ctx, rec.ln.Addr().String(), 1, testConfig(0))
	require.NoError(t, err)
	acc, err := ln.Accept(ctx)
	require.NoError(t, err)
	_ = good.Close()
	_ = acc.Close()
	rec.mu.Lock()
	up := append([]byte(nil), rec.up.Bytes()[:hsHelloLen+hsFinishLen]...)
	down := append([]byte(nil), rec.down.Bytes()[:hsReplyLen+hsAcceptLen]...)
	rec.mu.Unlock()

	// The dialer's recorded bytes, replayed to the listener.
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(up)
	require.NoError(t, err)
	requireAuthErr(t, lc.next(t), ErrBadSecret)
	requireNoAccept(t, ln)

	// The listener's recorded bytes, replayed to a dialer.
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer fake.Close()
	go func() {
		s, err := fake.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, hsHelloLen)
		_, _ = io.ReadFull(s, buf)
		_, _ = s.Write(down)
		_, _ = io.Copy(io.Discard, s)
	}()
	_, err = n.Dial(ctx, fake.Addr().String(), 1, testConfig(0))
	requireAuthErr(t, err, ErrBadSecret)
}

// rawHello builds a dialer hello with the given fields.
func rawHello(version byte, job uint64, rank, want uint32) []byte {
	b := make([]byte, hsHelloLen)
	putHSPrefix(b, hsHello)
	b[4] = version
	binary.BigEndian.PutUint64(b[8:], job)
	binary.BigEndian.PutUint32(b[16:], rank)
	binary.BigEndian.PutUint32(b[20:], want)
	return b
}

// TestHandshakeGarbage sends invalid handshakes straight to a TCP listener.
func TestHandshakeGarbage(t *testing.T) {
	ln, lc := listenLogged(t, tcpNetwork{}, "127.0.0.1:0")
	cases := []struct {
		name string
		send []byte
		want error
	}{
		{"UnknownVersion", rawHello(Version+1, testJob, 0, 1), ErrVersion},
		{"Garbage", []byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n-----------------------------------"), ErrMalformed},
		{"FrameInsteadOfHello", func() []byte {
			b := make([]byte, 64)
			PutHeader(b, &Header{Version: Version, Type: MsgEager, Job: testJob})
			return b
		}(), ErrMalformed},
		{"WrongJob", rawHello(Version, testJob^1, 0, 1), ErrJobMismatch},
		{"HugeRank", rawHello(Version, testJob, 0xfffffff0, 1), ErrMalformed},
		{"BadMAC", func() []byte {
			// a well-formed hello followed by a finish with a zero MAC
			b := rawHello(Version, testJob, 0, 1)
			fin := make([]byte, hsFinishLen)
			putHSPrefix(fin, hsFinish)
			return append(b, fin...)
		}(), ErrBadSecret},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			_, _ = c.Write(tc.send)
			requireAuthErr(t, lc.next(t), tc.want)
			requireNoAccept(t, ln)
		})
	}
	t.Run("Silent", func(t *testing.T) {
		// A peer that connects and says nothing is dropped at the
		// handshake timeout.
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		err = lc.next(t)
		requireAuthErr(t, err, context.DeadlineExceeded)
		requireNoAccept(t, ln)
	})
}

// rawLink authenticates a raw TCP connection to ln as rank 0 and returns
// it, with the listener's link, so tests can write arbitrary frames.
func rawLink(t *testing.T) (raw net.Conn, l Link, lc *logCapture) {
	t.Helper()
	ctx := testCtx(t)
	ln, lc := listenLogged(t, tcpNetwork{}, "127.0.0.1:0")
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	peer, err := dialHandshake(c, hsParams{job: testJob, rank: 0, secret: testSecret}, 1)
	require.NoError(t, err)
	require.Equal(t, 1, peer)
	l, err = ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return c, l, lc
}

func frameBytes(h Header, payload []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	PutHeader(b, &h)
	return append(b, payload...)
}

// TestBadFrames writes invalid frames after a genuine handshake: each
// closes the link with a *FrameError, and nothing is delivered.
func TestBadFrames(t *testing.T) {
	good := Header{Version: Version, Type: MsgEager, Job: testJob, Src: 0, Len: 3}
	mod := func(f func(b []byte)) []byte {
		b := frameBytes(good, []byte("abc"))
		f(b)
		return b
	}
	cases := []struct {
		name  string
		bytes []byte
		want  error
		field string
	}{
		{"Oversized", mod(func(b []byte) { binary.BigEndian.PutUint64(b[40:], 1<<40) }), ErrTooLarge, "length"},
		{"JustOverMax", mod(func(b []byte) { binary.BigEndian.PutUint64(b[40:], 128<<20+1) }), ErrTooLarge, "length"},
		{"Version", mod(func(b []byte) { b[2] = 9 }), ErrVersion, "version"},
		{"Magic", mod(func(b []byte) { b[0] = 'x' }), ErrMalformed, "magic"},
		{"TypeZero", mod(func(b []byte) { b[3] = 0 }), ErrMalformed, "type"},
		{"Reserved", mod(func(b []byte) { b[29] = 1 }), ErrMalformed, "reserved1"},
		{"OtherJob", mod(func(b []byte) { b[15] ^= 1 }), ErrJobMismatch, "job"},
		{"SpoofedSource", mod(func(b []byte) { b[19] = 3 }), ErrRankMismatch, "src"},
		{"Garbage", bytes.Repeat([]byte{0xA5}, 100), ErrMalformed, "magic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, l, lc := rawLink(t)
			ctx := testCtx(t)
			_, err := raw.Write(tc.bytes)
			require.NoError(t, err)
			m, err := l.Recv(ctx)
			require.Nil(t, m.Payload)
			var fe *FrameError
			require.ErrorAs(t, err, &fe)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, tc.field, fe.Field)
			// It was logged, and the link is closed: nothing more arrives.
			require.ErrorIs(t, lc.next(t), tc.want)
			_, err = l.Recv(ctx)
			require.ErrorIs(t, err, net.ErrClosed)
			_, err = raw.Read(make([]byte, 1))
			require.Error(t, err, "the connection should be closed")
		})
	}
}

// TestLyingLength claims a large (but allowed) length and sends little: the
// receiver must not allocate the claimed size before the bytes arrive.
func TestLyingLength(t *testing.T) {
	raw, l, _ := rawLink(t)
	ctx := testCtx(t)
	h := Header{Version: Version, Type: MsgEager, Job: testJob, Src: 0, Len: 120 << 20}
	_, err := raw.Write(frameBytes(h, bytes.Repeat([]byte{1}, 1000)))
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() {
		_, err := l.Recv(ctx)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_ = raw.Close()
	err = <-done
	require.ErrorIs(t, err, ErrPeerClosed)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "allocated for bytes that never came")
}

// TestFingerprints pins certificates on the TLS and QUIC transports.
func TestFingerprints(t *testing.T) {
	id0, err := NewIdentity(testJob, 0)
	require.NoError(t, err)
	id1, err := NewIdentity(testJob, 1)
	require.NoError(t, err)
	stranger, err := NewIdentity(testJob, 0)
	require.NoError(t, err)
	fps := map[int]Fingerprint{0: id0.Fingerprint, 1: id1.Fingerprint}
	fp, err := ParseFingerprint(id0.Fingerprint.String())
	require.NoError(t, err)
	require.Equal(t, id0.Fingerprint, fp)

	for _, k := range []Kind{KindTLS, KindQUIC} {
		t.Run(k.String(), func(t *testing.T) {
			n, err := NetworkFor(k)
			require.NoError(t, err)
			cb := testConfig(1)
			cb.Identity, cb.Fingerprints = id1, fps
			lc := newLogCapture()
			cb.Logger = slog.New(lc)
			ln, err := n.Listen("127.0.0.1:0", cb)
			require.NoError(t, err)
			defer ln.Close()
			ctx := testCtx(t)

			// The right certificates: accepted.
			ca := testConfig(0)
			ca.Identity, ca.Fingerprints = id0, fps
			a, err := n.Dial(ctx, ln.Addr().String(), 1, ca)
			require.NoError(t, err)
			b, err := ln.Accept(ctx)
			require.NoError(t, err)
			_ = a.Close()
			_ = b.Close()

			// A dialer with an unknown certificate (right secret): refused.
			ca.Identity = stranger
			_, err = n.Dial(ctx, ln.Addr().String(), 1, ca)
			require.Error(t, err)
			requireNoAccept(t, ln)

			// A dialer that pins another certificate for the listener.
			ca.Identity = id0
			ca.Fingerprints = map[int]Fingerprint{1: stranger.Fingerprint}
			_, err = n.Dial(ctx, ln.Addr().String(), 1, ca)
			require.Error(t, err)
			requireNoAccept(t, ln)

			// Rank 0's certificate used by a dialer claiming rank 2.
			ca = testConfig(2)
			ca.Identity = id0
			_, err = n.Dial(ctx, ln.Addr().String(), 1, ca)
			require.Error(t, err)
			var logged error
			for logged == nil || !errors.Is(logged, ErrFingerprint) {
				logged = lc.next(t)
			}
			requireAuthErr(t, logged, ErrFingerprint)
			requireNoAccept(t, ln)
		})
	}
}

// TestIdleFlood: a thousand connections that say nothing, held open on a
// listener, neither stop nor hold up a real rank's handshake, and each is
// dropped once PreAuthTimeout has passed.
func TestIdleFlood(t *testing.T) {
	for _, n := range []Network{tcpNetwork{}, tcpNetwork{tls: true}} {
		t.Run(n.Kind().String(), func(t *testing.T) {
			cfg := testConfig(1)
			cfg.PreAuthTimeout = 300 * time.Millisecond
			ln, err := n.Listen("127.0.0.1:0", cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ln.Close() })
			idle := make([]net.Conn, 0, 1000)
			t.Cleanup(func() {
				for _, c := range idle {
					_ = c.Close()
				}
			})
			for len(idle) < cap(idle) {
				c, err := net.Dial("tcp", ln.Addr().String())
				require.NoError(t, err)
				idle = append(idle, c)
			}
			// A real rank gets through although every idle connection
			// is still held (before: 64 at a time, each for the
			// handshake timeout).
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				l, err := ln.Accept(ctx)
				if err == nil {
					_ = l.Close()
				}
				done <- err
			}()
			l, err := n.Dial(ctx, ln.Addr().String(), 1, testConfig(0))
			require.NoError(t, err)
			_ = l.Close()
			require.NoError(t, <-done)
			// Each idle connection is closed by the listener.
			for i, c := range idle {
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err := c.Read(make([]byte, 1))
				require.Error(t, err, "idle connection %d", i)
				require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "idle connection %d was not closed", i)
			}
		})
	}
}
