package main

import (
	"context"
	"fmt"
	"math"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap/taskrun"
)

// Work of each kernel in tile updates (a tile update, gemm, is 2b^3
// flops): a triangular solve is b^3, a factorisation 2b^3/3.
const (
	workGemm  = 1.0
	workTrsm  = 0.5
	workGetrf = 1.0 / 3
)

// factors names the items that hold L and U at the end: lu[k] (the
// factored diagonal tile: L below, U on and above the diagonal), u[k][j]
// (U_kj, j > k) and l[i][k] (L_ik, i > k).
type factors struct {
	tiles int
	lu    []taskrun.ItemID
	u, l  map[[2]int]taskrun.ItemID
}

func (f *factors) all() []taskrun.ItemID {
	out := append([]taskrun.ItemID(nil), f.lu...)
	for i := 0; i < f.tiles; i++ {
		for j := 0; j < f.tiles; j++ {
			if d, ok := f.u[[2]int{i, j}]; ok {
				out = append(out, d)
			}
			if d, ok := f.l[[2]int{i, j}]; ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// buildGraph declares the right-looking tiled LU without pivoting. Step
// k: getrf(k) factors tile (k,k); trsm solves for the row U_kj and the
// column L_ik; gemm updates the trailing tiles A_ij -= L_ik U_kj. The
// tasks of step 0 generate the tiles of A they read.
func buildGraph(o *options, sp *rankSpeed) (*taskrun.Graph, *factors) {
	t, b := o.tiles, o.b
	size := int64(8 * b * b)
	g := taskrun.NewGraph()
	f := &factors{tiles: t, u: map[[2]int]taskrun.ItemID{}, l: map[[2]int]taskrun.ItemID{}}
	cur := map[[2]int]taskrun.ItemID{} // the latest version of tile (i, j), after step 0
	// input returns the tile's current version as an input list (none at
	// step 0, where the task generates the tile); value returns a fresh
	// copy of it, so a kernel may work in place and run more than once.
	input := func(k, i, j int) []taskrun.ItemID {
		if k == 0 {
			return nil
		}
		return []taskrun.ItemID{cur[[2]int{i, j}]}
	}
	value := func(k, i, j int, in [][]float64, idx int) []float64 {
		if k == 0 {
			return tile(o.seed, i, j, b, t)
		}
		return append([]float64(nil), in[idx]...)
	}
	for k := 0; k < t; k++ {
		k := k
		lu := g.Item(fmt.Sprintf("LU%d", k), size)
		f.lu = append(f.lu, lu)
		g.Add(taskrun.Task{Name: fmt.Sprintf("getrf(%d)", k), Kind: "getrf", Work: workGetrf, In: input(k, k, k), Out: []taskrun.ItemID{lu},
			Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
				var a []float64
				var err error
				o.kernel(sp, workGetrf, func() { a = value(k, k, k, in, 0); err = getrf(a, b) })
				return [][]float64{a}, err
			})})
		for j := k + 1; j < t; j++ {
			j := j
			u := g.Item(fmt.Sprintf("U%d,%d", k, j), size)
			f.u[[2]int{k, j}] = u
			g.Add(taskrun.Task{Name: fmt.Sprintf("trsm_u(%d,%d)", k, j), Kind: "trsm", Work: workTrsm, In: append([]taskrun.ItemID{lu}, input(k, k, j)...), Out: []taskrun.ItemID{u},
				Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
					var a []float64
					o.kernel(sp, workTrsm, func() { a = value(k, k, j, in, 1); trsmLower(in[0], a, b) })
					return [][]float64{a}, nil
				})})
		}
		for i := k + 1; i < t; i++ {
			i := i
			l := g.Item(fmt.Sprintf("L%d,%d", i, k), size)
			f.l[[2]int{i, k}] = l
			g.Add(taskrun.Task{Name: fmt.Sprintf("trsm_l(%d,%d)", i, k), Kind: "trsm", Work: workTrsm, In: append([]taskrun.ItemID{lu}, input(k, i, k)...), Out: []taskrun.ItemID{l},
				Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
					var a []float64
					var err error
					o.kernel(sp, workTrsm, func() { a = value(k, i, k, in, 1); err = trsmUpper(in[0], a, b) })
					return [][]float64{a}, err
				})})
		}
		next := map[[2]int]taskrun.ItemID{}
		for i := k + 1; i < t; i++ {
			for j := k + 1; j < t; j++ {
				i, j := i, j
				a := g.Item(fmt.Sprintf("A%d,%d@%d", i, j, k+1), size)
				next[[2]int{i, j}] = a
				g.Add(taskrun.Task{Name: fmt.Sprintf("gemm(%d,%d,%d)", i, j, k), Kind: "gemm", Work: workGemm,
					In: append([]taskrun.ItemID{f.l[[2]int{i, k}], f.u[[2]int{k, j}]}, input(k, i, j)...), Out: []taskrun.ItemID{a},
					Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
						var c []float64
						o.kernel(sp, workGemm, func() { c = value(k, i, j, in, 2); gemm(c, in[0], in[1], b) })
						return [][]float64{c}, nil
					})})
			}
		}
		cur = next
	}
	return g, f
}

// tile returns tile (i, j) of A: entries uniform in [-1, 1] from the seed
// and position, plus N = tiles*b on the diagonal (diagonally dominant).
func tile(seed int64, i, j, b, tiles int) []float64 {
	a := make([]float64, b*b)
	x := uint64(seed)*0x9E3779B97F4A7C15 ^ uint64(i+1)*0xBF58476D1CE4E5B9 ^ uint64(j+1)*0x94D049BB133111EB
	for k := range a {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		a[k] = 2*float64(z>>11)/float64(1<<53) - 1
	}
	if i == j {
		for k := 0; k < b; k++ {
			a[k*b+k] += float64(tiles * b)
		}
	}
	return a
}

// getrf factors a (b x b, row-major) in place into L (unit lower, below
// the diagonal) and U, without pivoting.
func getrf(a []float64, b int) error {
	for k := 0; k < b; k++ {
		p := a[k*b+k]
		if p == 0 || math.IsNaN(p) {
			return fmt.Errorf("zero pivot at %d (the matrix is not diagonally dominant?)", k)
		}
		for i := k + 1; i < b; i++ {
			m := a[i*b+k] / p
			a[i*b+k] = m
			row, piv := a[i*b+k+1:i*b+b], a[k*b+k+1:k*b+b]
			for j := range row {
				row[j] -= m * piv[j]
			}
		}
	}
	return nil
}

// trsmLower overwrites x with L^-1 x, L the unit lower triangle of lu.
func trsmLower(lu, x []float64, b int) {
	for i := 0; i < b; i++ {
		xi := x[i*b : i*b+b]
		for r := 0; r < i; r++ {
			m := lu[i*b+r]
			xr := x[r*b : r*b+b]
			for j := range xi {
				xi[j] -= m * xr[j]
			}
		}
	}
}

// trsmUpper overwrites x with x U^-1, U the upper triangle of lu.
func trsmUpper(lu, x []float64, b int) error {
	for j := 0; j < b; j++ {
		if lu[j*b+j] == 0 {
			return fmt.Errorf("zero diagonal in U at %d", j)
		}
	}
	for i := 0; i < b; i++ {
		xi := x[i*b : i*b+b]
		for j := 0; j < b; j++ {
			s := xi[j]
			for r := 0; r < j; r++ {
				s -= xi[r] * lu[r*b+j]
			}
			xi[j] = s / lu[j*b+j]
		}
	}
	return nil
}

// gemm computes c -= a x.
func gemm(c, a, x []float64, b int) {
	for i := 0; i < b; i++ {
		ci := c[i*b : i*b+b]
		for r := 0; r < b; r++ {
			m := a[i*b+r]
			xr := x[r*b : r*b+b]
			for j := range ci {
				ci[j] -= m * xr[j]
			}
		}
	}
}

// residual rebuilds L and U from the collected tiles and returns
// ||A - L U||_F / ||A||_F.
func (f *factors) residual(o *options, items map[taskrun.ItemID][]byte) (float64, error) {
	t, b := o.tiles, o.b
	N := t * b
	L := make([]float64, N*N)
	U := make([]float64, N*N)
	put := func(dst []float64, ti, tj int, src []float64, keep func(r, c int) (float64, bool)) {
		for r := 0; r < b; r++ {
			for c := 0; c < b; c++ {
				if v, ok := keep(r, c); ok {
					dst[(ti*b+r)*N+tj*b+c] = v
				} else {
					dst[(ti*b+r)*N+tj*b+c] = src[r*b+c]
				}
			}
		}
	}
	get := func(d taskrun.ItemID) ([]float64, error) {
		v, err := comm.FromBytes[float64](items[d])
		if err != nil || len(v) != b*b {
			return nil, fmt.Errorf("item %d: %d bytes, want %d (%v)", d, len(items[d]), 8*b*b, err)
		}
		return v, nil
	}
	for k := 0; k < t; k++ {
		lu, err := get(f.lu[k])
		if err != nil {
			return 0, err
		}
		put(L, k, k, lu, func(r, c int) (float64, bool) {
			switch {
			case r == c:
				return 1, true
			case r < c:
				return 0, true
			}
			return 0, false
		})
		put(U, k, k, lu, func(r, c int) (float64, bool) { return 0, r > c })
		for j := k + 1; j < t; j++ {
			u, err := get(f.u[[2]int{k, j}])
			if err != nil {
				return 0, err
			}
			put(U, k, j, u, func(int, int) (float64, bool) { return 0, false })
			l, err := get(f.l[[2]int{j, k}])
			if err != nil {
				return 0, err
			}
			put(L, j, k, l, func(int, int) (float64, bool) { return 0, false })
		}
	}
	var num, den float64
	row := make([]float64, N)
	var arow [][]float64 // the tiles of A in the current tile row
	for i := 0; i < N; i++ {
		if i%b == 0 {
			arow = arow[:0]
			for tj := 0; tj < t; tj++ {
				arow = append(arow, tile(o.seed, i/b, tj, b, t))
			}
		}
		for c := range row {
			row[c] = 0
		}
		for m := 0; m <= i; m++ { // L is lower triangular
			l := L[i*N+m]
			if l == 0 {
				continue
			}
			um := U[m*N : m*N+N]
			for c := m; c < N; c++ { // U is upper triangular
				row[c] += l * um[c]
			}
		}
		for tj := 0; tj < t; tj++ {
			a := arow[tj]
			r := i % b
			for c := 0; c < b; c++ {
				v := a[r*b+c]
				d := v - row[tj*b+c]
				num += d * d
				den += v * v
			}
		}
	}
	return math.Sqrt(num / den), nil
}
