package transport

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// The fast path of Send: a copied message that goes whole on a rail with
// nothing queued and nobody writing is written by the Send caller itself
// (sendDirectLocked, writePart) instead of by the rail's sendLoop.

// wireFrame is a part frame (a part header, inline or not, or its data
// frame) as a RailSet wrote it on a link.
type wireFrame struct {
	seq  uint64
	data bool // a MsgRailData frame
	head bool // a part header announcing a data frame
}

// gateLink wraps a rail's link on the sending side: it records the part
// frames written on it, checks that no two are written at once, and can
// hold the part header of one message (as a write blocked on a full socket
// buffer would) until the test releases it.
type gateLink struct {
	Link
	mu       sync.Mutex
	frames   []wireFrame
	writing  int   // part frames being written
	overlaps int   // part frames begun while another was being written
	holdSeq  int64 // the message whose part header is held (-1: none)
	held     chan struct{}
	release  chan error // nil: write the held frame; else: close the link, fail with it
	closed   chan struct{}
	once     sync.Once
	lingerOn time.Duration // how long a held Send takes to return once the link is closed
}

func newGateLink(l Link) *gateLink {
	return &gateLink{Link: l, holdSeq: -1, held: make(chan struct{}), release: make(chan error, 1), closed: make(chan struct{})}
}

// hold makes the part header of message seq wait for release.
func (l *gateLink) hold(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdSeq = int64(seq)
}

func (l *gateLink) Send(ctx context.Context, h Header, p []byte) error {
	var f wireFrame
	part := false
	switch h.Type {
	case MsgRailData:
		f, part = wireFrame{seq: h.Seq, data: true}, true
	case MsgRail:
		rh, _, err := decodeRailFrame(p, 1<<40)
		if err == nil && rh.Kind == railKindPart {
			f, part = wireFrame{seq: rh.Seq, head: rh.Flags&railFlagInline == 0}, true
		}
	}
	if !part {
		return l.Link.Send(ctx, h, p)
	}
	l.mu.Lock()
	if l.writing > 0 {
		l.overlaps++
	}
	l.writing++
	hold := !f.data && l.holdSeq == int64(f.seq)
	if hold {
		l.holdSeq = -1
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.writing--
		l.mu.Unlock()
	}()
	if hold {
		close(l.held)
		select {
		case err := <-l.release:
			if err != nil {
				_ = l.Link.Close()
				return err
			}
		case <-l.closed:
			time.Sleep(l.lingerOn)
			return ErrClosed
		}
	}
	l.mu.Lock()
	l.frames = append(l.frames, f)
	l.mu.Unlock()
	return l.Link.Send(ctx, h, p)
}

func (l *gateLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Link.Close()
}

// check verifies the part frames written on the link: never two at once,
// in sequence order (no rail failed), every data frame right after its
// part header.
func (l *gateLink) check(t *testing.T, rail int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Zero(t, l.overlaps, "rail %d: part frames written concurrently", rail)
	for i, f := range l.frames {
		if i > 0 {
			require.LessOrEqual(t, l.frames[i-1].seq, f.seq, "rail %d: frame %d out of order", rail, i)
		}
		if f.data {
			require.True(t, i > 0 && l.frames[i-1].head && l.frames[i-1].seq == f.seq,
				"rail %d: data frame %d does not follow its part header", rail, i)
		}
		if f.head {
			require.True(t, i+1 < len(l.frames) && l.frames[i+1].data, "rail %d: part header %d without its data", rail, i)
		}
	}
}

// gateRig is a rail rig whose sending side (a) writes through gateLinks.
func gateRig(t *testing.T, model RailModel, modify func(side int, c *RailConfig)) (*railRig, []*gateLink) {
	gates := make([]*gateLink, len(model.Costs))
	g := newRailRig(t, rigOptions{model: model, modify: modify, wrapA: func(i int, l Link) Link {
		gates[i] = newGateLink(l)
		return gates[i]
	}})
	return g, gates
}

// directWrites is how many parts Send callers wrote on each rail of rs.
func directWrites(rs *RailSet) []uint64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := make([]uint64, len(rs.rails))
	for i, r := range rs.rails {
		n[i] = r.direct
	}
	return n
}

// railIdle reports whether rail i of rs has nothing queued and no writer.
func railIdle(rs *RailSet, i int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return !rs.rails[i].busy && len(rs.rails[i].q) == 0
}

func recvAll(t *testing.T, rs *RailSet, want [][]byte) {
	t.Helper()
	ctx := testCtx(t)
	for i, w := range want {
		m, err := rs.Recv(ctx)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, uint64(i), m.Header.Seq, "message %d", i)
		require.True(t, bytes.Equal(w, m.Payload), "message %d corrupted", i)
	}
}

// TestRailDirectOrder: while a Send caller writes its message itself,
// later messages on that rail (small, medium with a data frame, and one
// too large to copy) queue behind it, their owned Sends return at once,
// and the rail's frames go out in sequence order; once the rail is idle
// again, the next Send writes itself.
func TestRailDirectOrder(t *testing.T) {
	g, gates := gateRig(t, RailModel{Costs: issueCosts[1:], Policy: RailSingle},
		func(_ int, c *RailConfig) { c.CopyLimit = 64 << 10 })
	ctx := testCtx(t)
	sizes := []int{8, 8, 20 << 10, 100, 100 << 10, 8, 30 << 10}
	want := make([][]byte, len(sizes))
	for i, n := range sizes {
		want[i] = railPayload(1, i, n)
	}
	gates[0].hold(0)
	first := make(chan error, 1)
	go func() { first <- g.a.Send(ctx, Header{Type: MsgEager, Seq: 0}, want[0]) }()
	<-gates[0].held
	require.Equal(t, []uint64{1}, directWrites(g.a), "the first message is written by its Send caller")
	for i := 1; i < 4; i++ {
		require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, want[i]),
			"an owned Send queues behind the caller's write")
	}
	large := make(chan error, 1) // not copied: its Send waits for the acknowledgement
	go func() { large <- g.a.Send(ctx, Header{Type: MsgEager, Seq: 4}, want[4]) }()
	require.Eventually(t, func() bool {
		g.a.mu.Lock()
		defer g.a.mu.Unlock()
		return g.a.nextSeq == 5
	}, 10*time.Second, time.Millisecond)
	for i := 5; i < len(sizes); i++ {
		require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, want[i]))
	}
	require.Equal(t, []uint64{1}, directWrites(g.a), "nothing else was written by a Send caller")
	select {
	case err := <-first:
		t.Fatalf("the held Send returned: %v", err)
	default:
	}
	gates[0].release <- nil
	require.NoError(t, <-first)
	recvAll(t, g.b, want)
	require.NoError(t, <-large)
	gates[0].check(t, 0)

	require.Eventually(t, func() bool { return railIdle(g.a, 0) }, 10*time.Second, time.Millisecond)
	require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager}, []byte("again")))
	require.Equal(t, []uint64{2}, directWrites(g.a), "an idle rail is written by the Send caller again")
	m, err := g.b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, "again", string(m.Payload))
}

// TestRailDirectConcurrent: many goroutines send messages of mixed sizes
// at once under every policy; fast-path writes and sendLoop's interleave
// per rail without overlapping, in sequence order, and every message
// arrives intact and in order.
func TestRailDirectConcurrent(t *testing.T) {
	const senders, each = 6, 150
	sizes := []int{0, 8, 100, 2000, railInlineMax + 1, 40 << 10, 80 << 10}
	for _, policy := range []RailPolicy{RailSingle, RailMux, RailAgg, RailMuxAgg, RailAuto} {
		t.Run(policy.String(), func(t *testing.T) {
			model := RailModel{Costs: twoRailCosts, Policy: policy, MinChunk: 16 << 10}
			g, gates := gateRig(t, model, func(_ int, c *RailConfig) { c.CopyLimit = 64 << 10 })
			ctx := testCtx(t)
			var eg errgroup.Group
			for s := range senders {
				eg.Go(func() error {
					for i := range each {
						n := sizes[(s+i)%len(sizes)]
						h := Header{Type: MsgEager, Tag: int32(s), Seq: uint64(i)}
						if err := g.a.Send(ctx, h, railPayload(s, i, n)); err != nil {
							return err
						}
					}
					return nil
				})
			}
			next := make([]int, senders)
			for range senders * each {
				m, err := g.b.Recv(ctx)
				require.NoError(t, err)
				s, i := int(m.Header.Tag), int(m.Header.Seq)
				require.Equal(t, next[s], i, "sender %d out of order", s)
				next[s]++
				require.True(t, bytes.Equal(railPayload(s, i, sizes[(s+i)%len(sizes)]), m.Payload),
					"sender %d message %d corrupted", s, i)
			}
			require.NoError(t, eg.Wait())
			var direct, parts uint64
			for i, st := range g.a.Stats() {
				gates[i].check(t, i)
				parts += st.Parts
				direct += directWrites(g.a)[i]
			}
			require.NotZero(t, direct, "some parts were written by their Send callers")
			t.Logf("%d of %d parts written by Send callers", direct, parts)
		})
	}
}

// TestRailDirectClose: Close while a Send caller writes its message
// itself closes the link under it and returns only once that caller is
// done with the rail; the Send fails with ErrClosed.
func TestRailDirectClose(t *testing.T) {
	g, gates := gateRig(t, RailModel{Costs: issueCosts[1:], Policy: RailSingle}, nil)
	ctx := testCtx(t)
	gates[0].lingerOn = 50 * time.Millisecond
	gates[0].hold(0)
	sent := make(chan error, 1)
	go func() { sent <- g.a.Send(ctx, Header{Type: MsgEager}, []byte("held")) }()
	<-gates[0].held
	require.NoError(t, g.a.Close())
	require.True(t, railIdle(g.a, 0), "Close returned while a Send caller was writing")
	err := <-sent
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, g.a.Send(ctx, Header{Type: MsgEager}, nil), ErrClosed)
}

// TestRailDirectFailure: a rail that fails while a Send caller writes on
// it is taken down; the message being written and those queued behind it
// go to the other rail, and nothing is lost.
func TestRailDirectFailure(t *testing.T) {
	// mux over twoRailCosts: small messages take rail 0
	g, gates := gateRig(t, RailModel{Costs: twoRailCosts, Policy: RailMux}, nil)
	ctx := testCtx(t)
	want := make([][]byte, 6)
	for i := range want {
		want[i] = railPayload(2, i, 10*i+1)
	}
	require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager, Seq: 0}, want[0]))
	gates[0].hold(1)
	held := make(chan error, 1)
	go func() { held <- g.a.Send(ctx, Header{Type: MsgEager, Seq: 1}, want[1]) }()
	<-gates[0].held
	for i := 2; i < len(want); i++ {
		require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, want[i]))
	}
	gates[0].release <- errors.New("the NIC went away")
	require.NoError(t, <-held, "a copied message is handed over: the other rail carries it")
	recvAll(t, g.b, want)
	ev := <-g.events
	require.Equal(t, 0, ev.Rail)
	require.Equal(t, []int{1}, ev.Live)
	st := g.a.Stats()
	require.False(t, st[0].Alive)
	require.GreaterOrEqual(t, st[1].Resent, uint64(len(want)-1), "the written part and those queued behind it moved")
	gates[1].check(t, 1)
}

// TestRailDirectCancel: a ctx that ends while its Send caller writes the
// message itself does not interrupt the write (a frame cut short would
// break the rail, as it would under sendLoop): the message is handed
// over, Send returns nil, and the rail stays up. A ctx that has ended
// before Send fails it at once, with nothing sent.
func TestRailDirectCancel(t *testing.T) {
	g, gates := gateRig(t, RailModel{Costs: issueCosts[1:], Policy: RailSingle}, nil)
	ctx := testCtx(t)
	sctx, cancel := context.WithCancel(ctx)
	gates[0].hold(0)
	sent := make(chan error, 1)
	go func() { sent <- g.a.Send(sctx, Header{Type: MsgEager, Seq: 0}, []byte("zero")) }()
	<-gates[0].held
	cancel()
	time.Sleep(10 * time.Millisecond)
	gates[0].release <- nil
	require.NoError(t, <-sent)
	require.ErrorIs(t, g.a.Send(sctx, Header{Type: MsgEager, Seq: 9}, []byte("never")), context.Canceled)
	require.NoError(t, g.a.Send(ctx, Header{Type: MsgEager, Seq: 1}, []byte("one")))
	recvAll(t, g.b, [][]byte{[]byte("zero"), []byte("one")})
	require.True(t, g.a.Stats()[0].Alive)
	require.Equal(t, []uint64{2}, directWrites(g.a))
	gates[0].check(t, 0)
}

// TestRailDirectWindow: the fast path keeps the send window: messages
// written by their Send callers stay counted until acknowledged, so with
// a peer that never acknowledges, the Send past Window waits, obeys its
// ctx and writes nothing.
func TestRailDirectWindow(t *testing.T) {
	rs, err := NewRailSet([]Link{&idleLink{peer: 1}}, RailConfig{
		RailModel: RailModel{Costs: issueCosts[1:]}, Window: 4 << 10, AckDelay: time.Minute})
	require.NoError(t, err)
	defer rs.Close()
	ctx := testCtx(t)
	payload := railPayload(3, 0, 3<<10)
	require.NoError(t, rs.Send(ctx, Header{Type: MsgEager}, payload))
	require.Equal(t, []uint64{1}, directWrites(rs))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, rs.Send(short, Header{Type: MsgEager}, payload), context.DeadlineExceeded)
	require.Equal(t, []uint64{1}, directWrites(rs), "a Send that found no room wrote nothing")
	rs.mu.Lock()
	defer rs.mu.Unlock()
	require.Equal(t, int64(3<<10), rs.copied)
	require.Len(t, rs.unacked, 1)
}
