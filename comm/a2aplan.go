package comm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"runtime"
	"sync"
	"weak"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

// Alltoallv plans through one collective.ExchangePlanner per communicator
// and algorithm (issue 15): a call whose sizes repeat one of the last
// a2aCapacity calls' gets that call's plan back, and a call in which only
// a few sizes changed since the last gets the last plan patched (the
// total-exchange paper's section 6.2) rather than planned anew.
//
// Every rank must make the same plan, and a hit or a patch depends on
// the calls planned before. Ranks agree on each call's inputs (the size
// rows carry the sizes, the model digest is checked, the algorithm too,
// and whether the links can pace is the same everywhere), so planners
// that planned the same calls plan alike. They do as long as every call
// reaches its planning on every rank or on none. A call that fails on
// some ranks before they plan it (a context that ends during the size
// rows, while the others go on) would leave their planners apart, and a
// later patch or hit would then differ between ranks without any error.
// So every rank sends, in its size row, the digest of the calls its
// planner planned (of their tags: the tag names a call on every rank);
// when the rows do not all carry the same digest, every rank drops its
// planner and plans from an empty one, in full, and all agree again. A
// call that fails after its planning counts as planned: its plan is in
// every planner all the same.
//
// In an in-process world the ranks of a communicator share one planner
// (newPlanner), and a call's plan is made once and shared through
// sharedPlan, under the planner's id, the call's digest and its sizes.
// Which rank plans does not matter: the shared planner sees every call
// once, in order (no rank plans call t+1 before every rank has sent its
// size row for it, after its own planning of call t). And every rank
// finds the same planner: the one that made it in call t keeps it until
// it drops it in a later call, which it cannot reach before every rank
// has planned call t.

// a2aCapacity is the number of plans a communicator keeps per Alltoallv
// algorithm. An iterative code alternates between a few size matrices at
// most (a transpose and its inverse); each plan holds its transfers (64
// bytes a message) and its size matrix (8 bytes a pair), about 72 MB at
// 1,024 ranks, so a few are kept, not the planner's default 8.
const a2aCapacity = 4

// a2aPlans is what a communicator keeps to plan one Alltoallv algorithm
// (under planMu).
type a2aPlans struct {
	planner *a2aPlanner
	// digest digests the calls planned since planner was made (their
	// tags), 0 if none: this rank's size rows carry it.
	digest uint64
}

// a2aPlanner is a planner and, in an in-process world, the number that
// names it in this process (0 elsewhere).
type a2aPlanner struct {
	*collective.ExchangePlanner
	id uint64
}

// plansDigest is the digest of the calls this rank's planner for algo
// has planned on c, 0 if none (the size row's plans digest).
func (c *Comm) plansDigest(algo collective.Algorithm) uint64 {
	c.planMu.Lock()
	defer c.planMu.Unlock()
	if p := c.a2a[algo]; p != nil {
		return p.digest
	}
	return 0
}

// planFor plans the size matrix of Alltoallv call tag with algo; agreed
// reports that every rank's size row carried this rank's plans digest.
func (c *Comm) planFor(tag int32, bytes [][]int64, algo collective.Algorithm, agreed bool) (*collective.Plan, error) {
	c.planMu.Lock()
	defer c.planMu.Unlock()
	p := c.a2a[algo]
	if p == nil || !agreed {
		pl, err := c.newPlanner(algo, tag)
		if err != nil {
			return nil, err
		}
		p = &a2aPlans{planner: pl}
		if c.a2a == nil {
			c.a2a = map[collective.Algorithm]*a2aPlans{}
		}
		c.a2a[algo] = p
	}
	p.digest = nextPlansDigest(p.digest, tag)
	// The plans are made with the pairwise model and evaluated on the
	// fabric it implies, so that Auto also weighs posting everything at
	// once: on a network whose ranks are limited by their interfaces
	// rather than one-port, that runs near the interface bound, which
	// one-port schedules cannot reach when fast ranks talk to slow ones.
	// Paced plans need links that can pace.
	key := make([]byte, 0, 16+len(algo)+8*len(bytes)*len(bytes))
	key = binary.LittleEndian.AppendUint64(key, p.planner.id)
	key = binary.LittleEndian.AppendUint64(key, p.digest)
	key = append(key, algo...)
	for _, row := range bytes {
		key = append(key, putInt64s(row)...)
	}
	plan, err := sharedPlan(c, "alltoallv", string(key), func() (*collective.Plan, error) {
		return p.planner.PlanOn(c.model(), nil, &collective.Exchange{Bytes: bytes}, collective.FlowOptions{NoPacing: !c.canPace()})
	})
	if err != nil {
		return nil, err
	}
	if plan.Ranks != len(bytes) {
		return nil, fmt.Errorf("%w: planner returned a plan for %d ranks, not %d", ErrProtocol, plan.Ranks, len(bytes))
	}
	return plan, nil
}

// nextPlansDigest is the plans digest d after the planning of call tag
// (never 0).
func nextPlansDigest(d uint64, tag int32) uint64 {
	h := fnv.New64a()
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], d)
	binary.LittleEndian.PutUint32(b[8:], uint32(tag))
	h.Write(b[:])
	return max(h.Sum64(), 1)
}

// sharedPlanners holds the planners of the communicators of in-process
// worlds, weakly: a planner stays as long as one of its ranks holds it,
// so the ranks that look it up in the same call all find the same one.
var sharedPlanners = struct {
	sync.Mutex
	m    map[string]weak.Pointer[a2aPlanner]
	last uint64 // the last id given
}{m: map[string]weak.Pointer[a2aPlanner]{}}

// newPlanner returns a new planner for algo on c, made in call tag: in an
// in-process world, the one its other ranks made in that call.
func (c *Comm) newPlanner(algo collective.Algorithm, tag int32) (*a2aPlanner, error) {
	pl, err := collective.NewExchangePlanner(algo, collective.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	pl.Capacity = a2aCapacity
	if c.w.kind != transport.KindMem {
		return &a2aPlanner{ExchangePlanner: pl}, nil
	}
	coord := ""
	if c.w.boot != nil {
		coord = c.w.boot.Coord
	}
	// The world (its network and coordinator), the communicator, the
	// algorithm and the call.
	key := fmt.Sprintf("%p\x00%s\x00%d\x00%d\x00%v\x00%s\x00%d", c.w.cfg.Network, coord, c.w.job, c.id, c.group, algo, tag)
	sharedPlanners.Lock()
	defer sharedPlanners.Unlock()
	if shared := sharedPlanners.m[key].Value(); shared != nil {
		return shared, nil
	}
	sharedPlanners.last++
	shared := &a2aPlanner{ExchangePlanner: pl, id: sharedPlanners.last}
	wp := weak.Make(shared)
	sharedPlanners.m[key] = wp
	runtime.AddCleanup(shared, func(key string) {
		sharedPlanners.Lock()
		defer sharedPlanners.Unlock()
		if sharedPlanners.m[key] == wp {
			delete(sharedPlanners.m, key)
		}
	}, key)
	return shared, nil
}
