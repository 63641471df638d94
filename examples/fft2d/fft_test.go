package main

import (
	"math"
	"math/cmplx"
	"testing"
)

// The FFT agrees with the naive DFT on every power-of-two size up to 1024,
// to a few ulps of the largest output.
func TestFFTMatchesDFT(t *testing.T) {
	for n := 1; n <= 1024; n *= 2 {
		x := make([]complex128, n)
		for j := range x {
			x[j] = input(7, 0, n, j)
		}
		want := dft(x)
		p, err := newFFTPlan(n)
		if err != nil {
			t.Fatal(err)
		}
		got := append([]complex128(nil), x...)
		p.forward(got)
		var maxAbs, maxDiff float64
		for k := range want {
			maxAbs = math.Max(maxAbs, cmplx.Abs(want[k]))
			maxDiff = math.Max(maxDiff, cmplx.Abs(got[k]-want[k]))
		}
		if maxDiff > 1e-12*math.Max(maxAbs, 1) {
			t.Errorf("n=%d: FFT differs from the DFT by %.3g (largest output %.3g)", n, maxDiff, maxAbs)
		}
	}
}

// A single frequency comes out as one spike of height n.
func TestFFTSpike(t *testing.T) {
	const n, freq = 64, 5
	p, _ := newFFTPlan(n)
	x := make([]complex128, n)
	for j := range x {
		x[j] = cmplx.Exp(complex(0, 2*math.Pi*freq*float64(j)/n))
	}
	p.forward(x)
	for k, v := range x {
		want := 0.0
		if k == freq {
			want = n
		}
		if cmplx.Abs(v-complex(want, 0)) > 1e-9 {
			t.Fatalf("bin %d = %v, want %v", k, v, want)
		}
	}
}

func TestFFTRejectsOtherSizes(t *testing.T) {
	for _, n := range []int{0, 3, 12, -4} {
		if _, err := newFFTPlan(n); err == nil {
			t.Errorf("newFFTPlan(%d) accepted a size that is not a power of two", n)
		}
	}
}
