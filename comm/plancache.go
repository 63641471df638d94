package comm

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"
	"reflect"
	"sync"

	"github.com/hetcomm/hetcomm/transport"
	"golang.org/x/sync/singleflight"
)

// Plans shared by the ranks of one process.
//
// A plan depends only on the communicator's model and the call's
// arguments, and every rank must make the same one. In a job of one rank
// per process that costs one planning per call and rank, but an
// in-process world (mem transport, hundreds of ranks in one test or
// emulation) would plan the same thing once per rank: 256 ranks planning
// a 256-rank Alltoallv on two cores spent seconds doing so, long enough to
// starve their heartbeats. So plans go through one cache per process,
// keyed by the model's digest, the communicator's ranks and the call; the
// first rank to ask plans, the others wait for its plan and share it.
// Plans are never changed once made (executors only read them). Only
// in-process worlds share: elsewhere a process holds one rank, and a
// plan can also depend on what the links are (pacing, loopback).

// sharedPlans keeps the last plans made in this process.
var sharedPlans = struct {
	sync.Mutex
	m     map[string]any
	order []string // oldest first
	group singleflight.Group
}{m: map[string]any{}}

// sharedPlanLimit bounds the plans kept: a few per communicator and kind
// suffice for iterative codes, and each comm also keeps its last plan.
const sharedPlanLimit = 64

// sharedPlan returns the plan of kind and key on communicator c, made by
// build on the first call in this process and shared by the next ones.
// Plans of different types never share a key. Errors are not kept.
func sharedPlan[V any](c *Comm, kind, key string, build func() (V, error)) (V, error) {
	if c.w.kind != transport.KindMem {
		return build()
	}
	// The map keeps a SHA-256 of the key, not the key: an Alltoallv's is
	// its whole size matrix (8 MB at 1,024 ranks).
	sum := sha256.Sum256([]byte(c.planScope() + kind + "\x00" + reflect.TypeFor[V]().String() + "\x00" + key))
	k := string(sum[:])
	sharedPlans.Lock()
	v, ok := sharedPlans.m[k]
	sharedPlans.Unlock()
	if ok {
		return v.(V), nil
	}
	got, err, _ := sharedPlans.group.Do(k, func() (any, error) {
		// A rank that missed the map while another built the plan
		// comes here once that build is over: it takes that plan rather
		// than build again, since a build may depend on what was built
		// before (Alltoallv's planner would count it as a cache hit).
		sharedPlans.Lock()
		done, ok := sharedPlans.m[k]
		sharedPlans.Unlock()
		if ok {
			return done, nil
		}
		v, err := build()
		if err != nil {
			return nil, err
		}
		sharedPlans.Lock()
		defer sharedPlans.Unlock()
		if _, ok := sharedPlans.m[k]; !ok {
			if len(sharedPlans.order) >= sharedPlanLimit {
				delete(sharedPlans.m, sharedPlans.order[0])
				sharedPlans.order = sharedPlans.order[1:]
			}
			sharedPlans.order = append(sharedPlans.order, k)
		}
		sharedPlans.m[k] = v
		return v, nil
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return got.(V), nil
}

// planScope identifies what every plan on c depends on besides the call:
// the world's model (its digest), c's ranks in the world and whether its
// links can pace.
func (c *Comm) planScope() string {
	h := fnv.New64a()
	var b [8]byte
	if c.canPace() {
		h.Write([]byte{1})
	}
	binary.LittleEndian.PutUint64(b[:], c.w.modelDigest())
	h.Write(b[:])
	for _, g := range c.group {
		binary.LittleEndian.PutUint64(b[:], uint64(g))
		h.Write(b[:])
	}
	binary.LittleEndian.PutUint64(b[:], h.Sum64())
	return string(b[:])
}
