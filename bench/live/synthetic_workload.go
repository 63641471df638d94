package live

import (
	"math"
	mrand "math/rand/v2"
)

// poisson draws from a Poisson law of mean lambda: Knuth's product of
// uniforms for small means, Hörmann's transformed rejection (PTRS) for
// means of 10 and more.
func poisson(rng *mrand.Rand, lambda float64) int {
	if lambda < 10 {
		limit, k, p := math.Exp(-lambda), 0, rng.Float64()
		for p > limit {
			k++
			p *= rng.Float64()
		}
		return k
	}
	slam, loglam := math.Sqrt(lambda), math.Log(lambda)
	b := 0.931 + 2.53*slam
	a := -0.059 + 0.02483*b
	invAlpha := 1.1239 + 1.1328/(b-3.4)
	vr := 0.9277 - 3.6224/(b-2)
	for {
		u := rng.Float64() - 0.5
		v := rng.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + lambda + 0.43)
		if us >= 0.07 && v <= vr {
			return int(k)
		}
		if k < 0 || us < 0.013 && v > us {
			continue
		}
		lg, _ := math.Lgamma(k + 1)
		if math.Log(v)+math.Log(invAlpha)-math.Log(a/(us*us)+b) <= -lambda+k*loglam-lg {
			return int(k)
		}
	}
}

// synthMessage is one event of the benchmark.
type synthMessage struct {
	Dest int // slave index
	Size int
}

// synthWorkload draws the N events of a type for a run.
func synthWorkload(t SyntheticType, n, slaves int, seed uint64) []synthMessage {
	rng := mrand.New(mrand.NewPCG(seed, uint64(t.Name[0])))
	msgs := make([]synthMessage, n)
	for i := range msgs {
		msgs[i].Dest = rng.IntN(slaves)
		mean := t.L2
		if rng.Float64() < t.Small {
			mean = t.L1
		}
		msgs[i].Size = poisson(rng, mean)
	}
	return msgs
}
