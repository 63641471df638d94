package comm

import (
	"context"
	"fmt"
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
	rates, err := c.meshRates(func(i, j int) int64 { return int64(counts[j]) * int64(unsafe.Sizeof(z)) })
	if err != nil {
		return nil, k.err(err)
	}
	blocks, err := exchangeBlocks[T](k, counts[c.rank], func(r int) []byte { return AsBytes(block(r)) }, rates)
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
// see meshRates) the link to each rank is paced to its rate and every
// block goes eagerly, landing in place.
func exchangeBlocks[T Number](k *coll, want int, mine func(r int) []byte, rates []float64) ([][]byte, error) {
	c := k.c
	n, me := c.Size(), c.rank
	var z T
	size := want * int(unsafe.Sizeof(z))
	into := make([]byte, n*size)
	reqs := make([]*recvReq, n)
	for r := range n {
		if r != me {
			reqs[r] = k.postSeqInto(r, 0, into[r*size:(r+1)*size:(r+1)*size])
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
			go func() {
				wait, err := k.isendSeq(r, mine(r), true, 0)
				if err == nil {
					err = wait()
				}
				done <- err
			}()
			dones = append(dones, func() error { return <-done })
			continue
		}
		done, err := k.isend(r, mine(r))
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
				err = &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d sent %d bytes for rank %d, whose block here is %d", ErrMismatch, r, len(b), me, size)}
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

// meshRates plans an exchange in which rank i sends bytes(i, j) to every
// other rank j at once, unpaced or paced by Alltoallv's rule
// (collective.PlanFlowsAuto on the fabric of the model), and returns this
// rank's pacing rate to each rank, or nil for an unpaced exchange. Every
// rank gets the same plan from the same sizes.
func (c *Comm) meshRates(bytes func(i, j int) int64) ([]float64, error) {
	n := c.Size()
	if n < 2 || !c.canPace() {
		return nil, nil
	}
	x := &collective.Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
		for j := range x.Bytes[i] {
			if i != j {
				x.Bytes[i][j] = bytes(i, j)
			}
		}
	}
	p, err := collective.PlanFlowsAuto(collective.FabricFromModel(c.model()), x, collective.FlowOptions{})
	if err != nil || p.Algorithm != collective.Paced {
		return nil, err
	}
	return c.pacingRates(p), nil
}
