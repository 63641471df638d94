package comm

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/hetcomm/hetcomm/collective"
)

// bcastFirst marks the first piece of a broadcast: its sequence number
// is bcastFirst | root << bcastRootShift | the message's size, so that a
// rank that did not know the size (only root does) learns it, and with
// it the plan, from the first piece, and a rank that was told another
// root finds out. The other pieces are numbered 1, 2, ...
const (
	bcastFirst     = uint64(1) << 63
	bcastRootShift = 40 // sizes below 1 TiB, roots below 2^23
)

// bcastHead is the first piece's sequence number.
func bcastHead(root int, size int64) uint64 {
	return bcastFirst | uint64(root)<<bcastRootShift | uint64(size)
}

// bcastKey identifies a broadcast plan: the same model, root, size and
// algorithm give the same plan on every rank.
type bcastKey struct {
	gen   uint64
	root  int
	bytes int64
	algo  collective.Algorithm
}

// Bcast sends root's data to every rank and returns it (on root, data
// itself). Other ranks pass nil (their data argument is ignored).
//
// The message goes down a tree planned from the cost model
// (collective.PlanBcast): the binomial tree in rank order, the tree that
// informs every rank earliest by the measured latencies, or a tree in
// which fast ranks relay and slow ones are leaves; large messages go in
// pieces that every rank forwards as soon as it has them. Where no one
// tree gets near the bound (relays whose egress is short), the pieces
// are dealt to several trees at once, each rank relaying a share. Every rank
// makes the same plan from root's size, which travels with the first
// piece. Config.Bcast, or WithAlgorithm for one call, forces
// collective.BcastBinomial or collective.BcastPipeline; it must be the
// same on every rank. On loopback Auto keeps the binomial tree and sends
// the message whole (see Comm.loopback).
func (c *Comm) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	return c.bcast(ctx, root, data, nil)
}

// bcast is Bcast; a rank other than root receives into buf when it is
// large enough.
func (c *Comm) bcast(ctx context.Context, root int, data, buf []byte) ([]byte, error) {
	if err := c.checkPeer("Bcast", "root", root, false); err != nil {
		return nil, err
	}
	k, cancel, err := c.beginRooted(ctx, opBcast, root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	algo := algorithmFor(ctx, c.w.cfg.Bcast, collective.BcastBinomial, collective.BcastPipeline)
	if c.rank == root {
		if data == nil {
			data = []byte{}
		}
		if int64(len(data)) >= 1<<bcastRootShift {
			return nil, k.err(&ArgError{Op: "Bcast", Arg: "data", Msg: fmt.Sprintf("%d bytes: at most 1 TiB", len(data))})
		}
		if c.Size() == 1 {
			return data, nil
		}
		k.sig = bcastHead(root, int64(len(data)))
		if err := k.expectNothing(); err != nil {
			return nil, k.err(err)
		}
		plan, err := c.planBcast(root, int64(len(data)), algo)
		if err != nil {
			return nil, k.err(err)
		}
		return data, k.err(c.forward(k, plan, data, nil))
	}
	// The first piece comes from this rank's parent in the plan's first
	// tree, whoever the plan makes it. Where the plan packs several
	// trees, pieces of the others may come first: they are kept until
	// the plan says where they belong.
	var stash []stashedPiece
	var first []byte
	var m *inMsg
	for {
		first, m, err = k.finishMsg(c.postRecv(collCtx(c.id), AnySource, k.tag), buf)
		if err != nil {
			return nil, k.err(err)
		}
		if m.useq&bcastFirst != 0 {
			break
		}
		if len(stash) >= bcastMaxPieces {
			return nil, k.err(&RankError{Rank: m.src, Err: fmt.Errorf("%w: Bcast: %d pieces came before the first", ErrProtocol, len(stash)+1)})
		}
		stash = append(stash, stashedPiece{src: c.index[m.src], seq: m.useq, data: bytes.Clone(first)})
	}
	src := c.index[m.src]
	k.sig = m.useq
	size := int64(m.useq & (1<<bcastRootShift - 1))
	if theirs := int(m.useq &^ bcastFirst >> bcastRootShift); theirs != root {
		why := fmt.Sprintf("Bcast: rank %d broadcast from root %d, rank %d expected root %d", src, theirs, c.rank, root)
		c.abort(why)
		return nil, k.err(&RankError{Rank: m.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)})
	}
	plan, err := c.planBcast(root, size, algo)
	if err != nil {
		return nil, k.err(err)
	}
	if p := plan.Parent[c.rank]; p != src {
		why := fmt.Sprintf("Bcast from rank %d: rank %d got its first piece from rank %d, but its plan has it receive from rank %d (the ranks use different algorithms or models)", root, c.rank, src, p)
		c.abort(why)
		return nil, k.err(&RankError{Rank: m.src, Err: fmt.Errorf("%w: %s", ErrMismatch, why)})
	}
	if want := min(plan.Chunk, size); int64(len(first)) != want {
		return nil, k.err(&RankError{Rank: m.src, Err: fmt.Errorf("%w: Bcast: the first piece from rank %d has %d bytes, not %d", ErrProtocol, src, len(first), want)})
	}
	switch {
	case int64(cap(buf)) >= size:
		data = buf[:size]
	case int64(cap(first)) >= size:
		data = first[:size] // a message sent whole is all there
	default:
		data = make([]byte, size)
	}
	if len(first) > 0 && unsafe.SliceData(first) != unsafe.SliceData(data) {
		copy(data, first)
	}
	got := make([]bool, max(plan.Chunks, 1))
	got[0] = true
	for _, sp := range stash {
		if err := c.placePiece(plan, data, sp, got); err != nil {
			return nil, k.err(err)
		}
	}
	return data, k.err(c.forward(k, plan, data, got))
}

// bcastMaxPieces bounds the pieces a rank keeps before a broadcast's
// first: no plan has more.
const bcastMaxPieces = 1 << 10

// stashedPiece is a piece of a packed broadcast that came before the
// first one.
type stashedPiece struct {
	src  int // the rank it came from (communicator rank)
	seq  uint64
	data []byte
}

// placePiece checks a piece that came before the first against the plan
// (its number, the rank it must come from, its size), copies it into
// place and marks it received.
func (c *Comm) placePiece(plan *collective.BcastPlan, data []byte, sp stashedPiece, got []bool) error {
	i := int(min(sp.seq, uint64(len(got))))
	if i < 1 || i >= len(got) || got[i] {
		return &RankError{Rank: c.group[sp.src], Err: fmt.Errorf("%w: Bcast: rank %d sent piece %d of %d before the first", ErrProtocol, sp.src, sp.seq, len(got))}
	}
	dst := bcastPiece(plan, data, i)
	if parent, _ := plan.Tree(i); parent[c.rank] != sp.src || len(sp.data) != len(dst) {
		why := fmt.Sprintf("Bcast from rank %d: rank %d got piece %d (%d bytes) from rank %d, but its plan has it receive %d bytes from rank %d (the ranks use different algorithms or models)", plan.Root, c.rank, i, len(sp.data), sp.src, len(dst), parent[c.rank])
		c.abort(why)
		return &RankError{Rank: c.group[sp.src], Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
	}
	copy(dst, sp.data)
	got[i] = true
	return nil
}

// bcastPiece returns piece i of a broadcast's data.
func bcastPiece(plan *collective.BcastPlan, data []byte, i int) []byte {
	size := int64(len(data))
	lo := min(int64(i)*plan.Chunk, size)
	hi := min(lo+plan.Chunk, size)
	return data[lo:hi:hi]
}

// BcastPlan returns the plan Bcast runs for a message of bytes bytes from
// root with ctx's algorithm (WithAlgorithm, else Config.Bcast): the tree,
// the pieces and the predicted time. It is local: no message is sent.
func (c *Comm) BcastPlan(ctx context.Context, root int, bytes int64) (*collective.BcastPlan, error) {
	if err := c.checkPeer("Bcast", "root", root, false); err != nil {
		return nil, err
	}
	return c.planBcast(root, bytes, algorithmFor(ctx, c.w.cfg.Bcast, collective.BcastBinomial, collective.BcastPipeline))
}

// planBcast returns the broadcast plan for a size, reusing the last one
// when the model, root, size and algorithm repeat.
func (c *Comm) planBcast(root int, size int64, algo collective.Algorithm) (*collective.BcastPlan, error) {
	key := bcastKey{c.w.modelGen.Load(), root, size, algo}
	c.planMu.Lock()
	defer c.planMu.Unlock()
	if c.bcastPlan != nil && c.bcastKey == key {
		return c.bcastPlan, nil
	}
	auto := algo == "" || algo == collective.Auto
	if auto && c.loopback() {
		algo = collective.BcastBinomial
	}
	p, err := sharedPlan(c, "bcast", fmt.Sprint(root, size, algo), func() (*collective.BcastPlan, error) {
		return collective.PlanBcast(c.model(), root, size, algo)
	})
	if err != nil {
		return nil, err
	}
	if auto && c.loopback() && p.Chunks > 1 { // never shared: loopback is not in-process
		// One machine: see loopback. The binomial tree, whole.
		p.Chunk, p.Chunks = size, 1
		p.Predicted = collective.PredictBcast(c.model(), nil, p)
	}
	c.bcastKey, c.bcastPlan = key, p
	return p, nil
}

// forward runs this rank's part of a broadcast plan on data (all of it
// on root; elsewhere the pieces marked in got are in place, and the
// others are received into data here): one goroutine per child sends it
// its pieces in order, each as soon as it is in. In a packed plan each
// piece goes down its own tree (BcastPlan.Tree), so a rank may have other
// children, and another parent, for each.
func (c *Comm) forward(k *coll, plan *collective.BcastPlan, data []byte, got []bool) error {
	size := int64(len(data))
	pieces := max(plan.Chunks, 1)
	if pieces == 1 {
		// Sent whole: start every child's send, then wait for them all.
		var dones []func() error
		for _, child := range plan.Children[c.rank] {
			done, err := k.isendSeq(child, data, bcastHead(plan.Root, size))
			if err != nil {
				return err
			}
			dones = append(dones, done)
		}
		return finishAll(dones)
	}
	ready := make([]chan struct{}, pieces)
	var children []int       // in the order they first get a piece
	sends := map[int][]int{} // child -> the pieces it gets from this rank
	for i := range ready {
		ready[i] = make(chan struct{})
		if c.rank == plan.Root || got[i] {
			close(ready[i])
		}
		_, kids := plan.Tree(i)
		for _, child := range kids[c.rank] {
			if sends[child] == nil {
				children = append(children, child)
			}
			sends[child] = append(sends[child], i)
		}
	}
	ctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	sk := *k
	sk.ctx = ctx
	var wg sync.WaitGroup
	errs := make(chan error, len(children)+pieces+1)
	fail := func(err error) {
		errs <- err
		cancel()
	}
	for _, child := range children {
		wg.Add(1)
		go func(child int) {
			defer wg.Done()
			for _, i := range sends[child] {
				select {
				case <-ready[i]:
				case <-ctx.Done():
					return
				}
				useq := uint64(i)
				if i == 0 {
					useq = bcastHead(plan.Root, size)
				}
				// Pieces go eagerly, so that none waits a round trip for
				// a grant.
				if err := sk.sendEager(child, bcastPiece(plan, data, i), useq); err != nil {
					fail(err)
					return
				}
			}
		}(child)
	}
	if c.rank != plan.Root {
		c.receivePieces(&sk, plan, data, got, ready, &wg, fail)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// receivePieces receives the pieces of a broadcast not yet in (got) into
// place, from each one's parent, marking each ready as it arrives: one
// goroutine per parent (in wg) takes that parent's pieces in order, as
// it sends them. An error goes to fail.
func (c *Comm) receivePieces(k *coll, plan *collective.BcastPlan, data []byte, got []bool, ready []chan struct{}, wg *sync.WaitGroup, fail func(error)) {
	var parents []int
	from := map[int][]int{}
	reqs := make([]*recvReq, len(got))
	for i, in := range got {
		if in {
			continue
		}
		parent, _ := plan.Tree(i)
		p := parent[c.rank]
		if from[p] == nil {
			parents = append(parents, p)
		}
		from[p] = append(from[p], i)
		reqs[i] = k.postSeqInto(p, uint64(i), bcastPiece(plan, data, i))
	}
	for _, p := range parents {
		wg.Add(1)
		go func(p int, list []int) {
			defer wg.Done()
			for n, i := range list {
				dst := bcastPiece(plan, data, i)
				in, err := k.finishInto(reqs[i], dst)
				if err == nil && len(in) != len(dst) {
					err = &RankError{Rank: c.group[p], Err: fmt.Errorf("%w: Bcast: piece %d from rank %d has %d bytes, not %d", ErrProtocol, i, p, len(in), len(dst))}
				}
				if err != nil {
					for _, j := range list[n+1:] {
						c.w.unpost(collCtx(c.id), reqs[j])
					}
					fail(err)
					return
				}
				if len(in) > 0 && unsafe.SliceData(in) != unsafe.SliceData(dst) {
					copy(dst, in)
				}
				close(ready[i])
			}
		}(p, from[p])
	}
}
