package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPlanFlows plans (and simulates) a naive and a paced exchange
// of random sizes up to 1 MiB on a switch with NICs of five rates.
func BenchmarkPlanFlows(b *testing.B) {
	for _, n := range []int{8, 16, 32, 64} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		nic := make([]float64, n)
		for r := range nic {
			nic[r] = []float64{2.5e6, 6.25e6, 12.5e6, 25e6, 50e6}[rng.IntN(5)]
		}
		f := switchFabric(nic...)
		f.Latency = Matrix(n, 100e-6)
		x := &Exchange{Bytes: make([][]int64, n)}
		for i := range x.Bytes {
			x.Bytes[i] = make([]int64, n)
			for j := range x.Bytes[i] {
				if i != j {
					x.Bytes[i][j] = rng.Int64N(1 << 20)
				}
			}
		}
		for _, algo := range []Algorithm{Naive, Paced} {
			b.Run(fmt.Sprintf("ranks=%d/algo=%s", n, algo), func(b *testing.B) {
				for b.Loop() {
					if _, err := PlanFlows(f, x, algo, FlowOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
