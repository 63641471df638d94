package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// The conformance suite: every transport must pass every test here. A
// transport joins it by adding one entry to transports().

// netFactory builds a fresh network and the listen address for a rank.
type netFactory struct {
	name string
	// newNet returns a network for one test; it may register cleanups.
	newNet func(t testing.TB) Network
	// addr is the address rank r listens on.
	addr func(r int) string
}

func socketFactory(k Kind) netFactory {
	return netFactory{
		name: k.String(),
		newNet: func(t testing.TB) Network {
			n, err := NetworkFor(k)
			require.NoError(t, err)
			return n
		},
		addr: func(int) string { return "127.0.0.1:0" },
	}
}

func transports() []netFactory {
	return []netFactory{
		{
			name:   "mem",
			newNet: func(testing.TB) Network { return NewMemNetwork(1) },
			addr:   func(r int) string { return fmt.Sprintf("rank-%d", r) },
		},
		{
			name: "mem-shaped",
			newNet: func(t testing.TB) Network {
				n := NewMemNetwork(2)
				require.NoError(t, n.SetDefaultShape(ShapeConfig{Rate: 2e9, Delay: 200 * time.Microsecond, Loss: 0.01, Seed: 7}))
				return n
			},
			addr: func(r int) string { return fmt.Sprintf("rank-%d", r) },
		},
		socketFactory(KindTCP),
		{
			name: "tcp-shaped",
			newNet: func(t testing.TB) Network {
				n, err := ShapeNetwork(tcpNetwork{}, ShapeConfig{Rate: 2e9, Delay: 200 * time.Microsecond, Loss: 0.01, Seed: 7})
				require.NoError(t, err)
				return n
			},
			addr: func(int) string { return "127.0.0.1:0" },
		},
		socketFactory(KindTLS),
		socketFactory(KindQUIC),
		socketFactory(KindUDP),
	}
}

var testSecret = []byte("0123456789abcdef-test-secret")

const testJob = 0x5eed

func testConfig(rank int) Config {
	c := DefaultConfig()
	c.JobID = testJob
	c.Rank = rank
	c.Secret = testSecret
	c.MaxMessage = 128 << 20
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pair returns two connected links: a (rank 0, dialer) and b (rank 1,
// listener side).
func pair(t testing.TB, f netFactory, ca, cb Config) (a, b Link) {
	t.Helper()
	ctx := testCtx(t)
	n := f.newNet(t)
	ln, err := n.Listen(f.addr(cb.Rank), cb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan Link, 1)
	var aerr error
	go func() {
		l, err := ln.Accept(ctx)
		aerr = err
		accepted <- l
	}()
	a, err = n.Dial(ctx, ln.Addr().String(), cb.Rank, ca)
	require.NoError(t, err)
	b = <-accepted
	require.NoError(t, aerr)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	require.Equal(t, cb.Rank, a.Peer())
	require.Equal(t, ca.Rank, b.Peer())
	return a, b
}

var patternCache sync.Map // size -> []byte

// pattern returns deterministic bytes of length n (shared, read-only).
func pattern(n int) []byte {
	if p, ok := patternCache.Load(n); ok {
		return p.([]byte)
	}
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
	_, _ = r.Read(b)
	p, _ := patternCache.LoadOrStore(n, b)
	return p.([]byte)
}

func TestConformance(t *testing.T) {
	for _, f := range transports() {
		t.Run(f.name, func(t *testing.T) { runConformance(t, f) })
	}
}

func runConformance(t *testing.T, f netFactory) {
	t.Run("Sizes", func(t *testing.T) { testSizes(t, f) })
	t.Run("SendParts", func(t *testing.T) { testSendParts(t, f) })
	t.Run("Order", func(t *testing.T) { testOrder(t, f) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, f) })
	t.Run("AllocHook", func(t *testing.T) { testAlloc(t, f) })
	t.Run("RecvDeadline", func(t *testing.T) { testRecvDeadline(t, f) })
	t.Run("CloseWhileSending", func(t *testing.T) { testCloseWhileSending(t, f) })
	t.Run("SendCancel", func(t *testing.T) { testSendCancel(t, f) })
	t.Run("PeerDisappears", func(t *testing.T) { testPeerDisappears(t, f) })
	t.Run("CloseIdempotent", func(t *testing.T) { testCloseIdempotent(t, f) })
	t.Run("ListenerCloseKeepsLinks", func(t *testing.T) { testListenerClose(t, f) })
	for _, n := range []int{1, 2, 3, 4, 7} {
		t.Run(fmt.Sprintf("World/ranks=%d", n), func(t *testing.T) { testWorld(t, f, n) })
	}
}

func testSizes(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	sizes := []int{0, 1, 8, 47, 48, 49, 4095, coalesceMax, coalesceMax + 1, allocStep + 1, 1<<20 + 3, 8 << 20}
	if !testing.Short() {
		sizes = append(sizes, 64<<20)
	}
	for i, n := range sizes {
		p := pattern(n)
		h := Header{Type: MsgEager, Flags: 0xbeef, Comm: 7, Tag: -int32(i), Seq: uint64(i) << 40}
		errc := make(chan error, 1)
		go func() { errc <- a.Send(ctx, h, p) }()
		m, err := b.Recv(ctx)
		require.NoError(t, err, "size %d", n)
		require.NoError(t, <-errc)
		want := h
		want.Version, want.Job, want.Src, want.Len = Version, testJob, 0, uint64(n)
		require.Equal(t, want, m.Header)
		require.Len(t, m.Payload, n)
		require.True(t, bytes.Equal(p, m.Payload), "size %d: payload differs", n)

		// and back
		go func() { errc <- b.Send(ctx, Header{Type: MsgRndvData, Seq: uint64(i)}, p) }()
		m, err = a.Recv(ctx)
		require.NoError(t, err)
		require.NoError(t, <-errc)
		require.Equal(t, uint32(1), m.Header.Src)
		require.True(t, bytes.Equal(p, m.Payload), "size %d back: payload differs", n)
	}
}

// SendParts delivers one message whose payload is the parts joined, for
// any split: empty parts, parts that together fit the header's buffer or
// not, one part much larger than the other, more than two parts.
func testSendParts(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	splits := [][]int{{}, {0}, {0, 0}, {5, 0}, {0, 7}, {40, 300}, {coalesceMax - 10, 10}, {coalesceMax - 10, 11},
		{96, 64 << 10}, {1 << 20, 3}, {0, 1 << 20}, {3, 70000, 9}, {1, 2, 3, 4, 5}}
	for i, split := range splits {
		var parts [][]byte
		var want []byte
		for k, n := range split {
			p := bytes.Repeat([]byte{byte(i*16 + k + 1)}, n)
			parts = append(parts, p)
			want = append(want, p...)
		}
		h := Header{Type: MsgEager, Comm: 3, Tag: int32(i), Seq: uint64(i)}
		errc := make(chan error, 1)
		go func() { errc <- SendParts(ctx, a, h, parts...) }()
		m, err := b.Recv(ctx)
		require.NoError(t, err, "split %v", split)
		require.NoError(t, <-errc)
		require.Equal(t, uint64(i), m.Header.Seq)
		require.Equal(t, uint64(len(want)), m.Header.Len, "split %v", split)
		require.True(t, bytes.Equal(want, m.Payload), "split %v: payload differs", split)
	}
}

func testOrder(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	const n = 2000
	go func() {
		for i := range n {
			if err := a.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, pattern(i%300)); err != nil {
				return
			}
		}
	}()
	for i := range n {
		m, err := b.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(i), m.Header.Seq)
		require.Equal(t, pattern(i%300), m.Payload)
	}
}

// concurrentPayload is the payload goroutine g of rank src sends as its
// i-th message: a size that varies and a checksum-verifiable body.
func concurrentPayload(src, g, i int) []byte {
	r := rand.New(rand.NewPCG(uint64(src*1000+g), uint64(i)))
	var n int
	switch r.IntN(20) {
	case 0:
		n = r.IntN(1 << 20)
	case 1, 2, 3:
		n = r.IntN(64 << 10)
	default:
		n = r.IntN(512)
	}
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(src + g*7 + i*13 + j)
	}
	return b
}

func testConcurrent(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	const goroutines, per = 4, 100
	var g errgroup.Group
	for side, l := range []Link{a, b} {
		src := side
		for gi := range goroutines {
			g.Go(func() error {
				for i := range per {
					typ := MsgEager
					if i%3 == 0 {
						typ = MsgRndvData // exercise the bulk channel too
					}
					h := Header{Type: typ, Tag: int32(gi), Seq: uint64(i)}
					if err := l.Send(ctx, h, concurrentPayload(src, gi, i)); err != nil {
						return err
					}
				}
				return nil
			})
		}
		peer := 1 - side
		g.Go(func() error {
			// per (goroutine, channel): next expected seq
			next := map[[2]int]int{}
			for range goroutines * per {
				m, err := l.Recv(ctx)
				if err != nil {
					return err
				}
				gi, i := int(m.Header.Tag), int(m.Header.Seq)
				want := concurrentPayload(peer, gi, i)
				if crc32.ChecksumIEEE(want) != crc32.ChecksumIEEE(m.Payload) || !bytes.Equal(want, m.Payload) {
					return fmt.Errorf("rank %d: message %d/%d corrupted", peer, gi, i)
				}
				key := [2]int{gi, int(ChannelOf(m.Header.Type))}
				// Within a channel, a goroutine's messages arrive in order.
				if i < next[key] {
					return fmt.Errorf("rank %d: message %d/%d out of order (expected >= %d)", peer, gi, i, next[key])
				}
				next[key] = i + 1
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

func testAlloc(t *testing.T, f netFactory) {
	buf := make([]byte, 1<<20)
	var calls int
	var mu sync.Mutex
	cb := testConfig(1)
	cb.Alloc = func(h Header) []byte {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if h.Tag == 1 {
			return buf
		}
		return nil
	}
	a, b := pair(t, f, testConfig(0), cb)
	ctx := testCtx(t)
	p := pattern(300 << 10)
	go func() { _ = a.Send(ctx, Header{Type: MsgRndvData, Tag: 1}, p) }()
	m, err := b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, p, m.Payload)
	require.Same(t, &buf[0], &m.Payload[0], "payload should land in the caller's buffer")

	big := pattern(2 << 20) // larger than buf: the link allocates
	sent := make(chan error, 1)
	go func() { sent <- a.Send(ctx, Header{Type: MsgRndvData, Tag: 1}, big) }()
	m, err = b.Recv(ctx)
	require.NoError(t, err)
	require.NoError(t, <-sent)
	require.Equal(t, big, m.Payload)
	mu.Lock()
	require.Equal(t, 2, calls)
	mu.Unlock()
}

func testRecvDeadline(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := b.Recv(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var oe *OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "recv", oe.Op)

	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); ccancel() }()
	_, err = b.Recv(cctx)
	require.ErrorIs(t, err, context.Canceled)

	// The link is still usable.
	require.NoError(t, a.Send(ctx, Header{Type: MsgHeartbeat, Seq: 9}, nil))
	m, err := b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(9), m.Header.Seq)
}

func testCloseWhileSending(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	p := pattern(1 << 20)
	var g errgroup.Group
	for range 3 {
		g.Go(func() error {
			for {
				if err := a.Send(ctx, Header{Type: MsgRndvData}, p); err != nil {
					return err
				}
			}
		})
	}
	// The receiver drains; a closes mid-stream.
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := b.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			if !bytes.Equal(m.Payload, p) {
				recvErr <- errors.New("corrupted message before close")
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, a.Close())
	err := g.Wait()
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, err, ErrClosed)
	// The receiver sees the link end: everything it got was intact.
	err = <-recvErr
	require.ErrorIs(t, err, net.ErrClosed)
}

func testPeerDisappears(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	require.NoError(t, a.Send(ctx, Header{Type: MsgEager}, []byte("last words")))
	m, err := b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, "last words", string(m.Payload))

	recvErr := make(chan error, 1)
	go func() {
		_, err := a.Recv(ctx)
		recvErr <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, b.Close())
	select {
	case err := <-recvErr:
		require.ErrorIs(t, err, net.ErrClosed)
		require.ErrorIs(t, err, ErrPeerClosed)
	case <-time.After(20 * time.Second):
		t.Fatal("Recv did not notice the peer going away")
	}
	// Sending to a vanished peer fails (possibly after a few buffered
	// messages), it does not hang.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := a.Send(ctx, Header{Type: MsgEager}, pattern(64<<10))
		if err != nil {
			require.ErrorIs(t, err, net.ErrClosed)
			break
		}
		require.True(t, time.Now().Before(deadline), "Send kept succeeding to a closed peer")
	}
}

func testCloseIdempotent(t *testing.T, f netFactory) {
	a, _ := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	err := a.Send(ctx, Header{Type: MsgEager}, nil)
	require.ErrorIs(t, err, net.ErrClosed)
	require.True(t, errors.Is(err, ErrClosed))
	_, err = a.Recv(ctx)
	require.ErrorIs(t, err, net.ErrClosed)
}

// testWorld connects n ranks all-to-all (rank i dials every j < i) and
// sends a message between every ordered pair.
func testWorld(t *testing.T, f netFactory, n int) {
	ctx := testCtx(t)
	nw := f.newNet(t)
	lns := make([]Listener, n)
	for r := range n {
		ln, err := nw.Listen(f.addr(r), testConfig(r))
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		lns[r] = ln
	}
	links := make([][]Link, n) // links[r][p]: rank r's link to p
	for r := range links {
		links[r] = make([]Link, n)
	}
	var mu sync.Mutex
	var g errgroup.Group
	for r := range n {
		g.Go(func() error { // accept from every higher rank
			for range n - 1 - r {
				l, err := lns[r].Accept(ctx)
				if err != nil {
					return err
				}
				mu.Lock()
				links[r][l.Peer()] = l
				mu.Unlock()
			}
			return nil
		})
		for p := range r {
			g.Go(func() error {
				l, err := nw.Dial(ctx, lns[p].Addr().String(), p, testConfig(r))
				if err != nil {
					return err
				}
				mu.Lock()
				links[r][p] = l
				mu.Unlock()
				return nil
			})
		}
	}
	require.NoError(t, g.Wait())
	t.Cleanup(func() {
		for _, ls := range links {
			for _, l := range ls {
				if l != nil {
					_ = l.Close()
				}
			}
		}
	})
	for r := range n {
		for p := range n {
			if p == r {
				continue
			}
			require.NotNil(t, links[r][p], "rank %d has no link to %d", r, p)
			require.Equal(t, p, links[r][p].Peer())
			g.Go(func() error {
				body := fmt.Appendf(nil, "from %d to %d", r, p)
				return links[r][p].Send(ctx, Header{Type: MsgEager, Tag: int32(r)}, append(body, pattern(r*1000+p)...))
			})
			g.Go(func() error {
				m, err := links[p][r].Recv(ctx)
				if err != nil {
					return err
				}
				want := append(fmt.Appendf(nil, "from %d to %d", r, p), pattern(r*1000+p)...)
				if int(m.Header.Src) != r || !bytes.Equal(m.Payload, want) {
					return fmt.Errorf("rank %d got a wrong message from %d", p, r)
				}
				return nil
			})
		}
	}
	require.NoError(t, g.Wait())
}

// Closing a listener stops accepting but leaves accepted links working.
func testListenerClose(t *testing.T, f netFactory) {
	ctx := testCtx(t)
	n := f.newNet(t)
	ln, err := n.Listen(f.addr(1), testConfig(1))
	require.NoError(t, err)
	a, err := n.Dial(ctx, ln.Addr().String(), 1, testConfig(0))
	require.NoError(t, err)
	defer a.Close()
	b, err := ln.Accept(ctx)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, ln.Close())
	require.NoError(t, ln.Close())
	_, err = ln.Accept(ctx)
	require.ErrorIs(t, err, net.ErrClosed)
	for i := range 3 {
		require.NoError(t, a.Send(ctx, Header{Type: MsgRndvData, Seq: uint64(i)}, pattern(100_000)))
		m, err := b.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, pattern(100_000), m.Payload)
		require.NoError(t, b.Send(ctx, Header{Type: MsgEager}, []byte("ok")))
		_, err = a.Recv(ctx)
		require.NoError(t, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = n.Dial(dctx, ln.Addr().String(), 1, testConfig(2))
	require.Error(t, err, "a closed listener accepts nothing")
}

// A Send cancelled while blocked (the receiver is not reading) fails with
// the context's error. Afterwards the link either still works or is closed;
// it never delivers a damaged message.
func testSendCancel(t *testing.T, f netFactory) {
	a, b := pair(t, f, testConfig(0), testConfig(1))
	ctx := testCtx(t)
	big := pattern(16 << 20)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	var err error
	sent := 0
	for err == nil && sent < 64 {
		if err = a.Send(short, Header{Type: MsgRndvData}, big); err == nil {
			sent++
		}
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)

	afterc := make(chan error, 1)
	go func() { afterc <- a.Send(ctx, Header{Type: MsgEager}, []byte("after")) }()
	got := 0
	for {
		m, err := b.Recv(ctx)
		if err != nil {
			// The link broke: the later Send must have failed too.
			require.ErrorIs(t, err, net.ErrClosed)
			require.ErrorIs(t, <-afterc, net.ErrClosed)
			return
		}
		if m.Header.Type == MsgEager {
			require.NoError(t, <-afterc)
			require.Equal(t, "after", string(m.Payload))
			require.GreaterOrEqual(t, got, sent)
			return
		}
		require.True(t, bytes.Equal(big, m.Payload), "damaged message %d", got)
		got++
	}
}
