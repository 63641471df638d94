package collective

import (
	"fmt"
	"math"
	"strings"
)

// mcEntry is one task in a node's unified list: task index, and whether the
// node sends it (else it receives it).
type mcEntry struct {
	task int32
	send bool
}

// mcNodeLists builds every node's task list from SendSeq/RecvSeq: node v's
// list is lists[off[v]:off[v+1]]. Each node's positions must be exactly
// 0..len-1. Tasks must name nodes in [0,n) and distinct source and
// destination.
func mcNodeLists(p *Plan, n int) (lists []mcEntry, off []int, err error) {
	off = make([]int, n+1)
	for t, task := range p.Tasks {
		switch {
		case task.Src < 0 || task.Src >= n:
			return nil, nil, fmt.Errorf("collective: multicast plan: task %d: src %d out of range [0,%d)", t, task.Src, n)
		case task.Dst < 0 || task.Dst >= n:
			return nil, nil, fmt.Errorf("collective: multicast plan: task %d: dst %d out of range [0,%d)", t, task.Dst, n)
		case task.Src == task.Dst:
			return nil, nil, fmt.Errorf("collective: multicast plan: task %d: node %d sends to itself", t, task.Src)
		case task.Bytes < 0:
			return nil, nil, fmt.Errorf("collective: multicast plan: task %d: negative size %d", t, task.Bytes)
		}
		off[task.Src+1]++
		off[task.Dst+1]++
	}
	for v := 0; v < n; v++ {
		off[v+1] += off[v]
	}
	lists = make([]mcEntry, off[n])
	for x := range lists {
		lists[x].task = -1
	}
	place := func(t, v, seq int, send bool) error {
		what := "recv_seq"
		if send {
			what = "send_seq"
		}
		size := off[v+1] - off[v]
		if seq < 0 || seq >= size {
			return fmt.Errorf("collective: multicast plan: task %d: %s %d out of range: node %d has %d tasks, numbered 0..%d", t, what, seq, v, size, size-1)
		}
		e := &lists[off[v]+seq]
		if e.task >= 0 {
			return fmt.Errorf("collective: multicast plan: node %d: tasks %d and %d are both at position %d of its list", v, e.task, t, seq)
		}
		*e = mcEntry{task: int32(t), send: send}
		return nil
	}
	for t, task := range p.Tasks {
		if err := place(t, task.Src, task.SendSeq, true); err != nil {
			return nil, nil, err
		}
		if err := place(t, task.Dst, task.RecvSeq, false); err != nil {
			return nil, nil, err
		}
	}
	return lists, off, nil
}

// MulticastDeadlockError reports multicast task lists that cannot be
// executed: each node of Nodes waits, at the head of its list, to receive
// task Tasks[k] whose sender is the next node of the cycle, which is itself
// blocked before that send in its own list.
type MulticastDeadlockError struct {
	Nodes []int // the blocked nodes, each waiting for the next (cyclically)
	Tasks []int // Tasks[k]: the receive Nodes[k] waits for (an index into Plan.Tasks)
	Plan  *Plan
}

// Error describes the cycle, node by node.
func (e *MulticastDeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("collective: deadlock: the multicast task lists are cyclic:")
	for k, v := range e.Nodes {
		t := e.Plan.Tasks[e.Tasks[k]]
		if k > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " node %d waits at position %d to receive message %d from node %d (task %d), which node %d sends at position %d",
			v, t.RecvSeq, t.Message, t.Src, e.Tasks[k], t.Src, t.SendSeq)
	}
	return b.String()
}

// SimulateMulticast evaluates a multicast plan under m with the paper's
// execution rules and returns a copy with every time recomputed and
// Predicted set to the last receive's end (LowerBound is copied). Each node
// walks its task list (SendSeq/RecvSeq) in order: a send starts when the
// node's previous task ends and takes S; a receive of a message that
// arrives at the sender's send end + X*l (+ latency) ends at max(arrival,
// previous task end) + R. Lists that wait on each other in a cycle fail
// with a [*MulticastDeadlockError].
//
// The simulator checks the lists, not the pattern; [ValidateMulticast]
// checks that the plan delivers the right messages and that relays hold
// what they forward.
func SimulateMulticast(m *Model, p *Plan) (*Plan, error) {
	if m == nil {
		return nil, fmt.Errorf("collective: nil model")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("collective: nil plan")
	}
	if p.Kind != KindMulticast {
		return nil, fmt.Errorf("collective: plan kind is %q, want %q", p.Kind, KindMulticast)
	}
	n := m.Size()
	if p.Ranks != n {
		return nil, fmt.Errorf("collective: the plan is for %d ranks but the model describes %d", p.Ranks, n)
	}
	lists, off, err := mcNodeLists(p, n)
	if err != nil {
		return nil, err
	}
	q := *p
	q.Tasks = append(make([]Task, 0, len(p.Tasks)), p.Tasks...)
	c := newMCCosts(m)
	end := make([]float64, n)
	err = mcWalk(&q, lists, off, func(v int, e mcEntry) {
		t := &q.Tasks[e.task]
		if e.send {
			t.SendStart = end[v]
			t.SendEnd = t.SendStart + c.send(v, t.Bytes)
			t.Arrival = t.SendEnd + c.wire(v, t.Dst, t.Bytes)
			end[v] = t.SendEnd
			return
		}
		st := t.Arrival
		if end[v] > st {
			st = end[v]
		}
		t.RecvEnd = st + c.recv(v, t.Bytes)
		end[v] = t.RecvEnd
	})
	if err != nil {
		return nil, err
	}
	q.Predicted = 0
	for _, t := range q.Tasks {
		q.Predicted = math.Max(q.Predicted, t.RecvEnd)
	}
	return &q, nil
}

// mcWalk executes the task lists in an order that respects every
// dependency (a node's list order, and a receive after its send), calling
// visit for each task of each node, and fails with a
// [*MulticastDeadlockError] if some lists wait on each other in a cycle.
func mcWalk(p *Plan, lists []mcEntry, off []int, visit func(v int, e mcEntry)) error {
	n := len(off) - 1
	sent := make([]bool, len(p.Tasks))
	waiter := make([]int32, len(p.Tasks)) // node blocked on this receive, or -1
	for t := range waiter {
		waiter[t] = -1
	}
	pos := append([]int(nil), off[:n]...)
	stack := make([]int32, 0, n)
	for v := n - 1; v >= 0; v-- {
		stack = append(stack, int32(v))
	}
	for len(stack) > 0 {
		v := int(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		for ; pos[v] < off[v+1]; pos[v]++ {
			e := lists[pos[v]]
			if !e.send && !sent[e.task] {
				waiter[e.task] = int32(v)
				break
			}
			visit(v, e)
			if e.send {
				sent[e.task] = true
				if w := waiter[e.task]; w >= 0 {
					stack = append(stack, w)
					waiter[e.task] = -1
				}
			}
		}
	}
	for v := 0; v < n; v++ {
		if pos[v] < off[v+1] {
			return mcDeadlock(p, lists, pos, v)
		}
	}
	return nil
}

// mcDeadlock follows "waits for" from blocked node v until a node repeats
// and returns that cycle. Every blocked node waits on a receive whose
// sender has not reached the send, so the sender is blocked too.
func mcDeadlock(p *Plan, lists []mcEntry, pos []int, v int) error {
	seen := map[int]int{}
	var nodes, tasks []int
	for {
		if k, ok := seen[v]; ok {
			return &MulticastDeadlockError{Nodes: nodes[k:], Tasks: tasks[k:], Plan: p}
		}
		seen[v] = len(nodes)
		t := int(lists[pos[v]].task)
		nodes, tasks = append(nodes, v), append(tasks, t)
		v = p.Tasks[t].Src
	}
}

// ValidateMulticast checks that a plan is a valid schedule of the pattern,
// with a precise error when it is not:
//
//   - tasks name messages, sources and destinations in range, carry the
//     message's size, and never send a node to itself;
//   - every destination of every message receives it exactly once, and no
//     other node receives it (relays are the message's source and its
//     destinations, as in the paper);
//   - each node's SendSeq/RecvSeq positions number its tasks 0..len-1;
//   - a relay forwards a message only after, in its list, the receive of
//     that message;
//   - the lists can be executed: no nodes wait on each other in a cycle
//     (a [*MulticastDeadlockError]);
//   - predicted times are finite and non-negative, each send ends no
//     earlier than it starts, arrives no earlier than it ends, and is
//     received no earlier than it arrives; along each node's list no task
//     starts before the previous one ends (a receive cannot end before it);
//     Predicted is not below the last receive's end.
func ValidateMulticast(mc *Multicast, p *Plan) error {
	if p == nil {
		return fmt.Errorf("collective: nil plan")
	}
	if p.Kind != KindMulticast {
		return fmt.Errorf("collective: plan kind is %q, want %q", p.Kind, KindMulticast)
	}
	if mc == nil {
		return fmt.Errorf("collective: nil multicast pattern")
	}
	n := p.Ranks
	if n < 1 || n > MaxProblemRanks {
		return fmt.Errorf("collective: multicast plan has %d ranks (want 1..%d)", n, MaxProblemRanks)
	}
	if err := mc.Validate(n); err != nil {
		return err
	}
	ds := newMCDeliveries(mc, n)
	if err := ds.check(mc, p, n); err != nil {
		return err
	}
	lists, off, err := mcNodeLists(p, n)
	if err != nil {
		return err
	}
	if err := ds.checkRelays(mc, p); err != nil {
		return err
	}
	if err := mcWalk(p, lists, off, func(int, mcEntry) {}); err != nil {
		return err
	}
	return mcCheckTimes(p, lists, off)
}

// mcDeliveries indexes the deliveries a multicast pattern asks for: one
// slot per destination of every message, in message order, each holding
// the task that delivers it (-1 until seen).
type mcDeliveries struct {
	start []int // start[k]: the first slot of message k
	deliv []int // by slot: the delivering task, or -1
	// slotOf(k, node) is the slot of node as a destination of message k,
	// or -1: a dense table when it is small enough, else a map.
	slotOf func(k, node int) int
}

// newMCDeliveries returns the empty index of mc's deliveries on n nodes.
func newMCDeliveries(mc *Multicast, n int) *mcDeliveries {
	start := make([]int, len(mc.Messages)+1)
	for k, msg := range mc.Messages {
		start[k+1] = start[k] + len(msg.Dests)
	}
	deliv := make([]int, start[len(mc.Messages)])
	for x := range deliv {
		deliv[x] = -1
	}
	ds := &mcDeliveries{start: start, deliv: deliv}
	if dense := len(mc.Messages) * n; dense <= 1<<22 {
		tab := make([]int32, dense)
		for k, msg := range mc.Messages {
			for x, d := range msg.Dests {
				tab[k*n+d] = int32(start[k] + x + 1)
			}
		}
		ds.slotOf = func(k, node int) int { return int(tab[k*n+node]) - 1 }
	} else {
		tab := make(map[[2]int]int, len(deliv))
		for k, msg := range mc.Messages {
			for x, d := range msg.Dests {
				tab[[2]int{k, d}] = start[k] + x
			}
		}
		ds.slotOf = func(k, node int) int {
			if x, ok := tab[[2]int{k, node}]; ok {
				return x
			}
			return -1
		}
	}
	return ds
}

// check records which task delivers what, and fails on the first task
// with a message, nodes or size out of place, on a delivery to a node
// that is not a destination or from a node that cannot hold the message,
// on a delivery made twice, and then on the first delivery never made.
func (ds *mcDeliveries) check(mc *Multicast, p *Plan, n int) error {
	for t, task := range p.Tasks {
		if task.Message < 0 || task.Message >= len(mc.Messages) {
			return fmt.Errorf("collective: multicast plan: task %d: message %d out of range [0,%d)", t, task.Message, len(mc.Messages))
		}
		msg := &mc.Messages[task.Message]
		if task.Src < 0 || task.Src >= n || task.Dst < 0 || task.Dst >= n {
			return fmt.Errorf("collective: multicast plan: task %d: nodes %d->%d out of range [0,%d)", t, task.Src, task.Dst, n)
		}
		if task.Bytes != msg.Bytes {
			return fmt.Errorf("collective: multicast plan: task %d carries %d bytes of message %d, which has %d", t, task.Bytes, task.Message, msg.Bytes)
		}
		x := ds.slotOf(task.Message, task.Dst)
		if x < 0 {
			return fmt.Errorf("collective: multicast plan: task %d delivers message %d to node %d, which is not one of its destinations %v", t, task.Message, task.Dst, msg.Dests)
		}
		if task.Src != msg.Source && ds.slotOf(task.Message, task.Src) < 0 {
			return fmt.Errorf("collective: multicast plan: task %d: node %d relays message %d but is neither its source (%d) nor a destination", t, task.Src, task.Message, msg.Source)
		}
		if ds.deliv[x] >= 0 {
			return fmt.Errorf("collective: multicast plan: message %d is delivered to node %d twice (tasks %d and %d)", task.Message, task.Dst, ds.deliv[x], t)
		}
		ds.deliv[x] = t
	}
	for k, msg := range mc.Messages {
		for x, d := range msg.Dests {
			if ds.deliv[ds.start[k]+x] < 0 {
				return fmt.Errorf("collective: multicast plan: message %d (source %d) never reaches destination %d", k, msg.Source, d)
			}
		}
	}
	return nil
}

// checkRelays fails on the first task whose sender, a relay, forwards the
// message before, in its list, the task that delivers it there. The
// deliveries must have passed check.
func (ds *mcDeliveries) checkRelays(mc *Multicast, p *Plan) error {
	for t, task := range p.Tasks {
		msg := &mc.Messages[task.Message]
		if task.Src == msg.Source {
			continue
		}
		u := ds.deliv[ds.slotOf(task.Message, task.Src)]
		if rs := p.Tasks[u].RecvSeq; rs > task.SendSeq {
			return fmt.Errorf("collective: multicast plan: node %d forwards message %d to node %d (task %d, position %d of its list) before it receives it (task %d, position %d)",
				task.Src, task.Message, task.Dst, t, task.SendSeq, u, rs)
		}
	}
	return nil
}

// mcCheckTimes checks a multicast plan's predicted times: each task's are
// finite, non-negative and in order (send start, send end, arrival,
// receive end); along each node's list (lists and off as mcNodeLists
// returns them) no send starts and no receive ends before the previous
// task ends; and Predicted is not below the last receive's end.
func mcCheckTimes(p *Plan, lists []mcEntry, off []int) error {
	last := 0.0
	for t, task := range p.Tasks {
		for _, f := range [...]struct {
			name string
			v    float64
		}{{"send_start", task.SendStart}, {"send_end", task.SendEnd}, {"arrival", task.Arrival}, {"recv_end", task.RecvEnd}} {
			if !finiteNonNeg(f.v) {
				return fmt.Errorf("collective: multicast plan: task %d: %s = %v: must be finite and non-negative", t, f.name, f.v)
			}
		}
		switch {
		case task.SendEnd < task.SendStart:
			return fmt.Errorf("collective: multicast plan: task %d ends its send at %v before it starts at %v", t, task.SendEnd, task.SendStart)
		case task.Arrival < task.SendEnd:
			return fmt.Errorf("collective: multicast plan: task %d arrives at %v before its send ends at %v", t, task.Arrival, task.SendEnd)
		case task.RecvEnd < task.Arrival:
			return fmt.Errorf("collective: multicast plan: task %d is received at %v before it arrives at %v", t, task.RecvEnd, task.Arrival)
		}
		last = math.Max(last, task.RecvEnd)
	}
	for v := 0; v+1 < len(off); v++ {
		prev, prevEnd := -1, 0.0
		for _, e := range lists[off[v]:off[v+1]] {
			task := &p.Tasks[e.task]
			if e.send {
				if task.SendStart < prevEnd {
					return fmt.Errorf("collective: multicast plan: node %d: task %d (send of message %d to node %d) starts at %v, before its previous task %d ends at %v",
						v, e.task, task.Message, task.Dst, task.SendStart, prev, prevEnd)
				}
				prevEnd = task.SendEnd
			} else {
				if task.RecvEnd < prevEnd {
					return fmt.Errorf("collective: multicast plan: node %d: task %d (receive of message %d from node %d) ends at %v, before its previous task %d ends at %v",
						v, e.task, task.Message, task.Src, task.RecvEnd, prev, prevEnd)
				}
				prevEnd = task.RecvEnd
			}
			prev = int(e.task)
		}
	}
	if p.Predicted < last {
		return fmt.Errorf("collective: multicast plan: predicted completion %v is before the last receive ends at %v", p.Predicted, last)
	}
	return nil
}
