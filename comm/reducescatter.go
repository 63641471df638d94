package comm

import (
	"context"
	"fmt"
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
	parts, err := k.exchange(nil, func(r int) []byte { return AsBytes(block(r)) })
	if err != nil {
		return nil, k.err(err)
	}
	me := c.rank
	var acc []T
	for r := range n {
		theirs := block(me)
		if r != me {
			got, err := FromBytes[T](parts[r])
			if err == nil && len(got) != counts[me] {
				err = fmt.Errorf("%w: rank %d sent %d elements for rank %d, whose count here is %d", ErrMismatch, r, len(got), me, counts[me])
			}
			if err != nil {
				return nil, k.err(&RankError{Rank: c.group[r], Err: err})
			}
			theirs = got
		}
		if acc == nil {
			acc = append(make([]T, 0, counts[me]), theirs...)
		} else {
			op(acc, theirs)
		}
	}
	return acc, nil
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
