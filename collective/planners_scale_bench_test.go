package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPlanners256 times, at 256 ranks, the planners whose cost grows
// fastest: the matchings on a total exchange (exNICCase), and every
// multiple-multicast planner on the multicast paper's systems with 32
// random multicasts of up to 1 kB (mcRandomMulticast) and with an
// all-to-all broadcast of 1 kB. The limits the README states come from
// here (go test -run X -bench Planners256 -benchtime 1x).
func BenchmarkPlanners256(b *testing.B) {
	const n = 256
	m, x := exNICCase(n, 1)
	for _, algo := range []Algorithm{MaxMatch, MinMatch} {
		b.Run(fmt.Sprintf("alltoall/algo=%s", algo), func(b *testing.B) {
			for b.Loop() {
				if _, err := PlanExchange(m, x, algo, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(256, 1))
	mm := mcPaperModel(rng, n)
	for _, c := range []struct {
		name string
		mc   *Multicast
	}{
		{"random32", mcRandomMulticast(rng, n, 32)},
		{"allbcast", mcAllToAll(n, 1024)},
	} {
		for _, algo := range append(Algorithms(KindMulticast), Auto) {
			b.Run(fmt.Sprintf("multicast=%s/algo=%s", c.name, algo), func(b *testing.B) {
				for b.Loop() {
					if _, err := PlanMulticast(mm, c.mc, algo, Options{Seed: 1}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
