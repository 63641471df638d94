package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"unsafe"

	"github.com/hetcomm/hetcomm/collective"
)

// ReduceScatter combines every rank's data with op, element by element in
// rank order, and gives rank i the counts[i] elements that start at
// counts[0]+...+counts[i-1] (MPI_Reduce_scatter). Every rank passes the
// same counts, one per rank, and data of sum(counts) elements. Each rank
// sends every other its block in one round of direct messages (paced,
// when the model predicts that pays, as Alltoallv's paced plan) and
// combines the blocks it receives: every rank sends and receives
// (P-1)/P of the data, the least any algorithm moves.
func ReduceScatter[T Number](ctx context.Context, c *Comm, data []T, counts []int, op Op[T]) ([]T, error) {
	n := c.Size()
	if len(counts) != n {
		return nil, &ArgError{Op: "ReduceScatter", Arg: "counts", Msg: fmt.Sprintf("%d counts for %d ranks", len(counts), n)}
	}
	total := 0
	for i, k := range counts {
		if k < 0 {
			return nil, &ArgError{Op: "ReduceScatter", Arg: "counts", Msg: fmt.Sprintf("counts[%d] = %d", i, k)}
		}
		total += k
	}
	if len(data) != total {
		return nil, &ArgError{Op: "ReduceScatter", Arg: "data", Msg: fmt.Sprintf("%d elements, counts add up to %d", len(data), total)}
	}
	if op == nil {
		return nil, &ArgError{Op: "ReduceScatter", Arg: "op", Msg: "nil"}
	}
	k, cancel, err := c.begin(ctx, opReduceScatter)
	if err != nil {
		return nil, err
	}
	defer cancel()
	offset := make([]int, n+1)
	for i := range counts {
		offset[i+1] = offset[i] + counts[i]
	}
	block := func(r int) []T { return data[offset[r]:offset[r+1]] }
	var z T
	plan, err := c.ReduceScatterPlan(counts, int(unsafe.Sizeof(z)))
	if err != nil {
		return nil, k.err(err)
	}
	var rates []float64
	if plan != nil && plan.Algorithm == collective.Paced {
		rates = c.pacingRates(plan)
	}
	// Every block carries the counts' digest and the operator, so that
	// ranks that pass others fail instead of combining blocks cut
	// differently.
	sig := reduceScatterSig(counts, int(unsafe.Sizeof(z)), opCode(op))
	if err := k.expectSig(sig); err != nil {
		return nil, k.err(err)
	}
	blocks, err := exchangeBlocks[T](k, counts[c.rank], func(r int) []byte { return AsBytes(block(r)) }, rates, sig)
	if err != nil {
		return nil, k.err(err)
	}
	// Combine in rank order.
	me := c.rank
	acc := make([]T, counts[me])
	for r := range n {
		theirs := block(me)
		if r != me {
			if theirs, err = FromBytes[T](blocks[r]); err != nil {
				return nil, k.err(&RankError{Rank: c.group[r], Err: err})
			}
		}
		if r == 0 {
			copy(acc, theirs)
		} else {
			op(acc, theirs)
		}
	}
	return acc, nil
}

// exchangeBlocks sends every other rank r the block mine(r) and receives
// from each a block that must be want elements of T (ErrMismatch, naming
// the rank, otherwise), all at once, into one buffer: large blocks go by
// rendezvous, every grant at the same time; with rates (a paced plan,
// see ReduceScatterPlan) the link to each rank is paced to its rate and every
// block goes eagerly, landing in place.
func exchangeBlocks[T Number](k *coll, want int, mine func(r int) []byte, rates []float64, sig uint64) ([][]byte, error) {
	c := k.c
	n, me := c.Size(), c.rank
	var z T
	size := want * int(unsafe.Sizeof(z))
	into := make([]byte, n*size)
	reqs := make([]*recvReq, n)
	for r := range n {
		if r != me {
			reqs[r] = k.postSeqInto(r, sig, into[r*size:(r+1)*size:(r+1)*size])
		}
	}
	if rates != nil {
		defer c.pace(rates)()
	}
	var dones []func() error
	for r := range n {
		if r == me {
			continue
		}
		if rates != nil {
			// An eager send returns once written: one goroutine each, so
			// that every paced link carries its block at once.
			done := make(chan error, 1)
			go func() { done <- k.sendEager(r, mine(r), sig) }()
			dones = append(dones, func() error { return <-done })
			continue
		}
		done, err := k.isendSeq(r, mine(r), sig)
		if err != nil {
			for _, q := range reqs {
				if q != nil {
					c.w.unpost(collCtx(c.id), q)
				}
			}
			return nil, err
		}
		dones = append(dones, done)
	}
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		if r == me {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := k.finishInto(reqs[r], into[r*size:(r+1)*size:(r+1)*size])
			if err == nil && len(b) != size {
				why := fmt.Sprintf("rank %d sent %d bytes for rank %d, whose block here is %d", r, len(b), me, size)
				c.abort(why)
				err = &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
			}
			got[r], errs[r] = b, err
		}()
	}
	wg.Wait()
	sendErr := finishAll(dones)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return got, sendErr
}

// ReduceScatterBlock is ReduceScatter with equal blocks: data holds P
// blocks of the same length, and rank i gets block i combined over every
// rank (MPI_Reduce_scatter_block).
func ReduceScatterBlock[T Number](ctx context.Context, c *Comm, data []T, op Op[T]) ([]T, error) {
	n := c.Size()
	if len(data)%n != 0 {
		return nil, &ArgError{Op: "ReduceScatterBlock", Arg: "data", Msg: fmt.Sprintf("%d elements are not %d equal blocks", len(data), n)}
	}
	counts := make([]int, n)
	for i := range counts {
		counts[i] = len(data) / n
	}
	return ReduceScatter(ctx, c, data, counts, op)
}

// ReduceScatterPlan returns how ReduceScatter sends when rank r's block
// is counts[r] elements of elemSize bytes: every block to its rank at
// once, as a flow-level plan (collective.PlanFlowsAuto on the model's
// fabric: Naive, or Paced with each message's rate when pacing pays and
// the links can pace). It is local: no message is sent. Nil for one rank.
func (c *Comm) ReduceScatterPlan(counts []int, elemSize int) (*collective.Plan, error) {
	n := c.Size()
	if len(counts) != n {
		return nil, &ArgError{Op: "ReduceScatter", Arg: "counts", Msg: fmt.Sprintf("%d counts for %d ranks", len(counts), n)}
	}
	if n < 2 {
		return nil, nil
	}
	sizes := make([]int64, n)
	for j, k := range counts {
		sizes[j] = int64(k) * int64(elemSize)
	}
	return cached(c, &c.rsKey, &c.rsPlan, planKey(c, "reducescatter", sizes), func() (*collective.Plan, error) {
		x := collective.MeshExchange(n, func(_, j int) int64 { return sizes[j] })
		return collective.PlanFlowsAuto(collective.FabricFromModel(c.model()), x, collective.FlowOptions{NoPacing: !c.canPace()})
	})
}

// allreducePipelined is reduce-scatter then allgather with every rank's
// block (counts[r] elements) cut into segs pieces, the allgather of a
// piece starting as soon as that piece is reduced, while the
// reduce-scatter of the next goes on (collective.AllreducePlan.Segments).
// Every message is sent eagerly and lands in place: piece s of rank j's
// block travels as message 2s+1 to j (reduce-scatter) and, reduced, as
// message 2s+2 from j to every rank, into out. Pieces are combined in
// rank order.
func allreducePipelined[T Number](ctx context.Context, c *Comm, data, out []T, op Op[T], counts []int, segs int) error {
	k, cancel, err := c.begin(ctx, opAllreduce)
	if err != nil {
		return err
	}
	defer cancel()
	n, me := c.Size(), c.rank
	if len(counts) != n {
		return k.err(fmt.Errorf("%w: %d blocks for %d ranks", ErrProtocol, len(counts), n))
	}
	if len(data) > 0 && &out[0] == &data[0] {
		data = slices.Clone(data) // the allgather lands in out
	}
	offset := make([]int, n+1)
	for r, c := range counts {
		offset[r+1] = offset[r] + c
	}
	if offset[n] != len(data) {
		return k.err(fmt.Errorf("%w: blocks of %d elements for %d", ErrProtocol, offset[n], len(data)))
	}
	// piece returns the bounds of piece s of rank r's block.
	piece := func(r, s int) (int, int) {
		return offset[r] + counts[r]*s/segs, offset[r] + counts[r]*(s+1)/segs
	}
	ctx2, stop := context.WithCancel(k.ctx)
	defer stop()
	sk := *k
	sk.ctx = ctx2
	// Post every receive: reduce-scatter pieces into a staging area, one
	// slot per sender, allgather pieces straight into out.
	stage := make([]T, n*counts[me])
	rsReq := make([][]*recvReq, segs)
	agReq := make([][]*recvReq, segs)
	for s := 0; s < segs; s++ {
		rsReq[s], agReq[s] = make([]*recvReq, n), make([]*recvReq, n)
		lo, hi := piece(me, s)
		for r := 0; r < n; r++ {
			if r == me {
				continue
			}
			st := stage[r*counts[me]+lo-offset[me] : r*counts[me]+hi-offset[me] : r*counts[me]+hi-offset[me]]
			rsReq[s][r] = sk.postSeqInto(r, uint64(2*s+1), AsBytes(st))
			plo, phi := piece(r, s)
			agReq[s][r] = sk.postSeqInto(r, uint64(2*s+2), AsBytes(out[plo:phi:phi]))
		}
	}
	errs := make(chan error, 2*n+1)
	fail := func(err error) {
		errs <- err
		stop()
	}
	send := func(dst int, useq uint64, b []byte) bool {
		if err := sk.sendEager(dst, b, useq); err != nil {
			fail(err)
			return false
		}
		return true
	}
	reduced := make([]chan struct{}, segs)
	for s := range reduced {
		reduced[s] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		wg.Add(2)
		go func() { // the reduce-scatter pieces for r, all at once
			defer wg.Done()
			for s := 0; s < segs; s++ {
				lo, hi := piece(r, s)
				if !send(r, uint64(2*s+1), AsBytes(data[lo:hi])) {
					return
				}
			}
		}()
		go func() { // this rank's reduced pieces, each once reduced
			defer wg.Done()
			for s := 0; s < segs; s++ {
				select {
				case <-reduced[s]:
				case <-ctx2.Done():
					return
				}
				lo, hi := piece(me, s)
				if !send(r, uint64(2*s+2), AsBytes(out[lo:hi])) {
					return
				}
			}
		}()
	}
	// Reduce each piece in rank order as its pieces arrive.
	for s := 0; s < segs && ctx2.Err() == nil; s++ {
		lo, hi := piece(me, s)
		acc := out[lo:hi]
		for r := 0; r < n; r++ {
			theirs := data[lo:hi]
			if r != me {
				st := stage[r*counts[me]+lo-offset[me] : r*counts[me]+hi-offset[me]]
				got, err := sk.finishInto(rsReq[s][r], AsBytes(st))
				if err == nil && len(got) != len(AsBytes(st)) {
					err = &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d sent %d bytes of piece %d, want %d", ErrMismatch, r, len(got), s, len(AsBytes(st)))}
				}
				if err != nil {
					fail(err)
					break
				}
				rsReq[s][r] = nil
				theirs = st
			}
			if r == 0 {
				copy(acc, theirs)
			} else {
				op(acc, theirs)
			}
		}
		if ctx2.Err() != nil {
			break // a piece not fully reduced is never sent
		}
		close(reduced[s])
	}
	// Receive everyone's reduced pieces.
	for s := 0; s < segs && ctx2.Err() == nil; s++ {
		for r := 0; r < n; r++ {
			if r == me {
				continue
			}
			plo, phi := piece(r, s)
			dst := AsBytes(out[plo:phi:phi])
			got, err := sk.finishInto(agReq[s][r], dst)
			if err == nil && len(got) != len(dst) {
				err = &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d sent %d bytes of its reduced piece %d, want %d", ErrMismatch, r, len(got), s, len(dst))}
			}
			if err == nil && len(got) > 0 && unsafe.SliceData(got) != unsafe.SliceData(dst) {
				copy(dst, got)
			}
			if err != nil {
				fail(err)
				break
			}
			agReq[s][r] = nil
		}
	}
	wg.Wait()
	if ctx2.Err() != nil {
		// Withdraw the receives not finished, so that no later message
		// lands in the caller's buffers.
		for s := 0; s < segs; s++ {
			for r := 0; r < n; r++ {
				for _, q := range []*recvReq{rsReq[s][r], agReq[s][r]} {
					if q != nil {
						c.w.unpost(collCtx(c.id), q)
					}
				}
			}
		}
	}
	close(errs)
	if err := <-errs; err != nil {
		return k.err(err)
	}
	return k.err(ctx2.Err())
}

// reduceScatterSig is what every block of a reduce-scatter carries:
// 1<<62 | the operator (opCode) << 54 | a 48-bit digest of the counts
// and the element size. (Bit 63 would make it a wildcard to a receive.)
func reduceScatterSig(counts []int, elemSize int, op uint64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(elemSize))
	h.Write(b[:])
	for _, n := range counts {
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	return 1<<62 | op<<54 | h.Sum64()&(1<<48-1)
}
