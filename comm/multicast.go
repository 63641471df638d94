package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/collective"
)

// MulticastMsg is one message of a multiple multicast: Source sends Data
// to every rank in Dests. Every rank passes the same list of sources and
// destination sets; Data is read at the source only.
type MulticastMsg struct {
	Source int
	Dests  []int
	Data   []byte
}

// MulticastOptions tunes one Multicast call.
type MulticastOptions struct {
	// Algorithm is a multicast planner (collective.FEF ... RRSP, Auto) or
	// Naive (every source sends straight to every destination, at once).
	// "" means DefaultMulticast. Every rank must ask for the same one.
	Algorithm collective.Algorithm
}

// DefaultMulticast is the default multicast planner: Round-Robin with the
// preemption optimisation, the best planner overall in the reproduction of
// the paper's simulations (hetbench sim multicast: within 1.05x of the
// lower bound for large messages on 64 nodes).
const DefaultMulticast = collective.RRP

// Multicast sends every message from its source to its destinations at
// once, relaying through destinations that already hold a message as the
// plan says (planned from the message sizes and the cost model). It returns,
// indexed like msgs, the data of every message this rank is a destination
// (or the source) of, and nil for the others. Each destination checks that
// it received every message meant for it exactly once.
func (c *Comm) Multicast(ctx context.Context, msgs []MulticastMsg) ([][]byte, error) {
	return c.MulticastWith(ctx, msgs, MulticastOptions{})
}

// MulticastWith is Multicast with per-call options.
func (c *Comm) MulticastWith(ctx context.Context, msgs []MulticastMsg, o MulticastOptions) ([][]byte, error) {
	n := c.Size()
	algo := o.Algorithm
	if algo == "" {
		algo = DefaultMulticast
	}
	if algo != collective.Auto && algo != Naive && collective.KindOf(algo) != collective.KindMulticast {
		return nil, &ArgError{Op: "Multicast", Arg: "algorithm", Msg: fmt.Sprintf("unknown %q (want %v, auto or naive)", algo, collective.Algorithms(collective.KindMulticast))}
	}
	pat := &collective.Multicast{Messages: make([]collective.Message, len(msgs))}
	for k, m := range msgs {
		pat.Messages[k] = collective.Message{Source: m.Source, Dests: m.Dests}
	}
	if err := pat.Validate(n); err != nil {
		return nil, &ArgError{Op: "Multicast", Arg: "msgs", Msg: err.Error()}
	}
	k, cancel, err := c.begin(ctx, opMulticast)
	if err != nil {
		return nil, err
	}
	defer cancel()

	// One round: every rank tells every other the sizes of the messages it
	// is the source of, with a digest of the pattern and the algorithm, so
	// that every rank plans the same thing from the same sizes.
	digest := multicastDigest(msgs, algo)
	own := []int64{int64(digest)}
	for kk, m := range msgs {
		if m.Source == c.rank {
			own = append(own, int64(kk), int64(len(m.Data)))
		}
	}
	rows, err := k.exchangeSmall(putInt64s(own))
	if err != nil {
		return nil, k.err(err)
	}
	for r, b := range rows {
		v := getInt64s(b)
		if len(v) == 0 || uint64(v[0]) != digest {
			return nil, k.err(&RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d passed another multicast pattern or algorithm", ErrMismatch, r)})
		}
		for i := 1; i+1 < len(v); i += 2 {
			kk, size := v[i], v[i+1]
			if kk < 0 || int(kk) >= len(msgs) || msgs[kk].Source != r || size < 0 {
				return nil, k.err(&RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d announced message %d of %d bytes", ErrProtocol, r, kk, size)})
			}
			pat.Messages[kk].Bytes = size
		}
	}

	var plan *collective.Plan
	if algo == Naive {
		plan = naiveMulticastPlan(pat)
	} else {
		if plan, err = collective.PlanMulticast(c.multicastModel(), pat, algo, collective.Options{Seed: 1}); err != nil {
			return nil, k.err(err)
		}
	}
	have := make([][]byte, len(msgs))
	for kk, m := range msgs {
		if m.Source == c.rank {
			have[kk] = m.Data
		}
	}
	tl := &multicastTimeline{start: time.Now()}
	if err := c.runMulticast(k, plan, pat, have, algo == Naive, tl); err != nil {
		return nil, k.err(err)
	}
	out := make([][]byte, len(msgs))
	for kk, m := range pat.Messages {
		mine := m.Source == c.rank
		for _, d := range m.Dests {
			mine = mine || d == c.rank
		}
		if !mine {
			continue
		}
		if have[kk] == nil {
			return nil, k.err(fmt.Errorf("%w: message %d from rank %d never arrived", ErrProtocol, kk, m.Source))
		}
		out[kk] = have[kk]
	}
	c.planMu.Lock()
	c.mcTimeline = tl
	tl.plan = plan
	c.planMu.Unlock()
	return out, nil
}

// multicastTimeline is what one rank recorded of its last Multicast.
type multicastTimeline struct {
	plan  *collective.Plan
	start time.Time
	tasks map[int][2]time.Time // task index -> start, end
	mu    sync.Mutex
}

func (t *multicastTimeline) record(task int, start, end time.Time) {
	t.mu.Lock()
	if t.tasks == nil {
		t.tasks = map[int][2]time.Time{}
	}
	t.tasks[task] = [2]time.Time{start, end}
	t.mu.Unlock()
}

// runMulticast walks this rank's task list: sends go out without waiting
// (the paper's non-blocking send; a large message's payload follows when
// its receiver grants it), receives are taken in order (blocking), each
// asking for its message by number so arrival order does not matter. With
// concurrent, receives are all posted at once (the naive form).
func (c *Comm) runMulticast(k *coll, plan *collective.Plan, pat *collective.Multicast, have [][]byte, concurrent bool, tl *multicastTimeline) error {
	me := c.rank
	var dones []func() error
	var recvs []int
	for _, ti := range plan.NodeTasks(me) {
		t := plan.Tasks[ti]
		switch {
		case t.Src == me && t.Dst != me:
			data := have[t.Message]
			if data == nil && pat.Messages[t.Message].Bytes > 0 {
				return fmt.Errorf("%w: plan relays message %d before rank %d holds it", ErrProtocol, t.Message, me)
			}
			start := time.Now()
			done, err := k.isendSeq(t.Dst, data, uint64(t.Message))
			if err != nil {
				return err
			}
			tl.record(ti, start, time.Now())
			dones = append(dones, done)
		case t.Dst == me:
			if concurrent {
				recvs = append(recvs, ti)
				continue
			}
			if err := c.multicastRecv(k, plan, pat, ti, have, tl); err != nil {
				return err
			}
		}
	}
	if concurrent {
		reqs := make([]*recvReq, len(recvs))
		for i, ti := range recvs {
			t := plan.Tasks[ti]
			reqs[i] = k.postSeq(t.Src, uint64(t.Message))
		}
		for i, ti := range recvs {
			if err := c.multicastFinish(k, plan, pat, ti, reqs[i], time.Now(), have, tl); err != nil {
				for _, r := range reqs[i+1:] {
					c.w.unpost(collCtx(c.id), r)
				}
				return err
			}
		}
	}
	return finishAll(dones)
}

func (c *Comm) multicastRecv(k *coll, plan *collective.Plan, pat *collective.Multicast, ti int, have [][]byte, tl *multicastTimeline) error {
	t := plan.Tasks[ti]
	start := time.Now()
	return c.multicastFinish(k, plan, pat, ti, k.postSeq(t.Src, uint64(t.Message)), start, have, tl)
}

func (c *Comm) multicastFinish(k *coll, plan *collective.Plan, pat *collective.Multicast, ti int, r *recvReq, start time.Time, have [][]byte, tl *multicastTimeline) error {
	t := plan.Tasks[ti]
	data, err := k.finish(r)
	if err != nil {
		return err
	}
	want := pat.Messages[t.Message].Bytes
	if int64(len(data)) != want {
		return &RankError{Rank: c.group[t.Src], Err: fmt.Errorf("%w: message %d: %d bytes arrived from rank %d, it has %d", ErrMismatch, t.Message, len(data), t.Src, want)}
	}
	if have[t.Message] != nil && pat.Messages[t.Message].Source != c.rank {
		return fmt.Errorf("%w: message %d arrived twice at rank %d", ErrProtocol, t.Message, c.rank)
	}
	have[t.Message] = data
	tl.record(ti, start, time.Now())
	return nil
}

// naiveMulticastPlan is the plan where every source sends straight to
// each of its destinations, in order, and nobody relays.
func naiveMulticastPlan(pat *collective.Multicast) *collective.Plan {
	p := &collective.Plan{Kind: collective.KindMulticast, Algorithm: Naive}
	seq := map[int]int{}
	for kk, m := range pat.Messages {
		for _, d := range m.Dests {
			p.Tasks = append(p.Tasks, collective.Task{Message: kk, Src: m.Source, Dst: d, Bytes: m.Bytes, SendSeq: seq[m.Source], RecvSeq: seq[d]})
			seq[m.Source]++
			seq[d]++
		}
	}
	return p
}

// multicastDigest summarises a pattern (sources and destinations) and an
// algorithm, to check that every rank called Multicast alike.
func multicastDigest(msgs []MulticastMsg, algo collective.Algorithm) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	h.Write([]byte(algo))
	put(len(msgs))
	for _, m := range msgs {
		put(m.Source)
		put(len(m.Dests))
		for _, d := range m.Dests {
			put(d)
		}
	}
	return h.Sum64() &^ (1 << 63)
}

// PlanMulticast returns the plan Multicast would execute for this pattern
// (sources, destinations and sizes in pat) on this communicator's model,
// with its predicted completion and lower bound: to inspect or report it.
// Naive gives the direct plan, unsimulated.
func (c *Comm) PlanMulticast(pat *collective.Multicast, algo collective.Algorithm) (*collective.Plan, error) {
	if algo == "" {
		algo = DefaultMulticast
	}
	if algo == Naive {
		return naiveMulticastPlan(pat), nil
	}
	return collective.PlanMulticast(c.multicastModel(), pat, algo, collective.Options{Seed: 1})
}

// multicastModel is the multicast paper's model of this communicator's
// ranks, for hosts limited by their interfaces (collective's SplitNICs).
func (c *Comm) multicastModel() *collective.Model { return c.model().SplitNICs() }
