package taskrun

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
)

// ErrInvalid is matched by every error about a bad graph or
// configuration.
var ErrInvalid = errors.New("taskrun: invalid input")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ItemID names a data item of a Graph.
type ItemID int

// TaskID names a task of a Graph.
type TaskID int

// Func is a task's body. It receives its input items in the order of
// Task.In and returns its output items in the order of Task.Out. Inputs
// may be shared with other tasks on the same rank: a Func must not modify
// them (copy first). ctx is cancelled when the execution is aborted.
type Func func(ctx context.Context, in [][]byte) ([][]byte, error)

// Typed adapts a function over typed slices (float64 tiles, int32
// indices, ...) to a Func. Items travel as the slices' in-memory bytes, as
// comm's typed helpers do.
func Typed[T comm.Number](f func(ctx context.Context, in [][]T) ([][]T, error)) Func {
	return func(ctx context.Context, in [][]byte) ([][]byte, error) {
		tin := make([][]T, len(in))
		for k, b := range in {
			v, err := comm.FromBytes[T](b)
			if err != nil {
				return nil, fmt.Errorf("taskrun: input %d: %w", k, err)
			}
			tin[k] = v
		}
		out, err := f(ctx, tin)
		if err != nil {
			return nil, err
		}
		bout := make([][]byte, len(out))
		for k, v := range out {
			bout[k] = comm.AsBytes(v)
		}
		return bout, nil
	}
}

// Task declares one task.
type Task struct {
	// Name identifies the task in errors and reports.
	Name string
	// Kind groups tasks whose speed on a rank is the same per unit of
	// work (a profile keeps one value per kind and rank). "" means Name.
	Kind string
	// Work is the task's amount of work, in the unit of the speed probe
	// (Config.SecondsPerUnit, Config.Probe): its expected time on rank r
	// is Work * seconds per unit on r. Finite and >= 0.
	Work float64
	// Expected, when set, gives the expected time in seconds on every
	// rank directly and overrides Work.
	Expected []float64
	// In and Out are the items the task reads and writes. Every item has
	// exactly one producer.
	In, Out []ItemID
	// Run is the body.
	Run Func
}

func (t *Task) kind() string {
	if t.Kind != "" {
		return t.Kind
	}
	return t.Name
}

type itemDecl struct {
	name string
	size int64
}

// Graph is a task graph to execute. Every rank of the communicator must
// declare the same graph (the same tasks, items and sizes, in the same
// order: an SPMD program does this naturally); Run checks that they did.
type Graph struct {
	items []itemDecl
	tasks []Task
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{} }

// Item declares a data item with its expected size in bytes (used by the
// communication model; the real size may differ).
func (g *Graph) Item(name string, size int64) ItemID {
	g.items = append(g.items, itemDecl{name: name, size: size})
	return ItemID(len(g.items) - 1)
}

// Add declares a task and returns its id. Errors are reported by
// Validate and Run.
func (g *Graph) Add(t Task) TaskID {
	t.In = append([]ItemID(nil), t.In...)
	t.Out = append([]ItemID(nil), t.Out...)
	t.Expected = append([]float64(nil), t.Expected...)
	if len(t.Expected) == 0 {
		t.Expected = nil
	}
	g.tasks = append(g.tasks, t)
	return TaskID(len(g.tasks) - 1)
}

// Tasks returns the number of tasks.
func (g *Graph) Tasks() int { return len(g.tasks) }

// Items returns the number of items.
func (g *Graph) Items() int { return len(g.items) }

// Task returns the declaration of task t.
func (g *Graph) Task(t TaskID) Task { return g.tasks[t] }

func (g *Graph) taskName(i int) string {
	if g.tasks[i].Name != "" {
		return fmt.Sprintf("task %d (%s)", i, g.tasks[i].Name)
	}
	return fmt.Sprintf("task %d", i)
}

func (g *Graph) itemName(d ItemID) string {
	if int(d) >= 0 && int(d) < len(g.items) && g.items[d].name != "" {
		return fmt.Sprintf("item %d (%s)", d, g.items[d].name)
	}
	return fmt.Sprintf("item %d", d)
}

// producers returns the producing task of every item.
func (g *Graph) producers() ([]int, error) {
	prod := make([]int, len(g.items))
	for d := range prod {
		prod[d] = -1
	}
	for i, t := range g.tasks {
		if t.Run == nil {
			return nil, invalid("%s has no Run function", g.taskName(i))
		}
		if !(t.Work >= 0) || math.IsInf(t.Work, 0) {
			return nil, invalid("%s: work %v must be finite and >= 0", g.taskName(i), t.Work)
		}
		for _, e := range t.Expected {
			if !(e >= 0) || math.IsInf(e, 0) {
				return nil, invalid("%s: expected time %v must be finite and >= 0", g.taskName(i), e)
			}
		}
		seen := map[ItemID]bool{}
		for _, list := range [][]ItemID{t.In, t.Out} {
			for _, d := range list {
				if int(d) < 0 || int(d) >= len(g.items) {
					return nil, invalid("%s uses %s, which was not declared", g.taskName(i), g.itemName(d))
				}
				if seen[d] {
					return nil, invalid("%s lists %s twice", g.taskName(i), g.itemName(d))
				}
				seen[d] = true
			}
		}
		for _, d := range t.Out {
			if prod[d] >= 0 {
				return nil, invalid("%s is produced by both %s and %s", g.itemName(d), g.taskName(prod[d]), g.taskName(i))
			}
			prod[d] = i
		}
	}
	for d, it := range g.items {
		if it.size < 0 {
			return nil, invalid("%s has negative size %d", g.itemName(ItemID(d)), it.size)
		}
		if prod[d] < 0 {
			return nil, invalid("%s has no producer (every item must be the output of a task)", g.itemName(ItemID(d)))
		}
	}
	return prod, nil
}

// Validate checks the graph: declared items, one producer per item, a
// body for every task, no cycle.
func (g *Graph) Validate() error {
	if len(g.tasks) == 0 {
		return invalid("graph has no tasks")
	}
	tg, err := g.taskmapGraph(func(int, int) float64 { return 0 }, 1)
	if err != nil {
		return err
	}
	if err := tg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// taskmapGraph builds the planning graph with expected times exec(i, r)
// on ranks machines.
func (g *Graph) taskmapGraph(exec func(task, rank int) float64, ranks int) (*taskmap.Graph, error) {
	prod, err := g.producers()
	if err != nil {
		return nil, err
	}
	tg := &taskmap.Graph{Tasks: make([]taskmap.Task, len(g.tasks)), Items: make([]taskmap.Item, len(g.items))}
	for i, t := range g.tasks {
		e := make([]float64, ranks)
		for r := range e {
			e[r] = exec(i, r)
		}
		tg.Tasks[i] = taskmap.Task{Name: t.Name, Exec: e}
	}
	for d, it := range g.items {
		tg.Items[d] = taskmap.Item{Name: it.name, Size: it.size, Producer: prod[d]}
	}
	for i, t := range g.tasks {
		for _, d := range t.In {
			tg.Items[d].Consumers = append(tg.Items[d].Consumers, i)
		}
	}
	return tg, nil
}

// fingerprint hashes the graph's structure, so ranks can check that they
// declared the same graph.
func (g *Graph) fingerprint() uint64 {
	h := fnv.New64a()
	w := func(format string, args ...any) { fmt.Fprintf(h, format, args...) }
	for _, it := range g.items {
		w("i%q:%d;", it.name, it.size)
	}
	for _, t := range g.tasks {
		w("t%q:%q:%v:%v:%v:%v;", t.Name, t.Kind, t.Work, t.Expected, t.In, t.Out)
	}
	return h.Sum64()
}
