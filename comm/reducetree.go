package comm

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/hetcomm/hetcomm/collective"
)

// A reduction along a planned tree (collective.PlanReduce): the
// broadcast's tree run backwards, the operator applied on the way.

// reduceHeadFlag marks the first piece a rank sends up a reduction's
// tree (or its whole vector, on the binomial tree): its sequence number
// is reduceHead's, which its parent checks against its own, so that
// ranks that pass other lengths, roots or operators fail instead of
// combining what does not go together.
const reduceHeadFlag = uint64(1) << 63

// reduceHead is reduceHeadFlag | the operator (opCode) << 56 | root << 40
// | the number of elements (below 2^40; roots below 2^16 are told apart).
func reduceHead(root, elems int, op uint64) uint64 {
	return reduceHeadFlag | op<<56 | uint64(root&0xffff)<<40 | uint64(elems)&(1<<40-1)
}

// describeHead says what a reduction's head carries.
func describeHead(seq uint64) string {
	return fmt.Sprintf(" with %d elements to root %d with %s", seq&(1<<40-1), seq>>40&0xffff, opCodeName(seq>>56&0x7f))
}

// opCode tells the built-in operators apart, so that ranks that pass
// different ones fail: 1-4 for Sum, Prod, Min and Max, 0 for any other
// (two operators of the caller's are not told apart).
func opCode[T Number](op Op[T]) uint64 {
	for i, p := range []string{"Sum[", "Prod[", "Min[", "Max["} {
		if opIs(op, p) {
			return uint64(i + 1)
		}
	}
	return 0
}

func opCodeName(code uint64) string {
	if code >= 1 && code <= 4 {
		return []string{"Sum", "Prod", "Min", "Max"}[code-1]
	}
	return "an operator of the caller's"
}

// checkHead checks the head a child (communicator rank src) sent against
// this rank's; on a difference it breaks the communicator on every rank.
func (k *coll) checkHead(src int, got, want uint64) error {
	if got == want {
		return nil
	}
	why := fmt.Sprintf("rank %d called %s%s, rank %d%s", src, opName(k.op), describeHead(got), k.c.rank, describeHead(want))
	if got&reduceHeadFlag == 0 {
		why = fmt.Sprintf("rank %d sent piece %d of %s first (rank %d called it%s)", src, got, opName(k.op), k.c.rank, describeHead(want))
	}
	k.c.abort(why)
	return &RankError{Rank: k.c.group[src], Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
}

// reducePlan returns the tree plan for reducing a vector of elems
// elements of elemSize bytes to root with op, or nil where the binomial
// tree in rank order serves instead: an op that is not known to be
// commutative (a planned tree combines in its own order), one rank,
// Bcast's algorithm (WithAlgorithm, else Config.Bcast) forced to
// collective.BcastBinomial, or Auto on loopback (see Comm.loopback).
// Forced to collective.BcastPipeline, the tree is planned on loopback
// too.
func reducePlan[T Number](ctx context.Context, c *Comm, root, elems, elemSize int, op Op[T]) (*collective.BcastPlan, error) {
	if c.Size() == 1 || !commutative(op) {
		return nil, nil
	}
	switch algorithmFor(ctx, c.w.cfg.Bcast, collective.BcastBinomial, collective.BcastPipeline) {
	case collective.BcastBinomial:
		return nil, nil
	case collective.BcastPipeline:
	default:
		if c.loopback() {
			return nil, nil
		}
	}
	bytes := int64(elems) * int64(elemSize)
	return cached(c, &c.rdKey, &c.rdPlan, planKey(c, "", []int64{int64(root), bytes}), func() (*collective.BcastPlan, error) {
		return collective.PlanReduce(c.model(), root, bytes, collective.Auto)
	})
}

// reduceAlong runs this rank's part of a reduction plan on acc, which
// holds this rank's vector: piece by piece, in order, it receives the
// piece of every child, combines it into acc with op, and sends the
// piece on to its parent. At root acc ends as the result.
func reduceAlong[T Number](k *coll, plan *collective.BcastPlan, acc []T, op Op[T]) error {
	c := k.c
	n := len(acc)
	pieces := max(plan.Chunks, 1)
	per := (n + pieces - 1) / pieces
	if per > 0 {
		pieces = (n + per - 1) / per
	} else {
		pieces = 1
	}
	span := func(i int) (int, int) { return min(i*per, n), min((i+1)*per, n) }
	children := plan.Children[c.rank]
	scratch := make([]T, len(children)*n)
	part := func(ci, i int) []T {
		lo, hi := span(i)
		return scratch[ci*n+lo : ci*n+hi : ci*n+hi]
	}
	// The later pieces are posted first, so that none of them can match
	// the first piece's receive (it takes any number: it is where a
	// child with another size is caught).
	reqs := make([][]*recvReq, len(children))
	for ci, child := range children {
		reqs[ci] = make([]*recvReq, pieces)
		for i := 1; i < pieces; i++ {
			reqs[ci][i] = k.postSeqInto(child, uint64(i), AsBytes(part(ci, i)))
		}
		reqs[ci][0] = c.w.postInto(collCtx(c.id), c.group[child], k.tag, -1, false, AsBytes(part(ci, 0)))
	}
	fail := func(err error) error {
		for _, rs := range reqs {
			for _, r := range rs {
				if r != nil {
					c.w.unpost(collCtx(c.id), r)
				}
			}
		}
		return err
	}
	head := reduceHead(plan.Root, n, opCode(op))
	k.sig = head
	for i := 0; i < pieces; i++ {
		lo, hi := span(i)
		for ci, child := range children {
			dst := AsBytes(part(ci, i))
			got, m, err := k.finishMsg(reqs[ci][i], dst)
			reqs[ci][i] = nil
			if err != nil {
				return fail(err)
			}
			if i == 0 {
				if err := k.checkHead(child, m.useq, head); err != nil {
					return fail(err)
				}
			}
			if len(got) != len(dst) {
				why := fmt.Sprintf("rank %d sent %d bytes as piece %d of %s, rank %d expected %d", child, len(got), i, opName(k.op), c.rank, len(dst))
				c.abort(why)
				return fail(&RankError{Rank: c.group[child], Err: fmt.Errorf("%w: %s", ErrMismatch, why)})
			}
			if len(got) > 0 && unsafe.SliceData(got) != unsafe.SliceData(dst) {
				copy(dst, got)
			}
			op(acc[lo:hi], part(ci, i))
		}
		if parent := plan.Parent[c.rank]; parent >= 0 {
			seq := uint64(i)
			if i == 0 {
				seq = head
			}
			if err := k.sendEager(parent, AsBytes(acc[lo:hi]), seq); err != nil {
				return fail(err)
			}
		}
	}
	return nil
}
