package comm

import (
	"context"
	"fmt"
)

// Prefix reductions, reduce-scatter and the allocation-free Allreduce,
// with MPI's semantics: ops combine in rank order (lower ranks on the
// left), so an op need only be associative.

// Scan returns, on rank r, data of ranks 0..r combined with op in rank
// order (MPI_Scan). Every rank must pass the same length. Recursive
// doubling: ceil(log2 P) rounds.
func Scan[T Number](ctx context.Context, c *Comm, data []T, op Op[T]) ([]T, error) {
	out, _, err := scan(ctx, c, data, op, opScan)
	return out, err
}

// Exscan returns, on rank r > 0, data of ranks 0..r-1 combined with op
// in rank order (MPI_Exscan); rank 0 gets nil. Every rank must pass the
// same length.
func Exscan[T Number](ctx context.Context, c *Comm, data []T, op Op[T]) ([]T, error) {
	_, out, err := scan(ctx, c, data, op, opExscan)
	return out, err
}

// scan computes both prefixes by recursive doubling: after the round
// with partner rank^mask, partial holds the combination of the aligned
// block of 2*mask ranks around this one, incl the inclusive and
// exclusive prefixes of this rank within it.
func scan[T Number](ctx context.Context, c *Comm, data []T, op Op[T], code uint16) (incl, excl []T, err error) {
	if op == nil {
		return nil, nil, &ArgError{Op: opName(code), Arg: "op", Msg: "nil"}
	}
	k, cancel, err := c.begin(ctx, code)
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	n, me := c.Size(), c.rank
	partial := append([]T{}, data...)
	incl = append([]T{}, data...)
	for mask := 1; mask < n; mask <<= 1 {
		peer := me ^ mask
		if peer >= n {
			continue
		}
		done, err := k.isend(peer, AsBytes(partial))
		if err != nil {
			return nil, nil, k.err(err)
		}
		theirs, err := recvSlice[T](k, peer, len(partial))
		if err == nil {
			err = done()
		}
		if err != nil {
			return nil, nil, k.err(err)
		}
		if peer < me {
			// theirs comes first in rank order.
			incl = combined(op, theirs, incl)
			if excl == nil {
				excl = append([]T{}, theirs...)
			} else {
				excl = combined(op, theirs, excl)
			}
			partial = combined(op, theirs, partial)
		} else {
			op(partial, theirs)
		}
	}
	return incl, excl, nil
}

// combined returns a op b (a on the left) in a new slice.
func combined[T Number](op Op[T], a, b []T) []T {
	out := append([]T{}, a...)
	op(out, b)
	return out
}

// recvSlice receives k's next message from src as a typed slice of want
// elements (ErrMismatch, naming src, otherwise).
func recvSlice[T Number](k *coll, src, want int) ([]T, error) {
	b, err := k.recv(src)
	if err != nil {
		return nil, err
	}
	got, err := FromBytes[T](b)
	if err == nil && len(got) != want {
		why := fmt.Sprintf("rank %d contributed %d elements to %s, rank %d %d", src, len(got), opName(k.op), k.c.rank, want)
		// The others may wait for a message that will not come: break
		// the communicator on every rank, as a mismatch of calls does.
		k.c.abort(why)
		err = fmt.Errorf("%w: %s", ErrMismatch, why)
	}
	if err != nil {
		return nil, &RankError{Rank: k.c.group[src], Err: err}
	}
	return got, nil
}
