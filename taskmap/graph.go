package taskmap

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid is matched (errors.Is) by every error that reports bad input:
// a malformed graph, a cyclic graph, a model of the wrong size, a mapping
// that does not cover the graph.
var ErrInvalid = errors.New("taskmap: invalid input")

// ErrCycle is matched by the error for a graph whose data dependencies
// form a cycle. It also matches ErrInvalid.
var ErrCycle = fmt.Errorf("%w: cyclic graph", ErrInvalid)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Graph is an application decomposed into subtasks and the data items
// they exchange (the paper's section 2). Subtasks are numbered by their
// index in Tasks; data items by their index in Items.
//
// A data item has exactly one producer and zero or more consumers; the
// data dependencies (producer before consumer) must form a directed
// acyclic graph.
type Graph struct {
	Tasks []Task `json:"tasks"`
	Items []Item `json:"items"`
}

// Task is one subtask.
type Task struct {
	// Name is for messages and reports; it may be empty.
	Name string `json:"name,omitempty"`
	// Exec[j] is e_ij, the expected execution time in seconds of this
	// subtask on machine j. Every task of a graph has one entry per
	// machine; entries are finite and non-negative.
	Exec []float64 `json:"exec"`
}

// Item is one data item: Producer writes it, every consumer reads all of
// it before it starts.
type Item struct {
	Name      string `json:"name,omitempty"`
	Size      int64  `json:"size"`      // bytes, >= 0
	Producer  int    `json:"producer"`  // a task index
	Consumers []int  `json:"consumers"` // task indices, distinct, not the producer
}

// Machines returns the number of machines the graph's execution times
// describe (the length of the first task's Exec), or 0 for an empty graph.
func (g *Graph) Machines() int {
	if g == nil || len(g.Tasks) == 0 {
		return 0
	}
	return len(g.Tasks[0].Exec)
}

// taskName names task i in error messages.
func (g *Graph) taskName(i int) string {
	if g.Tasks[i].Name != "" {
		return fmt.Sprintf("task %d (%s)", i, g.Tasks[i].Name)
	}
	return fmt.Sprintf("task %d", i)
}

func (g *Graph) itemName(d int) string {
	if g.Items[d].Name != "" {
		return fmt.Sprintf("item %d (%s)", d, g.Items[d].Name)
	}
	return fmt.Sprintf("item %d", d)
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// Validate checks the graph: at least one task and one machine, one
// finite non-negative execution time per machine for every task, items
// with a valid producer, valid distinct consumers other than the producer,
// non-negative sizes, and no cycle. Errors match ErrInvalid (and ErrCycle
// for a cycle).
func (g *Graph) Validate() error {
	_, err := g.topoOrder()
	return err
}

// checkShape is Validate without the cycle check.
func (g *Graph) checkShape() error {
	if g == nil {
		return invalid("nil graph")
	}
	if len(g.Tasks) == 0 {
		return invalid("graph has no tasks")
	}
	m := len(g.Tasks[0].Exec)
	if m == 0 {
		return invalid("%s has no execution times (no machines)", g.taskName(0))
	}
	for i, t := range g.Tasks {
		if len(t.Exec) != m {
			return invalid("%s has %d execution times, want %d (one per machine)", g.taskName(i), len(t.Exec), m)
		}
		for j, e := range t.Exec {
			if !finiteNonNeg(e) {
				return invalid("%s: execution time on machine %d is %v: must be finite and non-negative", g.taskName(i), j, e)
			}
		}
	}
	n := len(g.Tasks)
	for d, it := range g.Items {
		if it.Size < 0 {
			return invalid("%s has negative size %d", g.itemName(d), it.Size)
		}
		if it.Producer < 0 || it.Producer >= n {
			return invalid("%s: producer %d is not a task (have %d)", g.itemName(d), it.Producer, n)
		}
		seen := make(map[int]bool, len(it.Consumers))
		for _, c := range it.Consumers {
			if c < 0 || c >= n {
				return invalid("%s: consumer %d is not a task (have %d)", g.itemName(d), c, n)
			}
			if c == it.Producer {
				return invalid("%s: %s consumes its own output", g.itemName(d), g.taskName(c))
			}
			if seen[c] {
				return invalid("%s: consumer %s listed twice", g.itemName(d), g.taskName(c))
			}
			seen[c] = true
		}
	}
	return nil
}

// topoOrder validates the graph and returns its tasks in a topological
// order (Kahn's algorithm, smallest index first among the ready ones).
func (g *Graph) topoOrder() ([]int, error) {
	if err := g.checkShape(); err != nil {
		return nil, err
	}
	n := len(g.Tasks)
	indeg := make([]int, n)
	succ := make([][]int, n)
	for _, it := range g.Items {
		for _, c := range it.Consumers {
			succ[it.Producer] = append(succ[it.Producer], c)
			indeg[c]++
		}
	}
	order := make([]int, 0, n)
	ready := minHeap[int]{less: func(x, y int) bool { return x < y }} // lowest index first
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			ready.push(i)
		}
	}
	for ready.len() > 0 {
		i := ready.pop()
		order = append(order, i)
		for _, c := range succ[i] {
			indeg[c]--
			if indeg[c] == 0 {
				ready.push(c)
			}
		}
	}
	if len(order) != n {
		for i := 0; i < n; i++ {
			if indeg[i] > 0 {
				return nil, fmt.Errorf("%w: %s is on a cycle or after one", ErrCycle, g.taskName(i))
			}
		}
	}
	return order, nil
}
