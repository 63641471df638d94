package collective

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// assignBrute returns the best total over all permutations (min or max)
// skipping forbidden entries, and whether any complete assignment exists.
func assignBrute(a [][]float64, maximise bool) (float64, bool) {
	n := len(a)
	perm := make([]int, n)
	used := make([]bool, n)
	best, found := 0.0, false
	var rec func(i int, sum float64)
	rec = func(i int, sum float64) {
		if i == n {
			if !found || (maximise && sum > best) || (!maximise && sum < best) {
				best, found = sum, true
			}
			return
		}
		for j := 0; j < n; j++ {
			if used[j] || math.IsInf(a[i][j], 0) {
				continue
			}
			used[j] = true
			perm[i] = j
			rec(i+1, sum+a[i][j])
			used[j] = false
		}
	}
	rec(0, 0)
	return best, found
}

func checkPermutation(t *testing.T, p []int, n int) {
	t.Helper()
	require.Len(t, p, n)
	seen := make([]bool, n)
	for _, j := range p {
		require.True(t, j >= 0 && j < n && !seen[j], "not a permutation: %v", p)
		seen[j] = true
	}
}

func TestAssignAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trials := 3000
	if testing.Short() {
		trials = 400
	}
	for trial := 0; trial < trials; trial++ {
		n := 1 + rng.IntN(7) // 1..7
		if trial%10 == 0 {
			n = 8
		}
		forbidP := []float64{0, 0.1, 0.3, 0.6}[rng.IntN(4)]
		a := make([][]float64, n)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				switch rng.IntN(3) {
				case 0: // small integers: many ties
					a[i][j] = float64(rng.IntN(4))
				case 1:
					a[i][j] = rng.Float64()*200 - 100
				default:
					a[i][j] = math.Exp(rng.NormFloat64() * 3)
				}
			}
		}
		// Forbidden copies: +Inf for minimisation, -Inf for maximisation.
		mn := make([][]float64, n)
		mx := make([][]float64, n)
		for i := range a {
			mn[i] = append([]float64(nil), a[i]...)
			mx[i] = append([]float64(nil), a[i]...)
			for j := range a[i] {
				if rng.Float64() < forbidP {
					mn[i][j], mx[i][j] = math.Inf(1), math.Inf(-1)
				}
			}
		}
		for _, maximise := range []bool{false, true} {
			in := mn
			solve := Assign
			if maximise {
				in, solve = mx, AssignMax
			}
			want, ok := assignBrute(in, maximise)
			p, total, err := solve(in)
			if !ok {
				require.ErrorIs(t, err, ErrNoAssignment, "trial %d n=%d max=%v: %v", trial, n, maximise, in)
				continue
			}
			require.NoError(t, err, "trial %d n=%d max=%v: %v", trial, n, maximise, in)
			checkPermutation(t, p, n)
			sum := 0.0
			for i, j := range p {
				require.False(t, math.IsInf(in[i][j], 0), "trial %d: forbidden entry (%d,%d) used", trial, i, j)
				sum += in[i][j]
			}
			require.Equal(t, sum, total)
			require.InDelta(t, want, total, 1e-9*(1+math.Abs(want)), "trial %d n=%d max=%v: %v", trial, n, maximise, in)
		}
	}
}

func TestAssignEdgeCases(t *testing.T) {
	p, total, err := Assign(nil)
	require.NoError(t, err)
	require.Empty(t, p)
	require.Zero(t, total)

	p, total, err = Assign([][]float64{{5}})
	require.NoError(t, err)
	require.Equal(t, []int{0}, p)
	require.Equal(t, 5.0, total)

	_, _, err = Assign([][]float64{{math.Inf(1)}})
	require.ErrorIs(t, err, ErrNoAssignment)

	// Only the anti-diagonal is allowed.
	inf := math.Inf(1)
	p, total, err = Assign([][]float64{{inf, inf, 1}, {inf, 2, inf}, {3, inf, inf}})
	require.NoError(t, err)
	require.Equal(t, []int{2, 1, 0}, p)
	require.Equal(t, 6.0, total)

	// Hall's condition fails: rows 0 and 1 may only use column 0.
	_, _, err = Assign([][]float64{{1, inf, inf}, {1, inf, inf}, {1, 1, 1}})
	require.True(t, errors.Is(err, ErrNoAssignment))

	// Huge finite values next to forbidden ones stay exact.
	p, total, err = Assign([][]float64{{1e300, inf}, {1, 1e-300}})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, p)
	require.Equal(t, 1e300+1e-300, total)

	p, total, err = AssignMax([][]float64{{1, 2}, {3, math.Inf(-1)}})
	require.NoError(t, err)
	require.Equal(t, []int{1, 0}, p)
	require.Equal(t, 5.0, total)

	for name, bad := range map[string][][]float64{
		"ragged":   {{1, 2}, {3}},
		"nan":      {{math.NaN()}},
		"minusinf": {{math.Inf(-1)}},
	} {
		_, _, err := Assign(bad)
		require.Error(t, err, name)
		require.NotErrorIs(t, err, ErrNoAssignment, name)
	}
	_, _, err = AssignMax([][]float64{{math.Inf(1)}})
	require.ErrorContains(t, err, "weight[0][0]")
}

func BenchmarkAssign(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		a := make([][]float64, n)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				a[i][j] = rng.Float64()
			}
		}
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Assign(a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
