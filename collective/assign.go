package collective

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoAssignment is returned (wrapped) by [Assign] and [AssignMax] when
// every complete assignment uses a forbidden entry.
var ErrNoAssignment = errors.New("collective: no complete assignment avoids the forbidden entries")

// Assign solves the linear assignment problem: for a square n x n matrix
// cost it returns the permutation rowToCol (row i is assigned column
// rowToCol[i]) that minimises the sum of cost[i][rowToCol[i]], and that sum
// (added in row order).
//
// An entry of +Inf marks a forbidden pair: no finite sentinel is involved,
// so the optimum over the allowed pairs is exact up to the rounding of the
// finite entries. If every complete assignment uses a forbidden pair the
// error wraps [ErrNoAssignment]. NaN and -Inf entries and non-square
// matrices are rejected. An empty matrix has the empty assignment.
//
// The solver is the shortest-augmenting-path form of the Hungarian method
// (Kuhn-Munkres with dual potentials, as refined by Jonker and Volgenant):
// one augmentation per row, each O(n^2), so O(n^3) in all. Among optimal
// assignments it returns a deterministic one (ties go to the lowest column
// index during the search).
func Assign(cost [][]float64) (rowToCol []int, total float64, err error) {
	n := len(cost)
	flat := make([]float64, n*n)
	for i, row := range cost {
		if len(row) != n {
			return nil, 0, fmt.Errorf("collective: assign: row %d has %d entries, want %d (the matrix must be square)", i, len(row), n)
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, -1) {
				return nil, 0, fmt.Errorf("collective: assign: cost[%d][%d] = %v: want a finite number or +Inf (forbidden)", i, j, v)
			}
			flat[i*n+j] = v
		}
	}
	var s assigner
	rowToCol, err = s.solve(n, flat)
	if err != nil {
		return nil, 0, err
	}
	for i, j := range rowToCol {
		total += cost[i][j]
	}
	return rowToCol, total, nil
}

// AssignMax is [Assign] for maximisation: it returns the permutation that
// maximises the sum of weight[i][rowToCol[i]]. Here -Inf marks a forbidden
// pair, and NaN and +Inf entries are rejected. The weights are negated
// (exactly, in floating point) and handed to the minimising solver.
func AssignMax(weight [][]float64) (rowToCol []int, total float64, err error) {
	n := len(weight)
	flat := make([]float64, n*n)
	for i, row := range weight {
		if len(row) != n {
			return nil, 0, fmt.Errorf("collective: assign: row %d has %d entries, want %d (the matrix must be square)", i, len(row), n)
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return nil, 0, fmt.Errorf("collective: assign: weight[%d][%d] = %v: want a finite number or -Inf (forbidden)", i, j, v)
			}
			flat[i*n+j] = -v
		}
	}
	var s assigner
	rowToCol, err = s.solve(n, flat)
	if err != nil {
		return nil, 0, err
	}
	for i, j := range rowToCol {
		total += weight[i][j]
	}
	return rowToCol, total, nil
}

// assigner holds the work arrays of the Hungarian method so that a series
// of assignments of one size (the matching planners) allocates once.
type assigner struct {
	u, v, minv   []float64
	match, way   []int // match[j]: row (1-based) assigned to column j; 0 = none
	used         []bool
	rowToCol     []int
	preparedSize int
}

func (s *assigner) prepare(n int) {
	if s.preparedSize == n && s.u != nil {
		return
	}
	s.u = make([]float64, n+1)
	s.v = make([]float64, n+1)
	s.minv = make([]float64, n+1)
	s.match = make([]int, n+1)
	s.way = make([]int, n+1)
	s.used = make([]bool, n+1)
	s.rowToCol = make([]int, n)
	s.preparedSize = n
}

// solve minimises over the n x n row-major matrix c (+Inf forbidden, no NaN
// or -Inf). The returned slice is owned by s and overwritten by the next
// call. Rows and columns are 1-based inside, with column 0 a virtual
// column that roots each augmenting search.
func (s *assigner) solve(n int, c []float64) ([]int, error) {
	s.prepare(n)
	inf := math.Inf(1)
	u, v, minv, match, way, used := s.u, s.v, s.minv, s.match, s.way, s.used
	for j := 0; j <= n; j++ {
		u[j], v[j], match[j], way[j] = 0, 0, 0, 0
	}
	for i := 1; i <= n; i++ {
		// Grow a shortest-path tree from row i over reduced costs
		// c[r][j] - u[r] - v[j] >= 0 until it reaches a free column.
		match[0] = i
		j0 := 0
		for j := 0; j <= n; j++ {
			minv[j] = inf
			used[j] = false
		}
		for {
			used[j0] = true
			i0 := match[j0]
			delta := inf
			j1 := -1
			row := c[(i0-1)*n:]
			for j := 1; j <= n; j++ {
				if used[j] {
					continue
				}
				if cur := row[j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j] = cur
					way[j] = j0
				}
				if minv[j] < delta {
					delta = minv[j]
					j1 = j
				}
			}
			if j1 < 0 {
				// Every edge leaving the tree is forbidden: the rows in
				// the tree have fewer allowed columns than rows (Hall).
				return nil, fmt.Errorf("%w (row %d cannot be matched)", ErrNoAssignment, i-1)
			}
			for j := 0; j <= n; j++ {
				if used[j] {
					u[match[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if match[j0] == 0 {
				break
			}
		}
		// Augment along the path back to the virtual column.
		for j0 != 0 {
			j1 := way[j0]
			match[j0] = match[j1]
			j0 = j1
		}
	}
	for j := 1; j <= n; j++ {
		s.rowToCol[match[j]-1] = j - 1
	}
	return s.rowToCol, nil
}
