package comm

import (
	"context"
	"fmt"
	"sync"
	"unsafe"
)

// ReduceScatter combines every rank's data with op, element by element in
// rank order, and gives rank i the counts[i] elements that start at
// counts[0]+...+counts[i-1] (MPI_Reduce_scatter). Every rank passes the
// same counts, one per rank, and data of sum(counts) elements. Each rank
// sends every other its block in one round of direct messages and
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
	blocks, err := exchangeBlocks[T](k, counts[c.rank], func(r int) []byte { return AsBytes(block(r)) })
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
// the rank, otherwise), all at once: large blocks go by rendezvous, every
// grant at the same time, into one buffer.
func exchangeBlocks[T Number](k *coll, want int, mine func(r int) []byte) ([][]byte, error) {
	c := k.c
	n, me := c.Size(), c.rank
	var z T
	size := want * int(unsafe.Sizeof(z))
	reqs := make([]*recvReq, n)
	for r := range n {
		if r != me {
			reqs[r] = c.postRecv(collCtx(c.id), r, k.tag)
		}
	}
	var dones []func() error
	for r := range n {
		if r == me {
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
	into := make([]byte, n*size)
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
