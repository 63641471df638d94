package taskmap

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hetcomm/hetcomm/collective"
)

// RandomConfig describes random problems like those of section 4.1. Zero
// fields take the documented defaults; Tasks and Machines are required.
type RandomConfig struct {
	// Tasks and Machines are the numbers of subtasks and machines (>= 1).
	Tasks    int `json:"tasks"`
	Machines int `json:"machines"`
	// PerBlock is the average number of subtasks per block. 0 means
	// sqrt(Tasks), so that both the number of blocks and their size grow
	// with the number of subtasks.
	PerBlock float64 `json:"per_block,omitempty"`
	// MaxOutDegree bounds the number of immediate successors of a subtask
	// where the block structure allows (0 means 4).
	MaxOutDegree int `json:"max_out_degree,omitempty"`
	// ExtraInputs is the average number of predecessors a subtask has in
	// earlier blocks besides the one in the block just before (0 means 1;
	// negative means none).
	ExtraInputs float64 `json:"extra_inputs,omitempty"`
	// ExecMin and ExecMax bound the expected execution times e_ij, drawn
	// uniformly and independently per subtask and machine (0, 0 means 10,
	// 100).
	ExecMin float64 `json:"exec_min,omitempty"`
	ExecMax float64 `json:"exec_max,omitempty"`
	// ItemMin and ItemMax bound the data item sizes in bytes (0, 0 means
	// 1 KiB, 1 MiB).
	ItemMin int64 `json:"item_min,omitempty"`
	ItemMax int64 `json:"item_max,omitempty"`
	// RatioMin and RatioMax bound the computation/communication ratio:
	// the mean execution time over the mean transfer time of an item
	// between two machines. One ratio is drawn per problem (0, 0 means
	// 10, 200, the paper's "medium").
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
}

func (c RandomConfig) withDefaults() (RandomConfig, error) {
	if c.Tasks < 1 || c.Machines < 1 {
		return c, invalid("random problem needs at least one task and one machine (got %d, %d)", c.Tasks, c.Machines)
	}
	if c.PerBlock == 0 {
		c.PerBlock = math.Sqrt(float64(c.Tasks))
	}
	if c.MaxOutDegree == 0 {
		c.MaxOutDegree = 4
	}
	if c.ExtraInputs == 0 {
		c.ExtraInputs = 1
	}
	if c.ExtraInputs < 0 {
		c.ExtraInputs = 0
	}
	if c.ExecMin == 0 && c.ExecMax == 0 {
		c.ExecMin, c.ExecMax = 10, 100
	}
	if c.ItemMin == 0 && c.ItemMax == 0 {
		c.ItemMin, c.ItemMax = 1<<10, 1<<20
	}
	if c.RatioMin == 0 && c.RatioMax == 0 {
		c.RatioMin, c.RatioMax = 10, 200
	}
	switch {
	case !(c.PerBlock >= 1) || math.IsInf(c.PerBlock, 0):
		return c, invalid("subtasks per block %v: must be at least 1", c.PerBlock)
	case c.MaxOutDegree < 1:
		return c, invalid("max out-degree %d: must be positive", c.MaxOutDegree)
	case !finiteNonNeg(c.ExecMin) || !finiteNonNeg(c.ExecMax) || c.ExecMin > c.ExecMax:
		return c, invalid("execution times [%v, %v]: want 0 <= min <= max", c.ExecMin, c.ExecMax)
	case c.ItemMin < 0 || c.ItemMin > c.ItemMax:
		return c, invalid("item sizes [%d, %d]: want 0 <= min <= max", c.ItemMin, c.ItemMax)
	case !(c.RatioMin > 0) || c.RatioMin > c.RatioMax || math.IsInf(c.RatioMax, 0):
		return c, invalid("computation/communication ratio [%v, %v]: want 0 < min <= max", c.RatioMin, c.RatioMax)
	}
	return c, nil
}

// Random draws a random problem: a layered graph with round(Tasks /
// PerBlock) blocks (each subtask has a predecessor in the block just
// before it and ExtraInputs more, on average, in earlier blocks; every
// subtask with successors produces one data item that all of them
// consume), an execution time matrix, and a communication model with a
// latency and a per-byte time per ordered pair of machines (each drawn
// from 0.5 to 1.5 times its mean; a fifth of the mean transfer time is
// latency) scaled to the computation/communication ratio.
func Random(cfg RandomConfig, rng *rand.Rand) (*Graph, *collective.Model, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	n, m := c.Tasks, c.Machines
	layers := int(math.Round(float64(n) / c.PerBlock))
	layers = min(max(layers, 1), n)
	size := make([]int, layers)
	for l := range size {
		size[l] = 1
	}
	for k := 0; k < n-layers; k++ {
		size[rng.IntN(layers)]++
	}
	first := make([]int, layers+1) // first task of every layer
	for l := 0; l < layers; l++ {
		first[l+1] = first[l] + size[l]
	}

	g := &Graph{Tasks: make([]Task, n)}
	itemOf := make([]int, n)
	outdeg := make([]int, n)
	for i := range itemOf {
		itemOf[i] = -1
	}
	consumes := make([]map[int]bool, n)
	link := func(prod, cons int) {
		if consumes[cons] == nil {
			consumes[cons] = map[int]bool{}
		}
		if consumes[cons][prod] {
			return
		}
		consumes[cons][prod] = true
		if itemOf[prod] < 0 {
			itemOf[prod] = len(g.Items)
			sz := c.ItemMin
			if c.ItemMax > c.ItemMin {
				sz += rng.Int64N(c.ItemMax - c.ItemMin + 1)
			}
			g.Items = append(g.Items, Item{Name: fmt.Sprintf("d%d", len(g.Items)), Size: sz, Producer: prod})
		}
		it := &g.Items[itemOf[prod]]
		it.Consumers = append(it.Consumers, cons)
		outdeg[prod]++
	}
	// pick returns a producer of layer l with room for another successor,
	// or the least loaded one.
	pick := func(l int) int {
		lo, hi := first[l], first[l+1]
		for try := 0; try < 8; try++ {
			if t := lo + rng.IntN(hi-lo); outdeg[t] < c.MaxOutDegree {
				return t
			}
		}
		best := lo
		for t := lo; t < hi; t++ {
			if outdeg[t] < outdeg[best] {
				best = t
			}
		}
		return best
	}
	for l := 1; l < layers; l++ {
		for t := first[l]; t < first[l+1]; t++ {
			link(pick(l-1), t)
		}
	}
	for l := 1; l < layers; l++ {
		for t := first[l]; t < first[l+1]; t++ {
			extra := int(c.ExtraInputs)
			if rng.Float64() < c.ExtraInputs-float64(extra) {
				extra++
			}
			for k := 0; k < extra; k++ {
				link(pick(rng.IntN(l)), t)
			}
		}
	}
	for i := range g.Tasks {
		e := make([]float64, m)
		for j := range e {
			e[j] = c.ExecMin + (c.ExecMax-c.ExecMin)*rng.Float64()
		}
		g.Tasks[i] = Task{Name: fmt.Sprintf("s%d", i), Exec: e}
	}

	ratio := c.RatioMin + (c.RatioMax-c.RatioMin)*rng.Float64()
	meanComm := (c.ExecMin + c.ExecMax) / 2 / ratio
	meanSize := float64(c.ItemMin+c.ItemMax) / 2
	latShare := 0.2
	if meanSize == 0 {
		latShare = 1
	}
	model := &collective.Model{Latency: collective.Matrix(m, 0), PerByte: collective.Matrix(m, 0)}
	for x := 0; x < m; x++ {
		for y := 0; y < m; y++ {
			if x == y {
				continue
			}
			model.Latency[x][y] = latShare * meanComm * (0.5 + rng.Float64())
			if meanSize > 0 {
				model.PerByte[x][y] = (1 - latShare) * meanComm / meanSize * (0.5 + rng.Float64())
			}
		}
	}
	return g, model, nil
}
