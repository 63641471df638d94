package collective

import (
	"container/heap"
	"fmt"
	"math"
)

// Flow is one transfer for the flow-level simulator.
type Flow struct {
	Src, Dst int
	Bytes    int64
	// Start is the earliest time the flow may begin, in seconds.
	Start float64
	// After lists flows (indices into the same slice) that must have
	// ended before this one begins: a one-port plan's order on each port.
	After []int
	// Rate caps the flow's rate in bytes per second (a paced flow); 0
	// means no cap.
	Rate float64
}

// FlowTimes is when a simulated flow began (its start time and
// dependencies allowed it) and ended (its last byte arrived).
type FlowTimes struct {
	Start, End float64
}

// SimulateFlows runs flows on the fabric and returns when each began and
// ended. A flow that may begin at t (its Start, and every flow of its
// After ended) first pays its start-up time (the pair's latency and slow
// start, Fabric.StartUp), holding no capacity, then sends its bytes. At
// every moment the active flows share every NIC and segment direction
// max-min fairly (progressive filling: all rates rise together until a
// resource is full or a flow reaches its cap; those flows keep their rate,
// the others go on rising), so no resource carries more than its
// capacity. A flow of 0 bytes ends when its start-up ends.
//
// It fails on a flow with ranks out of range, a flow to itself, negative
// bytes or start, a bad rate, or dependencies that are out of range or
// form a cycle. The cost is O(F) rate computations of O(F log F) each for
// F flows.
func (f *Fabric) SimulateFlows(flows []Flow) ([]FlowTimes, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	s, err := newFlowSim(f, flows)
	if err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	return s.times, nil
}

// flowSim is the state of one simulation.
type flowSim struct {
	f      *Fabric
	flows  []Flow
	res    []resource
	routes [][]int32 // resources each flow uses
	next   [][]int   // flows that wait for each flow
	waits  []int     // unfinished dependencies of each flow
	times  []FlowTimes

	now     float64
	pending flowTimeHeap // flows in start-up, by the time they turn active
	active  []int        // flows sending
	left    []float64    // bytes each active flow still has to send
	rate    []float64    // each active flow's current rate
	done    int

	// share's buffers, kept from one call to the next.
	rs      []resState
	members [][]int // the active flows through each resource
	frozen  []bool  // by flow
	levels  levelHeap
}

func newFlowSim(f *Fabric, flows []Flow) (*flowSim, error) {
	n := f.Size()
	s := &flowSim{f: f, flows: flows, res: f.fabricResources(), routes: make([][]int32, len(flows)),
		next: make([][]int, len(flows)), waits: make([]int, len(flows)), times: make([]FlowTimes, len(flows)),
		left: make([]float64, len(flows)), rate: make([]float64, len(flows))}
	idx := f.segmentIndex()
	for k, fl := range flows {
		switch {
		case fl.Src < 0 || fl.Src >= n || fl.Dst < 0 || fl.Dst >= n:
			return nil, fmt.Errorf("collective: flow %d (%d->%d): rank out of range [0,%d)", k, fl.Src, fl.Dst, n)
		case fl.Src == fl.Dst:
			return nil, fmt.Errorf("collective: flow %d (%d->%d) goes to its own source", k, fl.Src, fl.Dst)
		case fl.Bytes < 0:
			return nil, fmt.Errorf("collective: flow %d (%d->%d): negative size %d", k, fl.Src, fl.Dst, fl.Bytes)
		case !finiteNonNeg(fl.Start):
			return nil, fmt.Errorf("collective: flow %d (%d->%d): start %v", k, fl.Src, fl.Dst, fl.Start)
		case !finiteNonNeg(fl.Rate):
			return nil, fmt.Errorf("collective: flow %d (%d->%d): rate %v", k, fl.Src, fl.Dst, fl.Rate)
		}
		s.routes[k] = f.route(nil, idx, fl.Src, fl.Dst)
		for _, d := range fl.After {
			if d < 0 || d >= len(flows) || d == k {
				return nil, fmt.Errorf("collective: flow %d waits for flow %d, out of range or itself", k, d)
			}
			s.next[d] = append(s.next[d], k)
			s.waits[k]++
		}
		s.left[k] = float64(fl.Bytes)
	}
	return s, nil
}

func (s *flowSim) run() error {
	for k := range s.flows {
		if s.waits[k] == 0 {
			s.ready(k, s.flows[k].Start)
		}
	}
	for s.done < len(s.flows) {
		if len(s.active) == 0 && len(s.pending) == 0 {
			return fmt.Errorf("collective: %d flows wait for each other in a cycle", len(s.flows)-s.done)
		}
		s.share()
		// The next event: a flow turns active, or an active flow ends.
		t := math.Inf(1)
		if len(s.pending) > 0 {
			t = s.pending[0].at
		}
		for _, k := range s.active {
			t = min(t, s.now+s.left[k]/s.rate[k])
		}
		s.advance(t)
	}
	return nil
}

// ready makes flow k able to begin at t: it starts its start-up.
func (s *flowSim) ready(k int, t float64) {
	t = max(t, s.flows[k].Start)
	s.times[k].Start = t
	fl := s.flows[k]
	heap.Push(&s.pending, flowTime{at: t + s.f.StartUp(fl.Src, fl.Dst), flow: k})
}

// advance moves time to t: the active flows send at their rates, the
// flows that are done end, and the start-ups that are over turn active.
func (s *flowSim) advance(t float64) {
	prev := s.now
	dt := t - prev
	s.now = t
	var ended []int
	keep := s.active[:0]
	for _, k := range s.active {
		// A flow whose end is this event ends now: computed as run
		// computed t, so the flow that set t ends even when its few
		// bytes left take less than the rounding step of the clock (a
		// fast flow late in a long simulation), and within rounding of
		// its bytes.
		end := prev + s.left[k]/s.rate[k]
		s.left[k] -= s.rate[k] * dt
		if end <= t || s.left[k] <= 1e-9*float64(s.flows[k].Bytes)+1e-9 {
			ended = append(ended, k)
			continue
		}
		keep = append(keep, k)
	}
	s.active = keep
	for len(s.pending) > 0 && s.pending[0].at <= t {
		k := heap.Pop(&s.pending).(flowTime).flow
		if s.flows[k].Bytes == 0 {
			ended = append(ended, k)
			continue
		}
		s.active = append(s.active, k)
	}
	for _, k := range ended {
		s.end(k)
	}
}

// end records that flow k ended now and releases the flows that waited
// for it.
func (s *flowSim) end(k int) {
	s.times[k].End = s.now
	s.done++
	for _, d := range s.next[k] {
		if s.waits[d]--; s.waits[d] == 0 {
			s.ready(d, s.now)
		}
	}
}

// share gives the active flows their max-min fair rates by progressive
// filling. All unfrozen flows run at one level L that rises; a resource
// freezes its flows at the level where it is full, a flow with a cap at
// its cap.
func (s *flowSim) share() {
	if s.rs == nil {
		s.rs = make([]resState, len(s.res))
		s.members = make([][]int, len(s.res))
		s.frozen = make([]bool, len(s.flows))
	}
	rs, members := s.rs, s.members
	for r := range rs {
		rs[r] = resState{}
		members[r] = members[r][:0]
	}
	for _, k := range s.active {
		s.frozen[k] = false
		for _, r := range s.routes[k] {
			rs[r].count++
			members[r] = append(members[r], k)
		}
	}
	// A flow alone on every resource it uses gets the least of their
	// capacities (and of its cap) whatever the others do: that is where
	// progressive filling would freeze it, and none of its resources has
	// room left for anybody else. In a one-port plan on a fabric without
	// shared segments that is every flow, and the filling below is left
	// with nothing to do.
	levels := s.levels[:0]
	nfrozen := 0
	freeze := func(k int, at float64) {
		s.frozen[k] = true
		nfrozen++
		s.rate[k] = at
		for _, r := range s.routes[k] {
			rs[r].frozen += at
			rs[r].count--
			if rs[r].count > 0 && !rs[r].full {
				heap.Push(&levels, level{at: (s.res[r].cap - rs[r].frozen) / float64(rs[r].count), res: r, flow: -1})
			}
		}
	}
	for _, k := range s.active {
		alone, at := true, math.Inf(1)
		for _, r := range s.routes[k] {
			if rs[r].count != 1 {
				alone = false
				break
			}
			at = min(at, s.res[r].cap)
		}
		if !alone {
			continue
		}
		if c := s.flows[k].Rate; c > 0 {
			at = min(at, c)
		}
		freeze(k, at) // leaves its resources with no flow to share them
	}
	for r := range rs {
		if rs[r].count > 0 {
			levels = append(levels, level{at: s.res[r].cap / float64(rs[r].count), res: int32(r), flow: -1})
		}
	}
	for _, k := range s.active {
		if c := s.flows[k].Rate; c > 0 && !s.frozen[k] {
			levels = append(levels, level{at: c, res: -1, flow: int32(k)})
		}
	}
	heap.Init(&levels)
	for nfrozen < len(s.active) && len(levels) > 0 {
		lv := heap.Pop(&levels).(level)
		if lv.flow >= 0 {
			if !s.frozen[lv.flow] {
				freeze(int(lv.flow), lv.at)
			}
			continue
		}
		r := lv.res
		if rs[r].full || rs[r].count == 0 {
			continue
		}
		// A stale entry: the resource's level moved since it was pushed.
		if cur := (s.res[r].cap - rs[r].frozen) / float64(rs[r].count); cur != lv.at {
			continue
		}
		rs[r].full = true
		for _, k := range members[r] {
			if !s.frozen[k] {
				freeze(k, lv.at)
			}
		}
	}
	s.levels = levels
}

// resState is a resource during one progressive filling.
type resState struct {
	frozen float64 // bandwidth taken by frozen flows
	count  int     // unfrozen flows through it
	full   bool
}

// flowTime is a flow and the time its start-up ends.
type flowTime struct {
	at   float64
	flow int
}

type flowTimeHeap []flowTime

func (h flowTimeHeap) Len() int { return len(h) }
func (h flowTimeHeap) Less(a, b int) bool {
	return h[a].at < h[b].at || h[a].at == h[b].at && h[a].flow < h[b].flow
}
func (h flowTimeHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *flowTimeHeap) Push(x any)   { *h = append(*h, x.(flowTime)) }
func (h *flowTimeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// level is a candidate level of the progressive filling: a resource full
// (res >= 0) or a flow at its cap (flow >= 0).
type level struct {
	at   float64
	res  int32
	flow int32
}

type levelHeap []level

func (h levelHeap) Len() int { return len(h) }
func (h levelHeap) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].flow > h[b].flow // caps first: a capped flow leaves room to the others
}
func (h levelHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *levelHeap) Push(x any)   { *h = append(*h, x.(level)) }
func (h *levelHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
