package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// Collective operation codes, carried in the header flags so that ranks
// that call different collectives are told so instead of exchanging the
// wrong data.
const (
	opBarrier uint16 = iota + 1
	opBcast
	opGather
	opScatter
	opAllgather
	opReduce
	opAllreduce
	opAlltoallv
	opSplit
	opTimeline
	opCounts
	opMulticast
	opRedistribute
	opBackbone
	opScan
	opExscan
	opReduceScatter
)

var opNames = map[uint16]string{
	opBarrier: "Barrier", opBcast: "Bcast", opGather: "Gather", opScatter: "Scatter",
	opAllgather: "Allgather", opReduce: "Reduce", opAllreduce: "Allreduce",
	opAlltoallv: "Alltoallv", opSplit: "Split", opTimeline: "Timeline", opCounts: "Alltoallv",
	opMulticast: "Multicast", opRedistribute: "Redistribute", opBackbone: "ProbeBackbone",
	opScan: "Scan", opExscan: "Exscan", opReduceScatter: "ReduceScatter",
}

func opName(op uint16) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("collective #%d", op)
}

// coll is one collective call in progress.
type coll struct {
	c   *Comm
	ctx context.Context
	op  uint16
	tag int32
	// sig is what this rank's first piece carries (Bcast's root and
	// size, a reduction's length), kept to describe a stray message.
	sig uint64
	// root is the call's root (-1: not rooted).
	root int
}

// begin starts a collective: it checks the communicator and takes the
// next sequence number, which tags every message of this call.
func (c *Comm) begin(ctx context.Context, op uint16) (*coll, context.CancelFunc, error) {
	return c.beginRooted(ctx, op, -1)
}

// beginRooted is begin for a call with a root (-1: none), which the
// ranks that wait long compare (stall.go).
func (c *Comm) beginRooted(ctx context.Context, op uint16, root int) (*coll, context.CancelFunc, error) {
	if err := c.check(opName(op)); err != nil {
		return nil, nil, err
	}
	if err := c.brokenErr(); err != nil {
		return nil, nil, opErr(opName(op), err)
	}
	// One collective at a time per communicator: MPI makes a second one
	// erroneous, and two would share sequence numbers and mix their data.
	// The ranks may pair a collective of one goroutine with one of
	// another, so every member's communicator breaks: no call returns
	// data that another call's messages made.
	//
	// The call is marked running and takes its number in one step under
	// w.mu, which deliver's checkStray holds: checkStray must never see a
	// call running without its number. It would take a stray message of
	// the call just finished for one of the running call, and nothing
	// would check that message again (every rank then waited for the op
	// timeout: issue 17).
	w := c.w
	w.mu.Lock()
	if !c.running.CompareAndSwap(0, uint32(op)) {
		other := c.running.Load()
		w.mu.Unlock()
		why := fmt.Sprintf("rank %d called %s while %s ran on this communicator (one goroutine per communicator for collectives; Dup it for others)", c.rank, opName(op), opName(uint16(other)))
		c.abortWith(ErrConcurrent, why)
		return nil, nil, opErr(opName(op), fmt.Errorf("%w: %s", ErrConcurrent, why))
	}
	seq := c.collSeq.Add(1)
	tag := int32(seq & 0x7fffffff)
	c.curRoot = root
	m := c.earlyLocked(tag, op)
	w.mu.Unlock()
	ctx, cancel := c.withTimeout(ctx)
	k := &coll{c: c, ctx: ctx, op: op, tag: tag, root: root}
	if m != nil {
		// Another collective's message came before this call began
		// (deliver could not tell then).
		why := fmt.Sprintf("rank %d called %s while rank %d called %s", c.index[m.src], opName(m.flags), c.rank, opName(op))
		c.abort(why)
		cancel()
		c.running.Store(0)
		return nil, nil, opErr(opName(op), &RankError{Rank: m.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)})
	}
	unwatch := k.watch()
	return k, func() {
		unwatch()
		left := k.ctx.Err() != nil
		c.quiet.Store(false)
		c.callSig.Store(0)
		cancel()
		c.running.Store(0)
		k.settle(left)
	}, nil
}

func (k *coll) err(e error) error { return opErr(opName(k.op), e) }

// send sends one message of the collective to rank dst.
func (k *coll) send(dst int, data []byte) error {
	if err := k.c.concurrentErr(); err != nil {
		return err
	}
	p, err := k.c.startSend(k.ctx, dst, collCtx(k.c.id), k.tag, k.op, data)
	if err != nil {
		return err
	}
	return k.c.finishSend(k.ctx, p, k.c)
}

// isend sends the envelope now; a rendezvous payload then goes out in the
// background as soon as the receiver grants it, so that the caller can
// receive meanwhile. It returns a function that waits for the send.
func (k *coll) isend(dst int, data []byte) (func() error, error) {
	return k.isendSeq(dst, data, 0)
}

// isendSeq is isend with a message sequence number the receiver can ask
// for (see recvSeq).
func (k *coll) isendSeq(dst int, data []byte, useq uint64) (func() error, error) {
	if err := k.c.concurrentErr(); err != nil {
		return nil, err
	}
	p, err := k.c.startSendMode(k.ctx, dst, collCtx(k.c.id), k.tag, k.op, data, false, useq)
	if err != nil {
		return nil, err
	}
	if !p.rndv {
		return func() error { return nil }, nil
	}
	done := make(chan error, 1)
	k.c.w.wg.Add(1)
	go func() {
		defer k.c.w.wg.Done()
		done <- k.c.finishSend(k.ctx, p, k.c)
	}()
	return func() error { return <-done }, nil
}

// sendEager sends one message of the collective eagerly, whatever its
// size, with sequence number useq, and returns once the transport has it
// (no grant to wait for).
func (k *coll) sendEager(dst int, data []byte, useq uint64) error {
	if err := k.c.concurrentErr(); err != nil {
		return err
	}
	_, err := k.c.startSendMode(k.ctx, dst, collCtx(k.c.id), k.tag, k.op, data, true, useq)
	return err
}

// recv receives this collective's next message from rank src and checks
// that src is in the same collective.
func (k *coll) recv(src int) ([]byte, error) {
	r := k.c.postRecv(collCtx(k.c.id), src, k.tag)
	return k.finish(r)
}

func (k *coll) finish(r *recvReq) ([]byte, error) { return k.finishInto(r, nil) }

// postSeq posts a receive of this collective's message number useq from
// rank src, whatever order src sends its messages in.
func (k *coll) postSeq(src int, useq uint64) *recvReq {
	return k.c.w.post(collCtx(k.c.id), k.c.group[src], k.tag, int64(useq), false)
}

// postSeqInto is postSeq for a message that is to land in buf as it
// arrives, when it comes eagerly (pass the same buf to finishInto).
func (k *coll) postSeqInto(src int, useq uint64, buf []byte) *recvReq {
	return k.c.w.postInto(collCtx(k.c.id), k.c.group[src], k.tag, int64(useq), false, buf)
}

// finishInto completes a collective receive into buf when it is large
// enough (a new slice otherwise).
func (k *coll) finishInto(r *recvReq, buf []byte) ([]byte, error) {
	data, _, err := k.finishMsg(r, buf)
	return data, err
}

// finishMsg is finishInto that also returns the matched message.
func (k *coll) finishMsg(r *recvReq, buf []byte) ([]byte, *inMsg, error) {
	data, m, err := k.c.finishRecv(k.ctx, collCtx(k.c.id), r, buf, false, k.c)
	if err != nil {
		return nil, nil, err
	}
	if m.flags != k.op {
		why := fmt.Sprintf("rank %d called %s while rank %d called %s", k.c.index[m.src], opName(m.flags), k.c.rank, opName(k.op))
		err := &RankError{Rank: m.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
		k.c.abort(why)
		return nil, nil, err
	}
	return data, m, nil
}

// Stray messages. A collective's messages are all received by the end
// of the call when every rank called it alike. A message that finds no
// receive (one that arrives for a collective this rank has finished, or
// that is still unmatched when it finishes) comes from a rank whose plan
// differs: another root, another length on the other side of a size
// class, another algorithm or another collective. Its receiver is often
// the only rank that can tell (the rank that waits for what the sender
// sent it instead waits for ever), so it breaks the communicator on every
// rank, naming the sender and what differed. A collective left because
// its context ended is exempt: its late messages are no one's fault.

// settle records a finished collective and looks for messages it left
// unmatched (left: the call ended with its context).
func (k *coll) settle(left bool) {
	c := k.c
	if left {
		c.abandoned.Store(1<<31 | uint32(k.tag))
		return
	}
	c.lastSig.Store(k.sig)
	c.lastColl.Store(uint64(uint32(k.tag))<<32 | uint64(k.op))
	c.lastCall.Store(&callRec{tag: k.tag, op: k.op, root: k.root})
	if c.brokenErr() != nil {
		return
	}
	if m := c.unmatched(k.tag); m != nil {
		c.abort(c.strayWhy(m))
	}
}

// unmatched returns a message of this collective call (tag) that no
// receive took, or nil.
func (c *Comm) unmatched(tag int32) *inMsg {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[collCtx(c.id)]; q != nil {
		for _, m := range q.unexpected {
			if m.tag == tag {
				return m
			}
		}
	}
	return nil
}

// expectNothing says that this rank's part of the call receives nothing
// (a Gather sender, a Scatter or Bcast root): any message of the call
// that reaches it is a mismatch, found as it lands (a rank waiting for
// this one's grant would otherwise wait for ever). It returns the error
// for a message already here.
func (k *coll) expectNothing() error {
	c := k.c
	c.quiet.Store(true)
	c.callSig.Store(k.sig) // any message is a mismatch: for its wording
	if m := c.unmatched(k.tag); m != nil {
		why := c.strayWhy(m)
		c.abort(why)
		return &RankError{Rank: m.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
	}
	return nil
}

// expectSig says that every message of this call carries sig (not 0,
// below 1<<63) as its sequence number, and so must every other
// rank's: a message with another is a mismatch, found as it lands (its
// receive, posted for sig, would never take it). It returns the error
// for such a message already here.
func (k *coll) expectSig(sig uint64) error {
	c := k.c
	k.sig = sig
	c.callSig.Store(sig)
	w := c.w
	w.mu.Lock()
	var bad *inMsg
	if q := w.queues[collCtx(c.id)]; q != nil {
		for _, m := range q.unexpected {
			if m.tag == k.tag && m.useq != sig {
				bad = m
				break
			}
		}
	}
	w.mu.Unlock()
	if bad != nil {
		why := c.strayWhy(bad)
		c.abort(why)
		return &RankError{Rank: bad.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
	}
	return nil
}

// otherSig reports whether m is of the running call, which expects
// another signature (expectSig).
func (c *Comm) otherSig(m *inMsg) bool {
	sig := c.callSig.Load()
	return sig != 0 && m.useq != sig && c.running.Load() != 0 && m.tag == int32(c.collSeq.Load()&0x7fffffff)
}

// earlyLocked returns a message that came for this call (tag) before it
// began from another collective than op, or nil (w.mu held).
func (c *Comm) earlyLocked(tag int32, op uint16) *inMsg {
	w := c.w
	if q := w.queues[collCtx(c.id)]; q != nil {
		for _, m := range q.unexpected {
			if m.tag == tag && m.flags != op {
				return m
			}
		}
	}
	return nil
}

// checkStray is called by deliver (w.mu held) for every collective
// message that found no receive: if it belongs to a collective this rank
// has finished, the communicator breaks on every rank.
func (w *world) checkStray(ctxID uint32, m *inMsg) {
	if w.closing {
		return
	}
	for c := range w.comms {
		if collCtx(c.id) != ctxID {
			continue
		}
		if c.brokenErr() == nil && (c.finished(m.tag) || c.otherOp(m) || c.quietNow(m) || c.otherSig(m)) {
			why := c.strayWhy(m)
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				c.abort(why)
			}()
		}
		return
	}
}

// brokenCtx reports whether a context id is of a communicator that broke
// or that this rank no longer has (w.mu not held): a rendezvous it
// granted may have been left.
func (w *world) brokenCtx(ctxID uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.comms {
		if p2pCtx(c.id) == ctxID || collCtx(c.id) == ctxID {
			return c.brokenErr() != nil
		}
	}
	return true
}

// finished reports whether tag is a collective call this rank finished
// (not one running, not a later one, not one left when its context
// ended).
func (c *Comm) finished(tag int32) bool {
	d := (c.collSeq.Load() - uint32(tag)) & 0x7fffffff
	switch {
	case d >= 1<<30: // a later call's: this rank is behind
		return false
	case d == 0 && c.running.Load() != 0:
		return false
	case c.abandoned.Load() == 1<<31|uint32(tag):
		return false
	}
	return true
}

// otherOp reports whether m is of the collective call running here but
// comes from another collective: the two ranks may wait for each other
// (neither receives what the other sent), so m's arrival is where the
// mismatch shows.
func (c *Comm) otherOp(m *inMsg) bool {
	op := c.running.Load()
	if op == 0 || uint32(m.flags) == op || m.tag != int32(c.collSeq.Load()&0x7fffffff) {
		return false
	}
	// begin marks a call running and takes its number together, under
	// w.mu: the running call's number is collSeq's, and a call that
	// ended (lastColl, abandoned) has an older one. Checked anyway.
	return int32(c.lastColl.Load()>>32) != m.tag && c.abandoned.Load() != 1<<31|uint32(m.tag)
}

// quietNow reports whether m is of the running call, whose part here
// receives nothing.
func (c *Comm) quietNow(m *inMsg) bool {
	return c.quiet.Load() && c.running.Load() != 0 && m.tag == int32(c.collSeq.Load()&0x7fffffff)
}

// strayWhy describes a stray message m: who sent what, and what this
// rank called instead.
func (c *Comm) strayWhy(m *inMsg) string {
	src := c.index[m.src]
	if c.otherOp(m) {
		return fmt.Sprintf("rank %d called %s while rank %d called %s", src, opName(m.flags), c.rank, opName(uint16(c.running.Load())))
	}
	if c.otherSig(m) {
		if why := sigWhy(m.flags, src, m.useq, c.rank, c.callSig.Load()); why != "" {
			return why
		}
	}
	if c.quietNow(m) {
		return fmt.Sprintf("rank %d sent rank %d a message of %s%s, but rank %d's part of it receives nothing (the ranks' roots, lengths or algorithms differ)", src, c.rank, opName(m.flags), describeSig(m.flags, m.useq), c.rank)
	}
	last := c.lastColl.Load()
	if int32(last>>32) != m.tag {
		return fmt.Sprintf("rank %d sent rank %d a message of %s after rank %d had finished that call and the next (the ranks' calls differ)", src, c.rank, opName(m.flags), c.rank)
	}
	op, sig := uint16(last), c.lastSig.Load()
	if m.flags != op {
		return fmt.Sprintf("rank %d called %s while rank %d called %s", src, opName(m.flags), c.rank, opName(op))
	}
	if why := sigWhy(op, src, m.useq, c.rank, sig); why != "" {
		return why
	}
	return fmt.Sprintf("rank %d sent rank %d a message of %s%s that rank %d's %s%s does not receive (the ranks' arguments or algorithms differ)", src, c.rank, opName(m.flags), describeSig(m.flags, m.useq), c.rank, opName(op), describeSig(op, sig))
}

// sigWhy says how two ranks' calls of op differ by what their first
// pieces carry (describeSig), or "" if that does not tell.
func sigWhy(op uint16, src int, theirs uint64, me int, mine uint64) string {
	t, m := describeSig(op, theirs), describeSig(op, mine)
	switch {
	case t == "" || m == "" || t == m:
		return ""
	case op == opBcast:
		root := func(seq uint64) uint64 { return seq &^ bcastFirst >> bcastRootShift }
		size := func(seq uint64) uint64 { return seq & (1<<bcastRootShift - 1) }
		return fmt.Sprintf("Bcast: rank %d broadcast from root %d (%d bytes), rank %d expected root %d", src, root(theirs), size(theirs), me, root(mine))
	}
	return fmt.Sprintf("rank %d called %s%s, rank %d%s", src, opName(op), t, me, m)
}

// describeSig says what a first piece's sequence number carries: a
// broadcast's root and size, a reduction's length ("" if nothing).
func describeSig(op uint16, seq uint64) string {
	if op == opReduceScatter && seq>>62 == 1 {
		return fmt.Sprintf(" with counts #%x and %s", seq&(1<<48-1), opCodeName(seq>>54&0xff))
	}
	if seq&bcastFirst == 0 {
		return ""
	}
	switch op {
	case opBcast:
		return fmt.Sprintf(" from root %d with %d bytes", seq&^bcastFirst>>bcastRootShift, seq&(1<<bcastRootShift-1))
	case opReduce, opAllreduce:
		return describeHead(seq)
	}
	return ""
}

// abort breaks the communicator after a mismatch and tells every other
// member, so that no rank waits for a collective that cannot complete.
func (c *Comm) abort(why string) { c.abortWith(ErrMismatch, why) }

// abortWith breaks the communicator with cause (ErrMismatch or
// ErrConcurrent) on this rank and every other member.
func (c *Comm) abortWith(cause error, why string) {
	w := c.w
	if cause == ErrConcurrent {
		// Break first: from now on the running call here takes nothing
		// and sends nothing (concurrentErr). Then the second call
		// returns once the notice is on every link. What the running
		// call sent before it broke may still reach a peer ahead of
		// the notice (see ErrConcurrent).
		c.breakWith(&RankError{Rank: w.rank, Err: fmt.Errorf("%w: %s", cause, why)})
		w.tellWait(c.group, control{Kind: "concurrent", Comm: c.id, Reason: why}, concurrentNoticeWait)
		return
	}
	c.breakWith(&RankError{Rank: w.rank, Err: fmt.Errorf("%w: %s", cause, why)})
	w.tell(c.group, control{Kind: "abort", Comm: c.id, Reason: why})
}

// concurrentNoticeWait bounds how long a call that found another running
// waits for its notices to be handed to the links (a link blocked by a
// stopped peer must not hold it).
const concurrentNoticeWait = time.Second

// Barrier returns once every rank of the communicator has called it
// (dissemination algorithm: ceil(log2 P) rounds).
func (c *Comm) Barrier(ctx context.Context) error {
	k, cancel, err := c.begin(ctx, opBarrier)
	if err != nil {
		return err
	}
	defer cancel()
	n, r := c.Size(), c.rank
	for d := 1; d < n; d *= 2 {
		done, err := k.isend((r+d)%n, nil)
		if err != nil {
			return k.err(err)
		}
		if _, err := k.recv((r - d + n) % n); err != nil {
			return k.err(err)
		}
		if err := done(); err != nil {
			return k.err(err)
		}
	}
	return nil
}

// Gatherv collects every rank's data at root, indexed by rank; the sizes
// may differ. Other ranks get nil.
func (c *Comm) Gatherv(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return c.gather(ctx, root, data, false)
}

// Gather is Gatherv for equal sizes: root reports ErrMismatch if a rank
// sent a different size than its own.
func (c *Comm) Gather(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return c.gather(ctx, root, data, true)
}

func (c *Comm) gather(ctx context.Context, root int, data []byte, equal bool) ([][]byte, error) {
	if err := c.checkPeer("Gather", "root", root, false); err != nil {
		return nil, err
	}
	k, cancel, err := c.beginRooted(ctx, opGather, root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if c.rank != root {
		if err := k.expectNothing(); err != nil {
			return nil, k.err(err)
		}
		return nil, k.err(k.send(root, data))
	}
	n := c.Size()
	out := make([][]byte, n)
	reqs := make([]*recvReq, n)
	for r := 0; r < n; r++ {
		if r != root {
			reqs[r] = c.postRecv(collCtx(c.id), r, k.tag)
		}
	}
	out[root] = append([]byte{}, data...)
	for r := 0; r < n; r++ {
		if r == root {
			continue
		}
		out[r], err = k.finish(reqs[r])
		if err == nil && equal && len(out[r]) != len(data) {
			// The senders are done: tell them, so that none returns
			// from its next call with data.
			why := fmt.Sprintf("Gather: rank %d sent %d bytes, root %d has %d (use Gatherv for different sizes)", r, len(out[r]), c.rank, len(data))
			c.abort(why)
			err = &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
		}
		if err != nil {
			for q := r + 1; q < n; q++ {
				if reqs[q] != nil {
					c.w.unpost(collCtx(c.id), reqs[q])
				}
			}
			return nil, k.err(err)
		}
	}
	return out, nil
}

// Scatterv sends parts[i] from root to rank i and returns this rank's
// part. Only root's parts is used; it must have one entry per rank.
func (c *Comm) Scatterv(ctx context.Context, root int, parts [][]byte) ([]byte, error) {
	return c.scatter(ctx, root, parts, false)
}

// Scatter is Scatterv for equal sizes: root rejects parts of different
// lengths before sending anything.
func (c *Comm) Scatter(ctx context.Context, root int, parts [][]byte) ([]byte, error) {
	return c.scatter(ctx, root, parts, true)
}

func (c *Comm) scatter(ctx context.Context, root int, parts [][]byte, equal bool) ([]byte, error) {
	if err := c.checkPeer("Scatter", "root", root, false); err != nil {
		return nil, err
	}
	if c.rank == root {
		if len(parts) != c.Size() {
			return nil, &ArgError{Op: "Scatter", Arg: "parts", Msg: fmt.Sprintf("%d parts for %d ranks", len(parts), c.Size())}
		}
		if equal {
			for i, p := range parts {
				if len(p) != len(parts[0]) {
					return nil, &ArgError{Op: "Scatter", Arg: "parts", Msg: fmt.Sprintf("part %d has %d bytes, part 0 has %d (use Scatterv)", i, len(p), len(parts[0]))}
				}
			}
		}
	}
	k, cancel, err := c.beginRooted(ctx, opScatter, root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if c.rank != root {
		data, err := k.recv(root)
		return data, k.err(err)
	}
	if err := k.expectNothing(); err != nil {
		return nil, k.err(err)
	}
	var dones []func() error
	for r, p := range parts {
		if r == root {
			continue
		}
		done, err := k.isend(r, p)
		if err != nil {
			return nil, k.err(err)
		}
		dones = append(dones, done)
	}
	if err := finishAll(dones); err != nil {
		return nil, k.err(err)
	}
	return append([]byte{}, parts[root]...), nil
}

// exchangeSmall gives every rank every rank's (small) data in one round of
// direct messages: used inside collectives for counts and keys.
func (k *coll) exchangeSmall(data []byte) ([][]byte, error) {
	return k.exchange(data, nil)
}

// exchange sends every other rank r one message, head followed by tail(r)
// (tail may be nil), and receives one message from each, in one round of
// direct messages; head is this rank's own entry. The messages go eagerly
// whatever their size: callers keep them small.
func (k *coll) exchange(head []byte, tail func(r int) []byte) ([][]byte, error) {
	c := k.c
	n := c.Size()
	out := make([][]byte, n)
	reqs := make([]*recvReq, n)
	for r := 0; r < n; r++ {
		if r != c.rank {
			reqs[r] = c.postRecv(collCtx(c.id), r, k.tag)
		}
	}
	// unpost withdraws the receives not finished yet.
	unpost := func() {
		for _, r := range reqs {
			if r != nil {
				c.w.unpost(collCtx(c.id), r)
			}
		}
	}
	h := transport.Header{Type: transport.MsgEager, Comm: collCtx(c.id), Tag: k.tag, Flags: k.op}
	for r := 0; r < n; r++ {
		if r == c.rank {
			continue
		}
		var t []byte
		if tail != nil {
			t = tail(r)
		}
		err := c.concurrentErr()
		if err == nil {
			err = c.w.sendParts(k.ctx, c.group[r], h, head, t)
		}
		if err != nil {
			unpost()
			return nil, err
		}
	}
	out[c.rank] = head
	for r := 0; r < n; r++ {
		if r == c.rank {
			continue
		}
		var err error
		out[r], err = k.finish(reqs[r])
		reqs[r] = nil
		if err != nil {
			unpost()
			return nil, err
		}
	}
	return out, nil
}

func putInt64s(xs []int64) []byte {
	b := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func getInt64s(b []byte) []int64 {
	xs := make([]int64, len(b)/8)
	for i := range xs {
		xs[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return xs
}

// finishAll waits for every started send, in order, and returns the first
// error.
func finishAll(dones []func() error) error {
	for _, d := range dones {
		if err := d(); err != nil {
			return err
		}
	}
	return nil
}
