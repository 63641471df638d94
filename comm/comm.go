package comm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
)

// Comm is a communicator: a group of ranks that exchange messages and run
// collectives together. Init returns the world communicator; Split makes
// sub-communicators.
//
// Point-to-point calls of one Comm may be made from several goroutines at
// once. Collective calls must be made in the same order on every rank of
// the communicator, one at a time per communicator (as in MPI).
type Comm struct {
	w     *world
	id    uint32
	group []int       // comm rank -> world rank
	index map[int]int // world rank -> comm rank
	rank  int

	collSeq atomic.Uint32
	splits  atomic.Uint32
	running atomic.Uint32 // the collective in progress (op code), 0 if none
	// What stray messages are checked against (coll.go): the last
	// collective this rank finished (tag<<32 | op), what
	// its first piece carried (lastSig), and the last one it left when its
	// context ended (abandoned: 1<<31 | tag), whose late messages are no
	// one's fault.
	lastColl  atomic.Uint64
	quiet     atomic.Bool   // the running call receives nothing (coll.expectNothing)
	callSig   atomic.Uint64 // what every message of the running call carries (coll.expectSig), 0 if nothing
	lastSig   atomic.Uint64
	abandoned atomic.Uint32
	// curRoot is the running call's root (-1: none; w.mu), lastCall the
	// last call finished (stall.go).
	curRoot  int
	lastCall atomic.Pointer[callRec]

	broken    chan struct{}
	breakOnce sync.Once
	breakErr  atomic.Pointer[error]
	closed    atomic.Bool

	planMu     sync.Mutex
	a2a        map[collective.Algorithm]*a2aPlans // Alltoallv's planners (a2aplan.go)
	timeline   *Timeline
	mcTimeline *multicastTimeline
	backbone   map[string]int // ProbeBackbone results by group pair
	bcastKey   bcastKey
	bcastPlan  *collective.BcastPlan
	// The last Allgather, Allreduce and Reduce plans and the last reduce-scatter's
	// pacing rates, by what they were made from (see cached).
	agKey  string
	agPlan collective.AllgatherPlan
	rsKey  string
	rsPlan *collective.Plan
	arKey  string
	arPlan collective.AllreducePlan
	rdKey  string
	rdPlan *collective.BcastPlan

	loopOnce   sync.Once
	onLoopback bool
}

func (w *world) newComm(id uint32, group []int, myWorldRank int) *Comm {
	c := &Comm{w: w, id: id, group: group, index: make(map[int]int, len(group)), broken: make(chan struct{})}
	for r, g := range group {
		c.index[g] = r
		if g == myWorldRank {
			c.rank = r
		}
	}
	w.mu.Lock()
	w.comms[c] = struct{}{}
	var dead *RankError
	for _, g := range group {
		if w.failed[g] != nil && !w.graceful[g] && dead == nil {
			dead = &RankError{Rank: g, Err: w.failed[g]}
		}
	}
	w.mu.Unlock()
	if dead != nil {
		c.breakWith(dead)
	}
	return c
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.group) }

// WorldRank returns the world rank of communicator rank r.
func (c *Comm) WorldRank(r int) int { return c.group[r] }

// Model returns the cost model of this communicator's ranks (probed,
// cached, from a file or given in Config; row and column r are this
// communicator's rank r), or nil when there is none and planning uses a
// uniform model.
func (c *Comm) Model() *collective.Model {
	if c.w.model.Load() == nil {
		return nil
	}
	return c.model()
}

// Now returns the time on rank 0's clock: this host's clock corrected by
// the offset the probe measured (uncorrected when there was no probe), so
// that times taken on different hosts can be compared.
func (c *Comm) Now() time.Time {
	t := time.Now()
	if p := c.w.offsets.Load(); p != nil && c.w.rank < len(*p) {
		t = t.Add(time.Duration((*p)[c.w.rank] * float64(time.Second)))
	}
	return t
}

// Dup returns a new communicator with the same ranks, whose messages never
// mix with this one's (MPI_Comm_dup): a library can talk on it without
// fear of matching the caller's messages. It is collective (every rank
// calls it in the same order as its other collective calls) but sends
// nothing.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	if err := c.check("Dup"); err != nil {
		return nil, err
	}
	seq := c.splits.Add(1)
	group := append([]int(nil), c.group...)
	return c.w.newComm(splitID(c.id, seq, -2), group, c.w.rank), nil
}

type noTimeoutKey struct{}

// WithoutTimeout marks ctx so that Config.OpTimeout does not apply to
// operations that use it: for waits that are legitimately long (a worker
// waiting for its next task). The context's own deadline, if any, still
// does.
func WithoutTimeout(ctx context.Context) context.Context {
	return context.WithValue(ctx, noTimeoutKey{}, true)
}

// ProbeResult returns what the start-up probe (or Reprobe) measured, with
// clock offsets and the schedule of probes; nil if no probe ran and no
// cached model was used.
func (c *Comm) ProbeResult() *netprobe.Result { return c.w.probed.Load() }

// Reprobe measures every link again and installs the new model on every
// rank (the next plans use it). It is collective over the world.
func (c *Comm) Reprobe(ctx context.Context) error {
	if c.id != worldCommID {
		return &ArgError{Op: "Reprobe", Arg: "communicator", Msg: "Reprobe is collective over the world communicator"}
	}
	if err := c.check("Reprobe"); err != nil {
		return err
	}
	if c.Size() == 1 {
		return nil
	}
	return opErr("Reprobe", c.w.probe(ctx, netprobe.ModeFull))
}

func (c *Comm) hasWorldRank(g int) bool {
	_, ok := c.index[g]
	return ok
}

func (c *Comm) breakWith(err *RankError) {
	c.breakOnce.Do(func() {
		var e error = err
		c.breakErr.Store(&e)
		close(c.broken)
	})
}

func (c *Comm) brokenErr() error {
	if p := c.breakErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close leaves the communicator. Closing the world communicator is
// collective, like MPI_Finalize: it tells every rank, waits (up to the
// bootstrap timeout) until every rank has closed too or failed, then shuts
// the links down. Closing a sub-communicator only forgets it. Close is
// idempotent.
//
// Deferred directly (defer c.Close()) in a goroutine that panics, Close on
// the world communicator does not leave gracefully: it tells every other
// rank that this one failed, and why, before the process dies, so that
// they name this rank and the panic rather than a rank that "closed its
// communicator"; then the panic goes on.
func (c *Comm) Close() error {
	if r := recover(); r != nil {
		if c.id == worldCommID && c.closed.CompareAndSwap(false, true) {
			c.w.failFatal(fmt.Sprintf("panicked: %v", r))
		}
		panic(r)
	}
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.w.mu.Lock()
	delete(c.w.comms, c)
	c.w.mu.Unlock()
	if c.id == worldCommID {
		return c.w.close()
	}
	return nil
}

// check returns ErrClosed for a closed communicator.
func (c *Comm) check(op string) error {
	if c.closed.Load() {
		return &OpError{Op: op, Err: ErrClosed}
	}
	select {
	case <-c.w.quit:
		return &OpError{Op: op, Err: ErrClosed}
	default:
	}
	return nil
}

// OpError wraps an error with the operation that failed, for errors that
// do not name a rank.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return "comm: " + e.Op + ": " + e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// opErr names the operation in err: a *RankError gets its Op filled in.
func opErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *RankError
	if errors.As(err, &re) {
		if re.Op == "" {
			cp := *re
			cp.Op = op
			return &cp
		}
		return err
	}
	var ae *ArgError
	var oe *OpError
	if errors.As(err, &ae) || errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Err: err}
}

// withTimeout applies the configured operation timeout to a context that
// has no deadline.
func (c *Comm) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.w.cfg.OpTimeout > 0 && ctx.Value(noTimeoutKey{}) == nil {
		if _, ok := ctx.Deadline(); !ok {
			return context.WithTimeout(ctx, c.w.cfg.OpTimeout)
		}
	}
	return ctx, func() {}
}

func jsonDecoder(r io.Reader) *json.Decoder { return json.NewDecoder(r) }
