package comm

import (
	"fmt"
	"sync"
	"time"
)

// A collective that waits long asks the other ranks which call they are
// in. No message can reveal some mismatches: every rank may wait for a
// message that no rank will send (rank 0 believes rank 2 is the root of
// a Bcast, and rank 2 that rank 0 is; two ranks both believe they are the
// root of a Gather; a Reduce against a Barrier whose messages never meet).
// So once a call has waited stallAfter, its rank sends the members it
// waits for (waitingOn) a "call" notice (the call's number, collective
// and root), again after twice as long, up to every stallMax. A member that is in that call, or
// has finished it, with another collective or another root breaks the
// communicator on every rank with ErrMismatch, naming both ranks and
// their calls. A correct call that waits long (a root still computing)
// costs one tiny message to each rank it waits for at those times, and
// nothing else.

const (
	stallAfter = time.Second
	stallMax   = 16 * time.Second
)

// callRec is a collective call: its number (tag), collective and root
// (-1: not rooted).
type callRec struct {
	tag  int32
	op   uint16
	root int
}

// watch starts asking, while the call runs, the other ranks which call
// they are in (see stallAfter). It returns a function that stops it.
func (k *coll) watch() func() {
	c := k.c
	if c.Size() < 2 || c.w.cfg.noCallNotices {
		return func() {}
	}
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	var ask func(wait time.Duration) func()
	ask = func(wait time.Duration) func() {
		return func() {
			if k.ctx.Err() != nil || c.brokenErr() != nil || !c.isRunning(k.tag, k.op) {
				return
			}
			c.w.tell(c.waitingOn(k.tag, k.root), control{Kind: "call", Comm: c.id, Tag: k.tag, Op: k.op, Root: k.root + 1})
			next := min(2*wait, stallMax)
			mu.Lock()
			defer mu.Unlock()
			if !stopped {
				t = time.AfterFunc(next, ask(next))
			}
		}
	}
	mu.Lock()
	t = time.AfterFunc(stallAfter, ask(stallAfter))
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// waitingOn lists the ranks (world ranks) that call tag of this
// communicator (rooted at root, -1: none) waits for now: the sources of
// its posted receives and the peers of its rendezvous not yet done. A
// receive from any source stands for the root (a Bcast's other ranks
// learn their parent from the message), or, at the root itself and in
// calls without one, for every member; so does a call that waits for
// nothing this can see (a send blocked on a full link). Asking only these
// is enough: a rank that waits long in the same call asks the ranks it
// waits for in turn, so a chain of waits reaches the rank whose call
// differs, and a rank whose call ended with another collective or root
// sent messages that the ranks of this call take for a mismatch. A late
// root then costs about P notices rather than P squared.
func (c *Comm) waitingOn(tag int32, root int) []int {
	w := c.w
	ctx := collCtx(c.id)
	seen := map[int]bool{}
	var to []int
	add := func(r int) {
		if !seen[r] {
			seen[r] = true
			to = append(to, r)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[ctx]; q != nil {
		for _, r := range q.posted {
			switch {
			case r.tag != tag:
			case r.src >= 0:
				add(r.src)
			case root >= 0 && root != c.rank:
				add(c.group[root])
			default:
				return c.group
			}
		}
	}
	for key, s := range w.slots {
		if key.ctx == ctx && key.tag == tag && !s.done {
			add(key.peer)
		}
	}
	if len(to) == 0 {
		return c.group
	}
	return to
}

// isRunning tells whether call tag of collective op is the one running.
func (c *Comm) isRunning(tag int32, op uint16) bool {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	return c.running.Load() == uint32(op) && int32(c.collSeq.Load()&0x7fffffff) == tag
}

// checkCall compares another rank's call (its "call" notice) with this
// rank's call of the same number, running or the last finished, and
// breaks the communicator if they differ.
func (c *Comm) checkCall(from int, q control) {
	w := c.w
	w.mu.Lock()
	op := uint16(c.running.Load())
	tag := int32(c.collSeq.Load() & 0x7fffffff)
	root := c.curRoot
	w.mu.Unlock()
	var mine callRec
	switch last := c.lastCall.Load(); {
	case op != 0 && tag == q.Tag:
		mine = callRec{tag: tag, op: op, root: root}
	case last != nil && last.tag == q.Tag:
		mine = *last
	default:
		return // not there yet, or long past it
	}
	i, ok := c.index[from]
	if !ok {
		return
	}
	theirs := callRec{tag: q.Tag, op: q.Op, root: q.Root - 1}
	var why string
	switch {
	case mine.op != theirs.op:
		why = fmt.Sprintf("rank %d called %s while rank %d called %s (both waited)", i, opName(theirs.op), c.rank, opName(mine.op))
	case mine.root >= 0 && theirs.root >= 0 && mine.root != theirs.root:
		why = fmt.Sprintf("rank %d called %s with root %d while rank %d called it with root %d", i, opName(theirs.op), theirs.root, c.rank, mine.root)
	default:
		return
	}
	c.abort(why)
}
