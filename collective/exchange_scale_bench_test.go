package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// exNICCase is the scale benchmark's instance family: every rank has a NIC of
// one of five rates (20 to 400 Mbit/s), a pair runs at the slower of its
// two NICs after 100 µs of latency, and every rank sends every other one
// a random size of 1 byte to 512 KiB.
func exNICCase(n int, seed uint64) (*Model, *Exchange) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	nic := make([]float64, n)
	for r := range nic {
		nic[r] = []float64{2.5e6, 6.25e6, 12.5e6, 25e6, 50e6}[rng.IntN(5)]
	}
	m := &Model{Latency: Matrix(n, 100e-6), Bandwidth: Matrix(n, 1)}
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := 0; i < n; i++ {
		x.Bytes[i] = make([]int64, n)
		for j := 0; j < n; j++ {
			m.Bandwidth[i][j] = min(nic[i], nic[j])
			if i != j {
				x.Bytes[i][j] = 1 + rng.Int64N(512<<10)
			}
		}
	}
	return m, x
}

// BenchmarkPlanExchangeNICs plans exNICCase instances at 256 and 1,024
// ranks with Auto and with each planner Auto runs at that size. Besides
// the time it reports the process's CPU time per plan (cpu-ms/op), which
// other work on a shared machine inflates less.
func BenchmarkPlanExchangeNICs(b *testing.B) {
	for _, n := range []int{256, 1024} {
		m, x := exNICCase(n, 1)
		for _, algo := range []Algorithm{Auto, OpenShop, Greedy, Caterpillar} {
			b.Run(fmt.Sprintf("ranks=%d/algo=%s", n, algo), func(b *testing.B) {
				c0 := cpuTime()
				for b.Loop() {
					if _, err := PlanExchange(m, x, algo, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((cpuTime()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
			})
		}
	}
}
