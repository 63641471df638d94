package main

import (
	"fmt"
	"math"
	"math/bits"
)

// fftPlan is a radix-2 decimation-in-time complex FFT of one power-of-two
// size: the bit-reversal permutation and the twiddle factors
// w^k = exp(-2 pi i k / n), k < n/2, computed once.
type fftPlan struct {
	n   int
	rev []int
	tw  []complex128
}

func newFFTPlan(n int) (*fftPlan, error) {
	if n < 1 || n&(n-1) != 0 {
		return nil, fmt.Errorf("FFT size %d is not a power of two", n)
	}
	p := &fftPlan{n: n, rev: make([]int, n), tw: make([]complex128, n/2)}
	shift := bits.UintSize - bits.TrailingZeros(uint(n))
	for i := range p.rev {
		if n > 1 {
			p.rev[i] = int(bits.Reverse(uint(i)) >> shift)
		}
	}
	for k := range p.tw {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		p.tw[k] = complex(c, s)
	}
	return p, nil
}

// forward replaces x (of length n) by its discrete Fourier transform
// X[k] = sum_j x[j] exp(-2 pi i jk/n), unnormalised.
func (p *fftPlan) forward(x []complex128) {
	n := p.n
	for i, j := range p.rev {
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		half := size / 2
		step := n / size // twiddle stride for this stage
		for start := 0; start < n; start += size {
			for k := 0; k < half; k++ {
				w := p.tw[k*step]
				a := x[start+k]
				b := w * x[start+k+half]
				x[start+k] = a + b
				x[start+k+half] = a - b
			}
		}
	}
}

// dft is the naive O(n^2) transform of x, the reference the FFT is
// checked against. The roots of unity come from a table indexed by
// jk mod n, so the reference is accurate to a few ulps per term.
func dft(x []complex128) []complex128 {
	n := len(x)
	roots := make([]complex128, n)
	for k := range roots {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		roots[k] = complex(c, s)
	}
	out := make([]complex128, n)
	for k := 0; k < n; k++ {
		var sum complex128
		for j := 0; j < n; j++ {
			sum += x[j] * roots[(j*k)%n]
		}
		out[k] = sum
	}
	return out
}
