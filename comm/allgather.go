package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
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
// WithAlgorithm forces one, the same on every rank. On loopback Auto
// keeps the ring (see Comm.loopback).
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
	plan, err := c.AllgatherPlan(ctx, sizes)
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

// AllgatherPlan returns the plan Allgather runs when rank r contributes
// sizes[r] bytes, with ctx's algorithm (WithAlgorithm, else
// Config.Allgather). It is local: no message is sent.
func (c *Comm) AllgatherPlan(ctx context.Context, sizes []int64) (collective.AllgatherPlan, error) {
	algo := algorithmFor(ctx, c.w.cfg.Allgather, collective.AllgatherRing, collective.AllgatherMesh)
	if (algo == "" || algo == collective.Auto) && c.loopback() {
		algo = collective.AllgatherRing
	}
	return cached(c, &c.agKey, &c.agPlan, planKey(c, string(algo), sizes), func() (collective.AllgatherPlan, error) {
		return collective.PlanAllgather(c.model(), sizes, algo, collective.FlowOptions{NoPacing: !c.canPace()})
	})
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
			if err := k.sendEager(j, out[me], 0); err != nil {
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

// planKey identifies what a plan is made from: the model (its
// generation), a name (the algorithm) and the sizes.
func planKey(c *Comm, name string, sizes []int64) string {
	return name + string(putInt64s(append([]int64{int64(c.w.modelGen.Load())}, sizes...)))
}

// cached returns *val when *key is key, and otherwise makes it with build
// (or takes it from another rank of this process, sharedPlan) and keeps
// it under key: the last plan of a kind, for iterative codes that repeat
// their calls (planning costs more than a small collective).
func cached[V any](c *Comm, key *string, val *V, k string, build func() (V, error)) (V, error) {
	c.planMu.Lock()
	defer c.planMu.Unlock()
	if *key == k {
		return *val, nil
	}
	v, err := sharedPlan(c, "", k, build)
	if err != nil {
		return v, err
	}
	*key, *val = k, v
	return v, nil
}

// loopback reports whether every rank of the communicator talks over
// loopback addresses: one machine, whose CPUs and memory, which the
// ranks share, limit a collective rather than the links the model
// describes (the probe measures each link alone, at 3 to 5 GB/s on this
// 2-core machine). There Auto keeps the classic algorithms, which move
// the data as fewest messages: a binomial Bcast sent whole, a ring
// Allgather, the tree Allreduce and Reduce. Pieces and trees planned from the link rates ran 30-50%
// slower there (4 ranks, 64 KiB and 1 MiB). In-process (mem) worlds are
// left to the model: they emulate networks.
func (c *Comm) loopback() bool {
	c.loopOnce.Do(func() {
		m := c.w.machines()
		if c.w.kind == transport.KindMem || len(m) == 0 {
			return
		}
		for _, g := range c.group {
			if g >= len(m) || m[g] != "loopback" {
				return
			}
		}
		c.onLoopback = true
	})
	return c.onLoopback
}
