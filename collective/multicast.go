package collective

import "fmt"

// This file holds the exported multiple-multicast API. The planners live in
// multicast_plan.go, the simulator and the validator in multicast_sim.go and
// the lower bound in multicast_bound.go.
//
// # Model
//
// Sending message k (l_k bytes) from node i to node j keeps i busy for the
// send overhead S(i,l) = Model.SendCost, then the message spends
// X(i,j)*l (+ latency) = Model.Transmit on the wire, and j is busy for
// R(j,l) = Model.RecvCost once it has arrived and j has finished its
// previous task. Sends are non-blocking (the sender is busy for S only),
// receives blocking. Every node executes one task list in which its sends
// and receives are interleaved.
//
// # Relays
//
// A node may forward message k only after its own receive of k has
// completed (the source holds its message from time 0). Following the
// paper (section 3.1), relays are restricted to the message's source and
// its destinations: a node outside D_k + {source} never receives m_k, and
// [ValidateMulticast] rejects a plan in which it does.
//
// # Tie-breaking
//
// The paper leaves ties open. The rules below reproduce every task
// sequence of the worked example of section 6 (Figures 4 and 5); the tests
// in multicast_example_test.go replay them. "Message order" means by size,
// then by index in Multicast.Messages (the paper's WR sorts a receiver's
// sources by message length); "sender order" means the message's source
// first, then relays by increasing index.
//
//   - FEF: smallest weight S+X*l+R, then lowest receiver, then lowest
//     sender, then message order (as a weight-sorted tuple list enumerated
//     receiver by receiver, sender by sender).
//   - ECF, ECFP: earliest completion, then lowest receiver, then message
//     order, then sender order.
//   - WR, WRP: the receiver with the least virtual time (completed work),
//     then the fastest (smallest receive overhead for the mean delivered
//     message size), then the lowest index.
//   - EAF, EAFP: the receiver with the earliest receive-available time, then
//     the lowest index.
//   - RR, RRP: receivers take turns in index order, skipping nodes that have
//     nothing left to receive.
//   - RRS, RRSP: a receiver drawn uniformly among the nodes that still have
//     something to receive, from a PCG generator seeded with Options.Seed.
//   - All receiver-first planners then choose the message and sender with
//     the earliest completion, then message order, then sender order.
//
// The example fixes these choices as follows: ECF step 4 (three tasks
// complete at 12) needs "lowest receiver" rather than "lowest message",
// ECFP step 3 (7 and 7) rules out "lowest message" and "lowest sender";
// EAF step 3 and RRSP step 6 need "source first, then lowest relay" (the
// join order of A_k fails RRSP, the plain sender index fails EAF); WRP step
// 3 needs "message before sender order"; FEF step 6 needs "sender before
// message" (weight ties are broken differently from the timed planners).

// PlanMulticast plans a multiple multicast with the named algorithm: FEF,
// ECF, WR, EAF, RR, RRS, the preemptive ECFP, WRP, EAFP, RRP, RRSP of Wu,
// Yeh and Liu, or Auto (every planner within a cost budget, keeping the
// earliest predicted completion). The plan lists every point-to-point send,
// relays included, in the order the planner chose them; its Predicted is
// the completion time of the last receive and its LowerBound the bound of
// [MulticastLowerBound]. Only RRS and RRSP use opt.Seed.
func PlanMulticast(m *Model, mc *Multicast, algo Algorithm, opt Options) (*Plan, error) {
	if err := mcCheckInputs(m, mc); err != nil {
		return nil, err
	}
	if err := checkAlgo(KindMulticast, algo); err != nil {
		return nil, err
	}
	c := newMCCosts(m)
	var plan *Plan
	if algo == Auto {
		var err error
		plan, err = planAuto(KindMulticast, m.Size(), func(a Algorithm) (*Plan, error) {
			return mcSchedule(c, mc, a, opt.Seed), nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		plan = mcSchedule(c, mc, algo, opt.Seed)
	}
	plan.LowerBound = mcLowerBound(c, mc)
	return plan, nil
}

// MulticastLowerBound returns the lower bound of section 3.2 on the
// completion time of a multiple multicast. In the idealised model a node
// receives and sends at once and its sends to different destinations
// proceed in parallel, so the earliest time L[k][i] at which message k can
// have been received by node i is a shortest path from the source through
// D_k + {source} (hop cost S + X*l + R, a relay forwarding after its
// receive completes). Each node then receives its messages one at a time
// (equation 4) in the best possible order; the bound is the largest such
// completion over all nodes.
//
// The paper orders a node's receives by earliest reach time L. That is the
// optimal order when all its messages have one size, but with mixed sizes
// it can exceed the optimum of the relaxation (and so no longer be a bound);
// this function orders by earliest arrival L - R instead (Jackson's rule,
// optimal for one machine with release dates), which coincides with the
// paper's order whenever the receive overheads are equal.
func MulticastLowerBound(m *Model, mc *Multicast) (float64, error) {
	if err := mcCheckInputs(m, mc); err != nil {
		return 0, err
	}
	return mcLowerBound(newMCCosts(m), mc), nil
}

// mcCheckInputs validates a model and a pattern for the multicast planners.
func mcCheckInputs(m *Model, mc *Multicast) error {
	if m == nil {
		return fmt.Errorf("collective: nil model")
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if mc == nil {
		return fmt.Errorf("collective: nil multicast pattern")
	}
	if err := mc.Validate(m.Size()); err != nil {
		return err
	}
	return nil
}
