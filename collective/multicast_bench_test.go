package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// mcPaperModel draws a system as in section 7: send and receive overheads
// with constant parts in [80, 400] us and per-byte parts in [0.0001,
// 0.01] us/byte, and every pair of nodes linked at 155 Mbit/s or 1 Gbit/s
// at random.
func mcPaperModel(rng *rand.Rand, n int) *Model {
	m := &Model{Bandwidth: Matrix(n, 1e9/8), SendOverhead: make([]Overhead, n), RecvOverhead: make([]Overhead, n)}
	u := func(lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }
	for i := 0; i < n; i++ {
		m.SendOverhead[i] = Overhead{Const: u(80e-6, 400e-6), PerByte: u(1e-10, 1e-8)}
		m.RecvOverhead[i] = Overhead{Const: u(80e-6, 400e-6), PerByte: u(1e-10, 1e-8)}
		for j := i + 1; j < n; j++ {
			if rng.IntN(2) == 0 {
				m.Bandwidth[i][j], m.Bandwidth[j][i] = 155e6/8, 155e6/8
			}
		}
	}
	return m
}

// mcAllToAll is an all-to-all broadcast of l-byte messages.
func mcAllToAll(n int, l int64) *Multicast {
	mc := &Multicast{Messages: make([]Message, n)}
	for s := range mc.Messages {
		d := make([]int, 0, n-1)
		for v := 0; v < n; v++ {
			if v != s {
				d = append(d, v)
			}
		}
		mc.Messages[s] = Message{Source: s, Bytes: l, Dests: d}
	}
	return mc
}

// mcRandomMulticast has `sources` distinct random sources on n nodes, each
// with a uniformly random number (1..n-1) of random destinations and a
// random small (<= 1 kB) message.
func mcRandomMulticast(rng *rand.Rand, n, sources int) *Multicast {
	mc := &Multicast{}
	for _, s := range rng.Perm(n)[:sources] {
		k := 1 + rng.IntN(n-1)
		var d []int
		for _, v := range rng.Perm(n) {
			if v != s && len(d) < k {
				d = append(d, v)
			}
		}
		mc.Messages = append(mc.Messages, Message{Source: s, Bytes: 1 + int64(rng.IntN(1024)), Dests: d})
	}
	return mc
}

// BenchmarkPlanMulticast measures PlanMulticast (the schedule plus its lower
// bound) on the paper's two workloads: all-to-all broadcast of 1 kB messages
// (Table 1) and multiple multicast on 64 nodes with a varying number of
// sources (Table 2).
func BenchmarkPlanMulticast(b *testing.B) {
	for _, algo := range Algorithms(KindMulticast) {
		for _, n := range []int{8, 16, 32, 64, 80} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			m, mc := mcPaperModel(rng, n), mcAllToAll(n, 1000)
			b.Run(fmt.Sprintf("alltoall/algo=%s/nodes=%d", algo, n), func(b *testing.B) {
				benchPlanMulticast(b, m, mc, algo)
			})
		}
		for _, s := range []int{8, 16, 32, 64} {
			rng := rand.New(rand.NewPCG(uint64(s), 2))
			m, mc := mcPaperModel(rng, 64), mcRandomMulticast(rng, 64, s)
			b.Run(fmt.Sprintf("multicast/algo=%s/nodes=64/sources=%d", algo, s), func(b *testing.B) {
				benchPlanMulticast(b, m, mc, algo)
			})
		}
	}
}

func benchPlanMulticast(b *testing.B, m *Model, mc *Multicast, algo Algorithm) {
	b.ReportAllocs()
	var p *Plan
	for b.Loop() {
		var err error
		if p, err = PlanMulticast(m, mc, algo, Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(p.Tasks)), "tasks")
}

// BenchmarkMulticastSchedule measures the scheduling alone (what the
// paper's Tables 1 and 2 time): no input validation, no lower bound.
func BenchmarkMulticastSchedule(b *testing.B) {
	for _, algo := range Algorithms(KindMulticast) {
		for _, n := range []int{64} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			c, mc := newMCCosts(mcPaperModel(rng, n)), mcAllToAll(n, 1000)
			b.Run(fmt.Sprintf("alltoall/algo=%s/nodes=%d", algo, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					mcSchedule(c, mc, algo, 1)
				}
			})
		}
		rng := rand.New(rand.NewPCG(64, 2))
		c, mc := newMCCosts(mcPaperModel(rng, 64)), mcRandomMulticast(rng, 64, 64)
		b.Run(fmt.Sprintf("multicast/algo=%s/nodes=64/sources=64", algo), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mcSchedule(c, mc, algo, 1)
			}
		})
	}
}

func BenchmarkMulticastLowerBound(b *testing.B) {
	for _, n := range []int{16, 64, 80} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		m, mc := mcPaperModel(rng, n), mcAllToAll(n, 1000)
		b.Run(fmt.Sprintf("alltoall/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MulticastLowerBound(m, mc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSimulateMulticast(b *testing.B) {
	rng := rand.New(rand.NewPCG(64, 1))
	m, mc := mcPaperModel(rng, 64), mcAllToAll(64, 1000)
	p, err := PlanMulticast(m, mc, WRP, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("alltoall/algo=wrp/nodes=64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := SimulateMulticast(m, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate/alltoall/algo=wrp/nodes=64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ValidateMulticast(mc, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
