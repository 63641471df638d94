package collective

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Kind names a family of collective patterns.
type Kind string

// The pattern kinds.
const (
	KindAlltoall     Kind = "alltoall"
	KindMulticast    Kind = "multicast"
	KindRedistribute Kind = "redistribute"
)

// Algorithm names a planner.
type Algorithm string

// Total-exchange planners (Bhat, Prasanna, Raghavendra).
const (
	Caterpillar Algorithm = "caterpillar"
	MaxMatch    Algorithm = "maxmatch"
	MinMatch    Algorithm = "minmatch"
	Greedy      Algorithm = "greedy"
	OpenShop    Algorithm = "openshop"
)

// Multiple-multicast planners (Wu, Yeh, Liu); the P suffix marks the
// preemptive variants of section 5.
const (
	FEF  Algorithm = "fef"
	ECF  Algorithm = "ecf"
	WR   Algorithm = "wr"
	EAF  Algorithm = "eaf"
	RR   Algorithm = "rr"
	RRS  Algorithm = "rrs"
	ECFP Algorithm = "ecfp"
	WRP  Algorithm = "wrp"
	EAFP Algorithm = "eafp"
	RRP  Algorithm = "rrp"
	RRSP Algorithm = "rrsp"
)

// Redistribution planners (Jeannot, Wagner).
const (
	BruteForce Algorithm = "bruteforce"
	GGP        Algorithm = "ggp"
	OGGP       Algorithm = "oggp"
)

// Auto plans with every applicable planner (within a cost budget) and keeps
// the plan with the lowest predicted completion.
const Auto Algorithm = "auto"

// Algorithms returns the planners of a kind, in a fixed order, without Auto.
func Algorithms(k Kind) []Algorithm {
	switch k {
	case KindAlltoall:
		return []Algorithm{Caterpillar, MaxMatch, MinMatch, Greedy, OpenShop}
	case KindMulticast:
		return []Algorithm{FEF, ECF, WR, EAF, RR, RRS, ECFP, WRP, EAFP, RRP, RRSP}
	case KindRedistribute:
		return []Algorithm{BruteForce, GGP, OGGP}
	}
	return nil
}

// KindOf returns the kind an algorithm plans for, or "" if unknown. Auto
// belongs to every kind and returns "".
func KindOf(a Algorithm) Kind {
	for _, k := range []Kind{KindAlltoall, KindMulticast, KindRedistribute} {
		for _, b := range Algorithms(k) {
			if a == b {
				return k
			}
		}
	}
	return ""
}

// Plan is a schedule, plain data. Exactly one of Transfers (alltoall),
// Tasks (multicast) and Steps (redistribute) is used, by Kind.
//
// Times are seconds from the start of the collective as predicted under the
// model the plan was made (or simulated) with. The executor records what
// really happened in the same shape.
type Plan struct {
	Kind      Kind      `json:"kind"`
	Algorithm Algorithm `json:"algorithm"`
	// Ranks is the number of ranks (alltoall, multicast) or senders +
	// receivers (redistribute).
	Ranks int `json:"ranks"`
	// Predicted is the predicted completion time (the makespan).
	Predicted float64 `json:"predicted_completion"`
	// LowerBound is the planner family's lower bound for the problem.
	LowerBound float64 `json:"lower_bound"`

	// Transfers lists every message of a total exchange.
	Transfers []Transfer `json:"-"`
	// Tasks lists every point-to-point send of a multiple multicast,
	// including relays.
	Tasks []Task `json:"-"`
	// Steps lists the synchronous steps of a redistribution.
	Steps []Step `json:"steps,omitempty"`
}

// Transfer is one message of a total exchange. Each rank has one send port
// and one receive port (the paper's one-port model): SendSeq is the
// position of this transfer among Src's sends, RecvSeq its position among
// Dst's receives. A transfer starts when it is next in both orders and both
// ports are free. In a flow-level plan (Naive, Paced) every message is
// posted at once and the orders only say in which order a rank posts.
type Transfer struct {
	Src     int     `json:"src"`
	Dst     int     `json:"dst"`
	Bytes   int64   `json:"bytes"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	SendSeq int     `json:"send_seq"`
	RecvSeq int     `json:"recv_seq"`
	// Rate is the rate a flow-level plan paces the message to, in bytes
	// per second; 0 means unpaced.
	Rate float64 `json:"rate,omitempty"`
}

// Task is one send of a multiple multicast, from Src (the message's source
// or a relay that already holds it) to Dst. Each node executes one list of
// tasks, its sends and receives interleaved: SendSeq is this task's
// position in Src's list, RecvSeq its position in Dst's list. Sends are
// non-blocking (the sender is busy for S), receives blocking (the receiver
// is busy from the end of its previous task until RecvEnd).
type Task struct {
	Message   int     `json:"message"`
	Src       int     `json:"src"`
	Dst       int     `json:"dst"`
	Bytes     int64   `json:"bytes"`
	SendStart float64 `json:"send_start"`
	SendEnd   float64 `json:"send_end"`
	Arrival   float64 `json:"arrival"`
	RecvEnd   float64 `json:"recv_end"`
	SendSeq   int     `json:"send_seq"`
	RecvSeq   int     `json:"recv_seq"`
}

// Step is one synchronous step of a redistribution: at most k transfers, no
// node twice. Duration is the setup time plus the longest transfer, from
// the real byte counts.
type Step struct {
	Duration  float64        `json:"duration"`
	Transfers []StepTransfer `json:"transfers"`
}

// StepTransfer moves Bytes bytes from sender Src (index in the first
// cluster) to receiver Dst (index in the second cluster) during one step.
type StepTransfer struct {
	Src   int   `json:"src"`
	Dst   int   `json:"dst"`
	Bytes int64 `json:"bytes"`
	// Rate is the rate a paced plan paces the transfer to, in bytes per
	// second; 0 in every other plan.
	Rate float64 `json:"rate,omitempty"`
}

// SendOrder returns the indices into p.Transfers of rank's sends, in its
// planned order (SendSeq; equal numbers keep the list's order).
func (p *Plan) SendOrder(rank int) []int { return p.rankOrder(rank, srcOf, sendSeqOf) }

// RecvOrder returns the indices into p.Transfers of rank's receives, in
// its planned order (RecvSeq; equal numbers keep the list's order).
func (p *Plan) RecvOrder(rank int) []int { return p.rankOrder(rank, dstOf, recvSeqOf) }

// Orders returns every rank's SendOrder and RecvOrder at once, in one
// pass over the transfers: for a caller that needs them all, where a
// call of SendOrder and RecvOrder per rank reads every transfer for every
// rank.
func (p *Plan) Orders() (send, recv [][]int) {
	send = p.allOrders(srcOf, sendSeqOf)
	recv = p.allOrders(dstOf, recvSeqOf)
	return send, recv
}

// rankOrder is one rank's order: its transfers placed by their numbers
// when these are 0..k-1 (as every planner numbers them), sorted
// otherwise.
func (p *Plan) rankOrder(rank int, key, seq func(*Transfer) int) []int {
	var idx []int
	for k := range p.Transfers {
		if key(&p.Transfers[k]) == rank {
			idx = append(idx, k)
		}
	}
	return p.placeOrder(idx, seq)
}

// allOrders has one order for each of the plan's ranks, and for any
// higher rank a transfer names; a transfer naming a negative rank is in
// none.
func (p *Plan) allOrders(key, seq func(*Transfer) int) [][]int {
	n := p.Ranks
	for k := range p.Transfers {
		n = max(n, key(&p.Transfers[k])+1)
	}
	count := make([]int, n)
	for k := range p.Transfers {
		if r := key(&p.Transfers[k]); r >= 0 {
			count[r]++
		}
	}
	buf := make([]int, 0, len(p.Transfers))
	out := make([][]int, n)
	for r := range out {
		if count[r] > 0 {
			out[r] = buf[len(buf) : len(buf) : len(buf)+count[r]]
			buf = buf[:len(buf)+count[r]]
		}
	}
	for k := range p.Transfers {
		if r := key(&p.Transfers[k]); r >= 0 {
			out[r] = append(out[r], k)
		}
	}
	for r := range out {
		out[r] = p.placeOrder(out[r], seq)
	}
	return out
}

// placeOrder orders idx (in list order) by seq, in place when it can.
func (p *Plan) placeOrder(idx []int, seq func(*Transfer) int) []int {
	placed := make([]int, len(idx))
	for k := range placed {
		placed[k] = -1
	}
	for _, k := range idx {
		s := seq(&p.Transfers[k])
		if s < 0 || s >= len(idx) || placed[s] != -1 {
			sort.SliceStable(idx, func(a, b int) bool { return seq(&p.Transfers[idx[a]]) < seq(&p.Transfers[idx[b]]) })
			return idx
		}
		placed[s] = k
	}
	copy(idx, placed)
	return idx
}

// NodeTasks returns a multicast node's task list: indices into p.Tasks of
// the tasks it sends or receives, in its planned order.
func (p *Plan) NodeTasks(node int) []int {
	type ent struct{ seq, idx int }
	var es []ent
	for i, t := range p.Tasks {
		if t.Src == node {
			es = append(es, ent{t.SendSeq, i})
		}
		if t.Dst == node {
			es = append(es, ent{t.RecvSeq, i})
		}
	}
	sort.SliceStable(es, func(a, b int) bool { return es[a].seq < es[b].seq })
	idx := make([]int, len(es))
	for i, e := range es {
		idx[i] = e.idx
	}
	return idx
}

// planJSON is the wire shape of a Plan: total-exchange transfers and
// multicast tasks both appear under "ops".
type planJSON struct {
	Kind       Kind            `json:"kind"`
	Algorithm  Algorithm       `json:"algorithm"`
	Ranks      int             `json:"ranks"`
	Predicted  float64         `json:"predicted_completion"`
	LowerBound float64         `json:"lower_bound"`
	Ops        json.RawMessage `json:"ops,omitempty"`
	Steps      []Step          `json:"steps,omitempty"`
}

// MarshalJSON writes the documented plan format (docs/plan-format.md).
func (p *Plan) MarshalJSON() ([]byte, error) {
	w := planJSON{Kind: p.Kind, Algorithm: p.Algorithm, Ranks: p.Ranks, Predicted: p.Predicted, LowerBound: p.LowerBound, Steps: p.Steps}
	var err error
	switch p.Kind {
	case KindAlltoall:
		ops := p.Transfers
		if ops == nil {
			ops = []Transfer{}
		}
		w.Ops, err = json.Marshal(ops)
	case KindMulticast:
		ops := p.Tasks
		if ops == nil {
			ops = []Task{}
		}
		w.Ops, err = json.Marshal(ops)
	case KindRedistribute:
		if w.Steps == nil {
			w.Steps = []Step{}
		}
	default:
		return nil, fmt.Errorf("collective: plan has unknown kind %q", p.Kind)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the documented plan format.
func (p *Plan) UnmarshalJSON(b []byte) error {
	var w planJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Plan{Kind: w.Kind, Algorithm: w.Algorithm, Ranks: w.Ranks, Predicted: w.Predicted, LowerBound: w.LowerBound, Steps: w.Steps}
	switch w.Kind {
	case KindAlltoall:
		if len(w.Ops) > 0 {
			return json.Unmarshal(w.Ops, &p.Transfers)
		}
	case KindMulticast:
		if len(w.Ops) > 0 {
			return json.Unmarshal(w.Ops, &p.Tasks)
		}
	case KindRedistribute:
	default:
		return fmt.Errorf("collective: plan has unknown kind %q", w.Kind)
	}
	return nil
}
