package taskrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

// exec is one rank's part of an execution: a control loop that receives
// assignments and forwarding orders from the root, a worker that runs the
// assigned tasks in order, and the data items this rank holds.
//
// Goroutines: control and work (owned by Run), one per posted receive
// and one per send (tracked by io). Lock order: mu only.
type exec struct {
	c              *comm.Comm
	g              *Graph
	me, root, size int
	epoch          time.Time
	ctx            context.Context
	cancel         context.CancelCauseFunc

	queue chan int // assigned tasks, in order
	io    sync.WaitGroup

	mu        sync.Mutex
	slots     map[int]*slot
	stopItems []int
	ran       int
	busy      float64
}

// slot is one data item on this rank.
type slot struct {
	ready chan struct{} // closed when data is here
	data  []byte
	have  bool
	recv  bool  // a receive is posted for it
	fwd   []int // ranks to send it to once produced
}

func newExec(ctx context.Context, c *comm.Comm, g *Graph, root int, epoch time.Time) *exec {
	ex := &exec{c: c, g: g, me: c.Rank(), root: root, size: c.Size(), epoch: epoch,
		queue: make(chan int, len(g.tasks)), slots: map[int]*slot{}}
	ex.ctx, ex.cancel = context.WithCancelCause(ctx)
	return ex
}

func (ex *exec) now() float64 { return time.Since(ex.epoch).Seconds() }

// slot returns item d's slot; mu must be held.
func (ex *exec) slot(d int) *slot {
	s := ex.slots[d]
	if s == nil {
		s = &slot{ready: make(chan struct{})}
		ex.slots[d] = s
	}
	return s
}

// control receives the root's orders until it says stop (nil) or abort.
func (ex *exec) control() error {
	defer close(ex.queue)
	for {
		b, _, err := ex.c.Recv(ex.ctx, ex.root, tagCtl)
		if err != nil {
			err = ex.failure(fmt.Errorf("taskrun: rank %d: waiting for orders: %w", ex.me, err))
			return err
		}
		m, err := decode(b)
		if err != nil {
			return ex.failure(fmt.Errorf("taskrun: rank %d: from the root: %w", ex.me, err))
		}
		switch m.kind {
		case msgAssign:
			if m.task < 0 || m.task >= len(ex.g.tasks) {
				return ex.failure(fmt.Errorf("taskrun: rank %d: assigned unknown task %d", ex.me, m.task))
			}
			for _, in := range m.inputs {
				if in[1] != ex.me {
					ex.expect(in[0], in[1])
				}
			}
			ex.queue <- m.task
		case msgForward:
			ex.forward(m.item, m.rank)
		case msgStop:
			ex.mu.Lock()
			ex.stopItems = m.items
			ex.mu.Unlock()
			return nil
		case msgAbort:
			return ex.failure(&AbortError{Reason: m.message})
		default:
			return ex.failure(fmt.Errorf("taskrun: rank %d: unexpected message kind %d from the root", ex.me, m.kind))
		}
	}
}

// failure cancels the execution on this rank with err (the first cause
// wins) and returns the cause.
func (ex *exec) failure(err error) error {
	ex.cancel(err)
	return context.Cause(ex.ctx)
}

// expect posts the receive of item d from rank src, once.
func (ex *exec) expect(d, src int) {
	ex.mu.Lock()
	s := ex.slot(d)
	if s.have || s.recv {
		ex.mu.Unlock()
		return
	}
	s.recv = true
	ex.mu.Unlock()
	req := ex.c.Irecv(ex.ctx, src, dataTag(d))
	ex.io.Add(1)
	go func() {
		defer ex.io.Done()
		if _, err := req.Wait(ex.ctx); err != nil {
			ex.failure(fmt.Errorf("taskrun: rank %d: receiving %s from rank %d: %w", ex.me, ex.g.itemName(ItemID(d)), src, err))
			return
		}
		ex.mu.Lock()
		s.data, s.have = req.Data(), true
		close(s.ready)
		ex.mu.Unlock()
	}()
}

// forward sends item d to rank dst now if it is here, or as soon as it
// is produced.
func (ex *exec) forward(d, dst int) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	s := ex.slot(d)
	if s.have {
		ex.send(d, dst, s.data)
		return
	}
	s.fwd = append(s.fwd, dst)
}

// produce stores an output and sends it where it is awaited.
func (ex *exec) produce(d int, data []byte) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	s := ex.slot(d)
	if data == nil {
		data = []byte{}
	}
	s.data, s.have = data, true
	close(s.ready)
	for _, dst := range s.fwd {
		ex.send(d, dst, data)
	}
	s.fwd = nil
}

// send starts sending item d to rank dst; mu must be held.
func (ex *exec) send(d, dst int, data []byte) {
	req := ex.c.Isend(ex.ctx, dst, dataTag(d), data)
	ex.io.Add(1)
	go func() {
		defer ex.io.Done()
		if _, err := req.Wait(ex.ctx); err != nil {
			ex.failure(fmt.Errorf("taskrun: rank %d: sending %s to rank %d: %w", ex.me, ex.g.itemName(ItemID(d)), dst, err))
		}
	}()
}

func (ex *exec) report(m *msg) error {
	if err := ex.c.Send(ex.ctx, ex.root, tagReport, m.encode()); err != nil {
		return ex.failure(fmt.Errorf("taskrun: rank %d: reporting to the root: %w", ex.me, err))
	}
	return nil
}

// work runs the assigned tasks in order, each once its inputs are here.
func (ex *exec) work() error {
	for i := range ex.queue {
		t := &ex.g.tasks[i]
		in := make([][]byte, len(t.In))
		for k, d := range t.In {
			ex.mu.Lock()
			s := ex.slot(int(d))
			ex.mu.Unlock()
			select {
			case <-s.ready:
				in[k] = s.data
			case <-ex.ctx.Done():
				return context.Cause(ex.ctx)
			}
		}
		t0 := ex.now()
		if err := ex.report(&msg{kind: msgStarted, task: i, t0: t0}); err != nil {
			return err
		}
		out, err := runTask(ex.ctx, t, in)
		t1 := ex.now()
		if err == nil && len(out) != len(t.Out) {
			err = fmt.Errorf("returned %d outputs, it declares %d", len(out), len(t.Out))
		}
		if err != nil {
			if ex.ctx.Err() != nil {
				return context.Cause(ex.ctx)
			}
			err = &TaskError{Task: TaskID(i), Name: t.Name, Rank: ex.me, Err: err}
			ex.report(&msg{kind: msgFailed, task: i, message: err.Error()})
			return err
		}
		for k, d := range t.Out {
			ex.produce(int(d), out[k])
		}
		ex.mu.Lock()
		ex.ran++
		ex.busy += t1 - t0
		ex.mu.Unlock()
		if err := ex.report(&msg{kind: msgFinished, task: i, t0: t0, t1: t1}); err != nil {
			return err
		}
	}
	return nil
}

// runTask runs a task's body, turning a panic into an error.
func runTask(ctx context.Context, t *Task, in [][]byte) (out [][]byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return t.Run(ctx, in)
}

// TaskError reports a task whose body failed.
type TaskError struct {
	Task TaskID
	Name string
	Rank int
	Err  error
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("taskrun: task %d (%s) on rank %d: %v", e.Task, e.Name, e.Rank, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }

// AbortError is what the other ranks see when the root aborts an
// execution (a task failed somewhere).
type AbortError struct{ Reason string }

func (e *AbortError) Error() string { return "taskrun: aborted: " + e.Reason }

// ErrAborted is matched by AbortError.
var ErrAborted = errors.New("taskrun: aborted")

func (e *AbortError) Is(target error) bool { return target == ErrAborted }
