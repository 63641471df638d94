package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/hetcomm/hetcomm/collective"
)

// Allgatherv gives every rank every rank's data, indexed by rank; sizes
// may differ. The ranks first exchange their sizes (one round of small
// messages), so that every rank plans the same way: see Allgather.
func (c *Comm) Allgatherv(ctx context.Context, data []byte) ([][]byte, error) {
	return c.allgather(ctx, data, false)
}

// Allgather is Allgatherv for equal sizes (ErrMismatch otherwise): every
// rank gets every rank's data, indexed by rank. It passes the blocks
// around the ring of ranks (collective.AllgatherRing) or sends each to
// every rank at once (collective.AllgatherMesh), whichever the model
// predicts faster (collective.PlanAllgather); Config.Allgather or
// WithAlgorithm forces one, the same on every rank.
func (c *Comm) Allgather(ctx context.Context, data []byte) ([][]byte, error) {
	return c.allgather(ctx, data, true)
}

func (c *Comm) allgather(ctx context.Context, data []byte, equal bool) ([][]byte, error) {
	k, cancel, err := c.begin(ctx, opAllgather)
	if err != nil {
		return nil, err
	}
	defer cancel()
	n := c.Size()
	out := make([][]byte, n)
	out[c.rank] = append([]byte{}, data...)
	if n == 1 {
		return out, nil
	}
	sizes := make([]int64, n)
	if equal {
		for i := range sizes {
			sizes[i] = int64(len(data))
		}
	} else {
		all, err := k.exchangeSmall(putInt64s([]int64{int64(len(data))}))
		if err != nil {
			return nil, k.err(err)
		}
		for i, b := range all {
			v := getInt64s(b)
			if len(v) != 1 || v[0] < 0 {
				return nil, k.err(&RankError{Rank: c.group[i], Err: fmt.Errorf("%w: Allgatherv: rank %d sent a malformed size", ErrProtocol, i)})
			}
			sizes[i] = v[0]
		}
	}
	return c.allgatherSized(ctx, k, out, sizes, equal)
}

// allgatherKnown is Allgatherv when every rank knows every rank's size
// (sizes): it skips the round that exchanges them.
func (c *Comm) allgatherKnown(ctx context.Context, data []byte, sizes []int64) ([][]byte, error) {
	k, cancel, err := c.begin(ctx, opAllgather)
	if err != nil {
		return nil, err
	}
	defer cancel()
	out := make([][]byte, c.Size())
	out[c.rank] = append([]byte{}, data...)
	if int64(len(data)) != sizes[c.rank] {
		return nil, k.err(fmt.Errorf("%w: Allgatherv: %d bytes from this rank, %d expected", ErrProtocol, len(data), sizes[c.rank]))
	}
	return c.allgatherSized(ctx, k, out, sizes, false)
}

// allgatherSized runs an Allgather whose sizes every rank knows; out
// holds this rank's block and receives the others.
func (c *Comm) allgatherSized(ctx context.Context, k *coll, out [][]byte, sizes []int64, equal bool) ([][]byte, error) {
	n, r := c.Size(), c.rank
	if n == 1 {
		return out, nil
	}
	data := out[r]
	algo := algorithmFor(ctx, c.w.cfg.Allgather, collective.AllgatherRing, collective.AllgatherMesh)
	plan, err := collective.PlanAllgather(c.model(), sizes, algo, collective.FlowOptions{NoPacing: !c.canPace()})
	if err != nil {
		return nil, k.err(err)
	}
	check := func(i int) error {
		if int64(len(out[i])) == sizes[i] {
			return nil
		}
		if equal {
			// The ranks may have planned differently: break the
			// communicator everywhere, so that none waits for a block.
			why := fmt.Sprintf("Allgather: rank %d contributed %d bytes, rank %d %d (use Allgatherv)", i, len(out[i]), r, len(data))
			c.abort(why)
			return &RankError{Rank: c.group[i], Err: fmt.Errorf("%w: %s", ErrMismatch, why)}
		}
		return &RankError{Rank: c.group[i], Err: fmt.Errorf("%w: Allgatherv: rank %d sent %d bytes, announced %d", ErrProtocol, i, len(out[i]), sizes[i])}
	}
	if plan.Algorithm == collective.AllgatherMesh {
		var rates []float64
		if plan.Flows.Algorithm == collective.Paced {
			rates = c.pacingRates(plan.Flows)
		}
		return out, k.err(c.allgatherMesh(k, out, rates, check))
	}
	right, left := (r+1)%n, (r-1+n)%n
	for s := 0; s < n-1; s++ {
		sendIdx := (r - s + n) % n
		recvIdx := (r - s - 1 + n) % n
		done, err := k.isend(right, out[sendIdx])
		if err != nil {
			return nil, k.err(err)
		}
		if out[recvIdx], err = k.recv(left); err != nil {
			return nil, k.err(err)
		}
		if err := done(); err != nil {
			return nil, k.err(err)
		}
		if err := check(recvIdx); err != nil {
			return nil, k.err(err)
		}
	}
	return out, nil
}

// allgatherMesh sends this rank's block (out[rank]) to every other rank
// at once, the link to each paced to its rate when rates is set (a paced
// plan), and receives theirs into out, checking each with check. The
// blocks go eagerly: every receiver takes one from every rank, so none
// needs a grant, and a grant's round trip would only delay it (and, on a
// paced link, wait behind the paced payload).
func (c *Comm) allgatherMesh(k *coll, out [][]byte, rates []float64, check func(int) error) error {
	n, me := c.Size(), c.rank
	if rates != nil {
		defer c.pace(rates)()
	}
	reqs := make([]*recvReq, n)
	for i := 0; i < n; i++ {
		if i != me {
			reqs[i] = c.postRecv(collCtx(c.id), i, k.tag)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		if i == me {
			continue
		}
		wg.Add(2)
		go func(j int) {
			defer wg.Done()
			done, err := k.isendSeq(j, out[me], true, 0)
			if err == nil {
				err = done()
			}
			if err != nil {
				errs <- err
			}
		}(i)
		go func(i int) {
			defer wg.Done()
			data, err := k.finish(reqs[i])
			if err == nil {
				out[i] = data
				err = check(i)
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	return <-errs
}
