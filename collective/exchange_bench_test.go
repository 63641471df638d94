package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// exGustoCase is a GUSTO-like instance (latency 4.5-89.5 ms, bandwidth
// 246-4976 kilobits/s, symmetric) with a random mix of 1 KiB and 1 MiB
// messages: the setting of the paper's Figure 11.
func exGustoCase(n int, seed uint64) (*Model, *Exchange) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	m := &Model{Latency: Matrix(n, 0), Bandwidth: Matrix(n, 1)}
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := 0; i < n; i++ {
		x.Bytes[i] = make([]int64, n)
		for j := 0; j < n; j++ {
			if j > i {
				m.Latency[i][j] = 0.0045 + rng.Float64()*0.085
				m.Bandwidth[i][j] = (246 + rng.Float64()*(4976-246)) * 125
				m.Latency[j][i], m.Bandwidth[j][i] = m.Latency[i][j], m.Bandwidth[i][j]
			}
			if i != j {
				x.Bytes[i][j] = []int64{1 << 10, 1 << 20}[rng.IntN(2)]
			}
		}
	}
	return m, x
}

func BenchmarkPlanExchange(b *testing.B) {
	for _, algo := range Algorithms(KindAlltoall) {
		for _, n := range []int{8, 32, 64, 128, 256} {
			if (algo == MaxMatch || algo == MinMatch) && n > 64 {
				continue // O(P^4): seconds per plan beyond the auto limit
			}
			m, x := exGustoCase(n, 1)
			b.Run(fmt.Sprintf("algo=%s/ranks=%d", algo, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := PlanExchange(m, x, algo, Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkSimulateExchange(b *testing.B) {
	for _, n := range []int{64, 256} {
		m, x := exGustoCase(n, 2)
		p, err := PlanExchange(m, x, OpenShop, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := SimulateExchange(m, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidateExchange(b *testing.B) {
	m, x := exGustoCase(256, 3)
	p, err := PlanExchange(m, x, OpenShop, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ranks=256", func(b *testing.B) {
		for b.Loop() {
			if err := ValidateExchange(x, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
