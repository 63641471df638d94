package taskmap

import (
	"math/bits"

	"github.com/hetcomm/hetcomm/collective"
)

// Problem is a validated graph on a system of machines, with everything
// the planners derive from the graph alone: the data dependencies between
// subtasks, the blocks of section 3.2, a topological order and the number
// of descendants of every subtask. It is immutable and safe for concurrent
// use.
//
// Communication follows the paper's fully connected, contention-free
// model: a data item of b bytes produced on machine x and consumed on
// machine y arrives Model.Cost(x, y, b) = latency[x][y] + b*perByte[x][y]
// seconds after its producer completes, and at once when x == y. A
// consumer needs several items from one producer; they travel
// independently, so the transfer time c_ij of the dependency is that of
// the largest.
type Problem struct {
	g     *Graph
	n, m  int
	avail []float64

	lat, pb []float64 // m*m, row = source machine

	preds, succs [][]dep
	edges        []edge
	order        []int   // topological
	block        []int   // block of each task
	blocks       [][]int // tasks of each block, by index
	desc         []int   // number of (transitive) descendants
}

// dep is one end of a dependency edge.
type dep struct {
	task int
	edge int
}

// edge is a data dependency: some items flow from task from to task to.
type edge struct {
	from, to int
	bytes    int64 // largest item on the edge
	items    []int
}

// NewProblem validates g, the communication model and the machines'
// availability times and prepares the problem. model may be nil (free
// communication); otherwise it must validate and describe exactly
// g.Machines() machines. avail[j] is A[j], the earliest time machine j can
// start work (nil: all zero; otherwise one finite non-negative entry per
// machine). The graph is copied.
func NewProblem(g *Graph, model *collective.Model, avail []float64) (*Problem, error) {
	order, err := g.topoOrder()
	if err != nil {
		return nil, err
	}
	n, m := len(g.Tasks), g.Machines()
	p := &Problem{g: cloneGraph(g), n: n, m: m, order: order}

	p.avail = make([]float64, m)
	if avail != nil {
		if len(avail) != m {
			return nil, invalid("%d availability times for %d machines", len(avail), m)
		}
		for j, a := range avail {
			if !finiteNonNeg(a) {
				return nil, invalid("availability of machine %d is %v: must be finite and non-negative", j, a)
			}
		}
		copy(p.avail, avail)
	}

	p.lat = make([]float64, m*m)
	p.pb = make([]float64, m*m)
	if model != nil {
		if err := model.Validate(); err != nil {
			return nil, invalid("communication model: %v", err)
		}
		if model.Size() != m {
			return nil, invalid("communication model has %d machines, the graph %d", model.Size(), m)
		}
		for x := 0; x < m; x++ {
			for y := 0; y < m; y++ {
				if x == y {
					continue
				}
				if model.Latency != nil {
					p.lat[x*m+y] = model.Latency[x][y]
				}
				switch {
				case model.PerByte != nil:
					p.pb[x*m+y] = model.PerByte[x][y]
				case model.Bandwidth != nil:
					p.pb[x*m+y] = 1 / model.Bandwidth[x][y]
				}
			}
		}
	}

	// Dependency edges: one per (producer, consumer) pair.
	p.preds = make([][]dep, n)
	p.succs = make([][]dep, n)
	index := map[[2]int]int{}
	for d, it := range p.g.Items {
		for _, c := range it.Consumers {
			key := [2]int{it.Producer, c}
			e, ok := index[key]
			if !ok {
				e = len(p.edges)
				index[key] = e
				p.edges = append(p.edges, edge{from: it.Producer, to: c})
				p.succs[it.Producer] = append(p.succs[it.Producer], dep{task: c, edge: e})
				p.preds[c] = append(p.preds[c], dep{task: it.Producer, edge: e})
			}
			p.edges[e].items = append(p.edges[e].items, d)
			p.edges[e].bytes = max(p.edges[e].bytes, it.Size)
		}
	}

	// Blocks (section 3.2): block 0 holds the subtasks without
	// predecessors; a subtask is in block k when its latest predecessor is
	// in block k-1. So every predecessor is in an earlier block, one is in
	// the block just before, and a block holds no dependent pair.
	p.block = make([]int, n)
	nb := 0
	for _, i := range order {
		b := 0
		for _, d := range p.preds[i] {
			b = max(b, p.block[d.task]+1)
		}
		p.block[i] = b
		nb = max(nb, b+1)
	}
	p.blocks = make([][]int, nb)
	for i := 0; i < n; i++ {
		p.blocks[p.block[i]] = append(p.blocks[p.block[i]], i)
	}

	// Descendant counts, with one bitset per task (n^2/8 bytes).
	words := (n + 63) / 64
	sets := make([]uint64, n*words)
	p.desc = make([]int, n)
	for k := n - 1; k >= 0; k-- {
		i := order[k]
		si := sets[i*words : (i+1)*words]
		for _, d := range p.succs[i] {
			c := d.task
			si[c/64] |= 1 << (c % 64)
			sc := sets[c*words : (c+1)*words]
			for w := range si {
				si[w] |= sc[w]
			}
		}
		cnt := 0
		for _, w := range si {
			cnt += bits.OnesCount64(w)
		}
		p.desc[i] = cnt
	}
	return p, nil
}

func cloneGraph(g *Graph) *Graph {
	c := &Graph{Tasks: make([]Task, len(g.Tasks)), Items: make([]Item, len(g.Items))}
	for i, t := range g.Tasks {
		c.Tasks[i] = Task{Name: t.Name, Exec: append([]float64(nil), t.Exec...)}
	}
	for d, it := range g.Items {
		c.Items[d] = Item{Name: it.Name, Size: it.Size, Producer: it.Producer, Consumers: append([]int(nil), it.Consumers...)}
	}
	return c
}

// Graph returns the problem's (copied) graph. Do not modify it.
func (p *Problem) Graph() *Graph { return p.g }

// Tasks returns the number of subtasks.
func (p *Problem) Tasks() int { return p.n }

// Machines returns the number of machines.
func (p *Problem) Machines() int { return p.m }

// Avail returns A[j], the initial availability time of machine j.
func (p *Problem) Avail(j int) float64 { return p.avail[j] }

// Exec returns e_ij, the expected execution time of task i on machine j.
func (p *Problem) Exec(i, j int) float64 { return p.g.Tasks[i].Exec[j] }

// CommCost returns the modelled time for b bytes to go from machine x to
// machine y: zero when x == y, else latency + b * per-byte time.
func (p *Problem) CommCost(x, y int, b int64) float64 {
	if x == y {
		return 0
	}
	return p.lat[x*p.m+y] + float64(b)*p.pb[x*p.m+y]
}

// edgeCost is c_ij for edge e between machines x and y (expected value).
func (p *Problem) edgeCost(e, x, y int) float64 {
	if x == y {
		return 0
	}
	k := x*p.m + y
	return p.lat[k] + float64(p.edges[e].bytes)*p.pb[k]
}

// Block returns the block of task i.
func (p *Problem) Block(i int) int { return p.block[i] }

// Blocks returns the tasks of every block, each in increasing index
// order. Do not modify the result.
func (p *Problem) Blocks() [][]int { return p.blocks }

// Preds returns the immediate predecessors of task i (ips), in the order
// of their first shared item.
func (p *Problem) Preds(i int) []int { return depTasks(p.preds[i]) }

// Succs returns the immediate successors of task i (iss).
func (p *Problem) Succs(i int) []int { return depTasks(p.succs[i]) }

func depTasks(ds []dep) []int {
	out := make([]int, len(ds))
	for k, d := range ds {
		out[k] = d.task
	}
	return out
}

// Descendants returns the number of subtasks that depend on task i,
// directly or not.
func (p *Problem) Descendants(i int) int { return p.desc[i] }

// TopoOrder returns the tasks in a topological order. Do not modify it.
func (p *Problem) TopoOrder() []int { return p.order }
