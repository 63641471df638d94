package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

// This file is the application-dependent part of the load balancer
// (section 5 of the paper): the explicitly activated check_load() with
// its two protocols, and the synchronous data migration.
//
//   - SASR, synchronous activation and reconfiguration: every interval
//     iterations every node measures its capacity, the master gathers the
//     capacities, decides and broadcasts the decision; the call is a
//     barrier whether or not the data are reconfigured.
//   - AASR, asynchronous activation, synchronous reconfiguration: at
//     check_load(1) every node measures its capacity and sends it to the
//     master without waiting, and goes on computing; at check_load(2), lag
//     iterations later (lag 1: at the end of the same iteration), the
//     master decides from what it received and sends every node the
//     decision, which the nodes wait for. Only a reconfiguration makes it
//     a barrier (the migration itself).
//
// The paper's third protocol, asynchronous reconfiguration (AAAR), is
// rejected by the paper itself as unsafe, and not implemented.

// Protocols.
const (
	protoOff  = "off"
	protoSASR = "sasr"
	protoAASR = "aasr"
)

// lbConfig configures the load balancer.
type lbConfig struct {
	protocol    string
	interval    int    // iterations between activations
	lag         int    // AASR: check_load(2) comes lag-1 iterations after check_load(1)'s iteration
	monitor     string // bench (micro-benchmark) or passive (the application's own kernel times)
	probePoints int    // points of the micro-benchmark
	probeReps   int    // repetitions of the micro-benchmark (the best counts)
	verbose     bool   // the master prints every check
	complexity  float64
	policy      PolicyConfig
}

// balancer is one node's side of the load balancer.
type balancer struct {
	cfg    lbConfig
	c      *comm.Comm
	em     *emulator
	blk    *block
	master int
	dec    *Decider // on the master

	// Passive monitoring: kernel points and time since the last check.
	kPoints int
	kTime   time.Duration

	pending   bool // AASR: check_load(1) done, check_load(2) not yet
	pendingAt int  // the iteration at whose end check_load(2) comes
	ownCap    float64
	checkSeq  int

	// Statistics.
	checks, reconfigs, rowsSent int
	reconfAt                    []int // iterations at whose end the data moved
	tMonitor, tCheck, tMigrate  time.Duration
}

// kernelDone records a kernel for passive monitoring.
func (b *balancer) kernelDone(points int, d time.Duration) {
	b.kPoints += points
	b.kTime += d
}

// capacity measures this node's available capacity c_i(t), in grid
// points per second.
func (b *balancer) capacity() float64 {
	t0 := time.Now()
	defer func() { b.tMonitor += time.Since(t0) }()
	if b.cfg.monitor == "passive" && b.kTime > 0 {
		c := float64(b.kPoints) / b.kTime.Seconds()
		b.kPoints, b.kTime = 0, 0
		return c
	}
	b.kPoints, b.kTime = 0, 0
	return b.em.probe(b.cfg.probePoints, b.cfg.probeReps)
}

// encode is the master's decision message: operation, imbalance factor,
// then the new partition (node and data information in one: every node
// derives from the old and new partition what it sends and receives).
func encodeDecision(reconf bool, factor float64, bounds []int) []float64 {
	msg := []float64{0, factor}
	if reconf {
		msg[0] = 1
		for _, x := range bounds {
			msg = append(msg, float64(x))
		}
	}
	return msg
}

// decide runs the policy on the master and returns the decision message.
func (b *balancer) decide(iter int, caps []float64) []float64 {
	d := b.dec.Decide(caps)
	var bounds []int
	if d.Reconfigure {
		bounds = partition(b.blk.nx, d.Chi, b.cfg.complexity)
		if equalInts(bounds, b.blk.bounds) {
			bounds = nil // already the right partition: nothing to move
		}
	}
	if b.cfg.verbose {
		chi := make([]string, len(d.Chi))
		for i, x := range d.Chi {
			chi[i] = fmt.Sprintf("%.3f", x)
		}
		what := "keep"
		switch {
		case bounds != nil:
			what = fmt.Sprintf("reconfigure to rows %v", rowCounts(bounds))
		case d.Reconfigure:
			what = "reconfigure: same rows"
		}
		raw := make([]string, len(caps))
		for i, x := range caps {
			raw[i] = fmt.Sprintf("%.2f", x/1e6)
		}
		fmt.Printf("heat: check at iteration %d: capacities [%s] Mpoints/s, chi [%s], factor %.3f: %s\n", iter, strings.Join(raw, " "), strings.Join(chi, " "), d.Factor, what)
	}
	return encodeDecision(bounds != nil, d.Factor, bounds)
}

// apply carries out a decision message on every node.
func (b *balancer) apply(ctx context.Context, iter int, msg []float64) error {
	p := b.c.Size()
	if len(msg) < 2 {
		return fmt.Errorf("decision message of %d values", len(msg))
	}
	if msg[0] == 0 {
		return nil
	}
	if len(msg) != 2+p+1 {
		return fmt.Errorf("decision message of %d values, want %d", len(msg), 2+p+1)
	}
	bounds := make([]int, p+1)
	for i := range bounds {
		bounds[i] = int(msg[2+i])
	}
	t0 := time.Now()
	sent, err := b.blk.migrate(ctx, b.c, bounds)
	if err != nil {
		return err
	}
	b.tMigrate += time.Since(t0)
	b.rowsSent += sent
	b.reconfigs++
	b.reconfAt = append(b.reconfAt, iter)
	return nil
}

// sync is SASR's check_load(0, interval), at the end of iteration iter.
func (b *balancer) sync(ctx context.Context, iter int) error {
	b.checks++
	c := b.capacity()
	t0 := time.Now()
	caps, err := comm.GathervSlice(ctx, b.c, b.master, []float64{c})
	if err != nil {
		return fmt.Errorf("gathering capacities: %w", err)
	}
	var msg []float64
	if b.c.Rank() == b.master {
		all := make([]float64, len(caps))
		for r, v := range caps {
			all[r] = v[0]
		}
		msg = b.decide(iter, all)
	}
	msg, err = comm.BcastSlice(ctx, b.c, b.master, msg)
	if err != nil {
		return fmt.Errorf("broadcasting the decision: %w", err)
	}
	b.tCheck += time.Since(t0)
	return b.apply(ctx, iter, msg)
}

// activate is AASR's check_load(1), at the start of iteration iter: the
// capacity goes to the master and the node carries on.
func (b *balancer) activate(ctx context.Context, iter int) error {
	b.checks++
	b.checkSeq++
	c := b.capacity()
	t0 := time.Now()
	if b.c.Rank() == b.master {
		b.ownCap = c
	} else if err := comm.SendSlice(ctx, b.c, b.master, tagCapacity, []float64{float64(b.checkSeq), c}); err != nil {
		return fmt.Errorf("sending the capacity: %w", err)
	}
	b.tCheck += time.Since(t0)
	b.pending = true
	b.pendingAt = iter + b.cfg.lag - 1
	return nil
}

// complete is AASR's check_load(2), at the end of iteration iter: the
// master collects the capacities, decides and tells every node; the
// nodes wait for the decision. With final (the run ends here) the master
// only collects and answers "no".
func (b *balancer) complete(ctx context.Context, iter int, final bool) error {
	b.pending = false
	t0 := time.Now()
	p, me := b.c.Size(), b.c.Rank()
	var msg []float64
	if me == b.master {
		caps := make([]float64, p)
		caps[me] = b.ownCap
		for r := 0; r < p; r++ {
			if r == me {
				continue
			}
			v, _, err := comm.RecvSlice[float64](ctx, b.c, r, tagCapacity)
			if err != nil {
				return fmt.Errorf("receiving rank %d's capacity: %w", r, err)
			}
			if len(v) != 2 || int(v[0]) != b.checkSeq {
				return fmt.Errorf("rank %d sent capacity message %v, want check %d", r, v, b.checkSeq)
			}
			caps[r] = v[1]
		}
		if final {
			msg = encodeDecision(false, 0, nil)
		} else {
			msg = b.decide(iter, caps)
		}
		for r := 0; r < p; r++ {
			if r == me {
				continue
			}
			if err := comm.SendSlice(ctx, b.c, r, tagDecision, msg); err != nil {
				return fmt.Errorf("sending the decision to rank %d: %w", r, err)
			}
		}
	} else {
		var err error
		if msg, _, err = comm.RecvSlice[float64](ctx, b.c, b.master, tagDecision); err != nil {
			return fmt.Errorf("receiving the decision: %w", err)
		}
	}
	b.tCheck += time.Since(t0)
	return b.apply(ctx, iter, msg)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
