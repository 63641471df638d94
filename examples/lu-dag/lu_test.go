package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/worldtest"
	"github.com/hetcomm/hetcomm/taskmap"
	"github.com/hetcomm/hetcomm/taskmap/taskrun"
	"github.com/stretchr/testify/require"
)

// TestKernels: one tile is its own LU; trsm and gemm invert what they
// should.
func TestKernels(t *testing.T) {
	const b = 8
	a := tile(3, 0, 0, b, 1)
	lu := append([]float64(nil), a...)
	require.NoError(t, getrf(lu, b))
	// L U = A
	for i := 0; i < b; i++ {
		for j := 0; j < b; j++ {
			s := 0.0
			for m := 0; m <= min(i, j); m++ {
				l := lu[i*b+m]
				if m == i {
					l = 1
				}
				s += l * lu[m*b+j]
			}
			require.InDelta(t, a[i*b+j], s, 1e-12)
		}
	}
	x := tile(3, 0, 1, b, 1)
	y := append([]float64(nil), x...)
	trsmLower(lu, y, b) // y = L^-1 x, so L y = x
	z := append([]float64(nil), x...)
	require.NoError(t, trsmUpper(lu, z, b)) // z = x U^-1, so z U = x
	for i := 0; i < b; i++ {
		for j := 0; j < b; j++ {
			ly, zu := y[i*b+j], 0.0
			for m := 0; m < i; m++ {
				ly += lu[i*b+m] * y[m*b+j]
			}
			for m := 0; m <= j; m++ {
				zu += z[i*b+m] * lu[m*b+j]
			}
			require.InDelta(t, x[i*b+j], ly, 1e-12)
			require.InDelta(t, x[i*b+j], zu, 1e-12)
		}
	}
	c := make([]float64, b*b)
	gemm(c, x, x, b)
	require.InDelta(t, -dot(x, x, b, 2, 5), c[2*b+5], 1e-12)
	require.Error(t, getrf(make([]float64, b*b), b), "zero pivot")
}

func dot(a, x []float64, b, i, j int) float64 {
	s := 0.0
	for r := 0; r < b; r++ {
		s += a[i*b+r] * x[r*b+j]
	}
	return s
}

// TestFactorOnRanks runs the whole graph on three in-process ranks, one
// of them slowed during the run, with every mapper, and checks the
// residual.
func TestFactorOnRanks(t *testing.T) {
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms := worldtest.Start(t, n, nil, nil)
	var wg sync.WaitGroup
	for _, pace := range []time.Duration{0, time.Millisecond} {
		for _, a := range []taskmap.Algorithm{taskmap.Static, taskmap.GS, taskmap.CD} {
			o := &options{tiles: 4, b: 16, seed: 7, pace: pace, adapt: true}
			residual := make([]float64, n)
			errs := make([]error, n)
			for r, c := range comms {
				wg.Add(1)
				go func(r int, c *comm.Comm) {
					defer wg.Done()
					sp := &rankSpeed{base: 1, slow: r == 2, slowSpeed: 0.5}
					sp.runStart.Store(time.Now().UnixNano())
					g, f := buildGraph(o, sp)
					res, err := taskrun.Run(ctx, c, g, &taskrun.Config{Algorithm: a, Adapt: true, SecondsPerUnit: []float64{1e-3, 1e-3, 1e-3}, Collect: f.all()})
					if err == nil && r == 0 {
						residual[r], err = f.residual(o, res.Items)
					}
					errs[r] = err
				}(r, c)
			}
			wg.Wait()
			for r, err := range errs {
				require.NoError(t, err, "%s rank %d", a, r)
			}
			require.Less(t, residual[0], 1e-12, "%s", a)
		}
	}
}
