package collective

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []float64
		want float64
	}{
		"one":      {[]float64{3}, 3},
		"odd":      {[]float64{5, 1, 3}, 3},
		"even":     {[]float64{4, 1, 3, 2}, 2.5},
		"repeated": {[]float64{2, 2, 9, 2}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			require.Equal(t, tc.want, Median(in))
			require.Equal(t, tc.in, in, "Median must not reorder its argument")
		})
	}
	require.True(t, math.IsNaN(Median(nil)))
}

func TestModelRate(t *testing.T) {
	m := &Model{Bandwidth: [][]float64{{0, 4}, {8, 0}}}
	require.Equal(t, 0.25, m.SecondsPerByte(0, 1))
	require.Equal(t, 8.0, m.Rate(1, 0))
	m.PerByte = [][]float64{{0, 0.5}, {0.125, 0}}
	require.Equal(t, 2.0, m.Rate(0, 1), "PerByte wins over Bandwidth")
	o := &Model{SendOverhead: []Overhead{{}, {}}}
	require.Equal(t, 0.0, o.SecondsPerByte(0, 1), "a model of overheads only has no time per byte")
	require.True(t, math.IsInf(o.Rate(0, 1), 1))
}
