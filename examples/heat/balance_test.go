package main

import (
	"math"
	"slices"
	"testing"
)

func TestRelative(t *testing.T) {
	chi := relative([]float64{2, 1, 1})
	want := []float64{0.5, 0.25, 0.25}
	for i := range want {
		if math.Abs(chi[i]-want[i]) > 1e-15 {
			t.Fatalf("relative = %v, want %v", chi, want)
		}
	}
	// A node that measured nothing gets almost nothing, not NaN.
	chi = relative([]float64{1, 0})
	if !(chi[1] >= 0 && chi[1] < 1e-9) || math.IsNaN(chi[0]) {
		t.Fatalf("relative with a zero capacity = %v", chi)
	}
}

// One node of four at half speed: chi = (2/7, 2/7, 2/7, 1/7) against the
// reference 1/4 each, so Delta = (1/7, 1/7, 1/7, 3/7).
func TestPoliciesOnOneSlowNode(t *testing.T) {
	ref := []float64{0.25, 0.25, 0.25, 0.25}
	caps := []float64{1, 1, 1, 0.5}
	for _, tc := range []struct {
		cfg    PolicyConfig
		factor float64
		reconf bool
	}{
		{PolicyConfig{Policy: SAI, Theta: 0.1}, (3.0/7 + 3*1.0/7) / 4, true},
		{PolicyConfig{Policy: SAI, Theta: 0.25}, (3.0/7 + 3*1.0/7) / 4, false},
		{PolicyConfig{Policy: SMI, Theta: 0.25}, 3.0 / 7, true},
		{PolicyConfig{Policy: SMI, Theta: 0.5}, 3.0 / 7, false},
		{PolicyConfig{Policy: NINC, Theta: 0.2, Lambda: 0.25}, 0.25, true},           // only the slow node counts
		{PolicyConfig{Policy: NINC, Theta: 0.2, Lambda: 0.1}, 1, true},               // every node counts
		{PolicyConfig{Policy: NINC, Theta: 0.3, Lambda: 0.25}, 0.25, false},          // "at least two nodes"
		{PolicyConfig{Policy: NINP, Theta: 0.2, Lambda: 0.25, History: 4}, 0, false}, // not at the first check
	} {
		d := NewDecider(tc.cfg, ref).Decide(caps)
		if math.Abs(d.Factor-tc.factor) > 1e-12 || d.Reconfigure != tc.reconf {
			t.Errorf("%v: factor %.4f reconfigure %v, want %.4f %v", tc.cfg, d.Factor, d.Reconfigure, tc.factor, tc.reconf)
		}
	}
}

// NINP reacts to a lasting change one check point after NINC, and not at
// all to a change that lasts one check point only.
func TestNINPNeedsALastingChange(t *testing.T) {
	ref := []float64{0.25, 0.25, 0.25, 0.25}
	even := []float64{1, 1, 1, 1}
	slow := []float64{1, 1, 1, 0.5}
	cfg := PolicyConfig{Policy: NINP, Theta: 0.2, Lambda: 0.25, History: 4}

	d := NewDecider(cfg, ref)
	got := []bool{d.Decide(even).Reconfigure, d.Decide(slow).Reconfigure, d.Decide(slow).Reconfigure}
	if !slices.Equal(got, []bool{false, false, true}) {
		t.Errorf("lasting change: NINP decisions %v, want [false false true]", got)
	}
	// After the reconfiguration the slow platform is the reference.
	if d.Decide(slow).Reconfigure {
		t.Error("NINP reconfigured again on an unchanged platform")
	}

	d = NewDecider(cfg, ref)
	got = []bool{d.Decide(slow).Reconfigure, d.Decide(even).Reconfigure, d.Decide(even).Reconfigure}
	if slices.Contains(got, true) {
		t.Errorf("transient change: NINP decisions %v, want no reconfiguration", got)
	}

	ninc := NewDecider(PolicyConfig{Policy: NINC, Theta: 0.2, Lambda: 0.25}, ref)
	if !ninc.Decide(slow).Reconfigure {
		t.Error("NINC did not react at once to the same change")
	}
}

func TestDeciderMovesTheReference(t *testing.T) {
	d := NewDecider(PolicyConfig{Policy: SMI, Theta: 0.25}, []float64{0.25, 0.25, 0.25, 0.25})
	if !d.Decide([]float64{1, 1, 1, 0.5}).Reconfigure {
		t.Fatal("no reconfiguration on the first change")
	}
	if d.Decide([]float64{1, 1, 1, 0.52}).Reconfigure {
		t.Error("reconfigured on noise after the new reference")
	}
	if !d.Decide([]float64{1, 1, 1, 1}).Reconfigure {
		t.Error("no reconfiguration when the slow node recovered")
	}
}

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		m    int
		chi  []float64
		c    float64
		want []int
	}{
		{100, []float64{0.25, 0.25, 0.25, 0.25}, 2, []int{25, 25, 25, 25}},
		{1200, []float64{2.0 / 7, 2.0 / 7, 2.0 / 7, 1.0 / 7}, 2, []int{343, 343, 343, 171}},
		{10, []float64{0.97, 0.01, 0.01, 0.01}, 2, []int{7, 1, 1, 1}}, // at least one row each
		{4, []float64{0.1, 0.2, 0.3, 0.4}, 2, []int{1, 1, 1, 1}},
		// The paper's six-node platform chi(t0).
		{300, []float64{0.19, 0.09, 0.17, 0.15, 0.29, 0.11}, 2, []int{57, 27, 51, 45, 87, 33}},
		// C = 4: rows in proportion to sqrt(chi).
		{100, []float64{0.8, 0.2}, 4, []int{67, 33}},
	} {
		b := partition(tc.m, tc.chi, tc.c)
		rows := rowCounts(b)
		sum := 0
		for _, r := range rows {
			sum += r
			if r < 1 {
				t.Errorf("partition(%d, %v): a node without rows: %v", tc.m, tc.chi, rows)
			}
		}
		if b[0] != 0 || sum != tc.m {
			t.Errorf("partition(%d, %v) = %v: does not cover the rows", tc.m, tc.chi, b)
		}
		// Largest-remainder rounding may move a row between nodes with
		// equal remainders; allow one row of difference.
		for i := range rows {
			if d := rows[i] - tc.want[i]; d < -1 || d > 1 {
				t.Errorf("partition(%d, %v, C=%v) rows = %v, want about %v", tc.m, tc.chi, tc.c, rows, tc.want)
				break
			}
		}
	}
}

func TestMigration(t *testing.T) {
	old := []int{0, 25, 50, 75, 100}
	new := []int{0, 30, 60, 80, 100}
	got := migration(old, new)
	want := []transfer{{1, 0, 25, 30}, {2, 1, 50, 60}, {3, 2, 75, 80}}
	if !slices.Equal(got, want) {
		t.Fatalf("migration = %v, want %v", got, want)
	}
	// A large shift: rows travel past a neighbour.
	got = migration([]int{0, 10, 20, 30}, []int{0, 1, 2, 30})
	want = []transfer{{0, 1, 1, 2}, {0, 2, 2, 10}, {1, 2, 10, 20}}
	if !slices.Equal(got, want) {
		t.Fatalf("migration = %v, want %v", got, want)
	}
	// Random partitions: every row reaches its new owner exactly once,
	// kept or moved, and only from its old owner.
	for seed := uint64(1); seed < 200; seed++ {
		a, b := randomBounds(seed, 5, 50), randomBounds(seed*7919, 5, 50)
		have := make([]int, 50)
		for r := 0; r < 5; r++ {
			for g := max(a[r], b[r]); g < min(a[r+1], b[r+1]); g++ {
				have[g]++
			}
		}
		for _, tr := range migration(a, b) {
			for g := tr.lo; g < tr.hi; g++ {
				if g < a[tr.from] || g >= a[tr.from+1] || g < b[tr.to] || g >= b[tr.to+1] {
					t.Fatalf("%v -> %v: row %d moves from %d to %d", a, b, g, tr.from, tr.to)
				}
				have[g]++
			}
		}
		for g, k := range have {
			if k != 1 {
				t.Fatalf("%v -> %v: row %d arrives %d times", a, b, g, k)
			}
		}
	}
	if len(migration(old, old)) != 0 {
		t.Error("migration to the same partition moves rows")
	}
}

func TestParseSlow(t *testing.T) {
	s, err := parseSlow("3:2:100,1:1.5:10:20")
	if err != nil {
		t.Fatal(err)
	}
	want := []slowdown{{3, 2, 100, -1}, {1, 1.5, 10, 20}}
	if !slices.Equal(s, want) {
		t.Fatalf("parseSlow = %v, want %v", s, want)
	}
	speeds := []float64{1, 1, 1, 1}
	for _, tc := range []struct {
		r, it int
		want  float64
	}{{3, 99, 1}, {3, 100, 0.5}, {1, 9, 1}, {1, 10, 1 / 1.5}, {1, 20, 1}, {0, 500, 1}} {
		if got := speedAt(speeds, s, tc.r, tc.it); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("speed of rank %d at iteration %d = %v, want %v", tc.r, tc.it, got, tc.want)
		}
	}
	for _, bad := range []string{"3:2", "x:2:1", "1:0:5", "1:-2:5", "1:2:-1", "1:2:10:5", "1:2:3:4:5"} {
		if _, err := parseSlow(bad); err == nil {
			t.Errorf("parseSlow(%q) accepted", bad)
		}
	}
}

// The distributed kernel is the serial one: a block holding the whole
// grid, swept and swapped, gives exactly the serial solution.
func TestSweepMatchesSerial(t *testing.T) {
	const nx, ny, iters = 7, 5, 30
	b := newBlock(nx, ny, 0, []int{0, nx})
	for it := 0; it < iters; it++ {
		b.sweep()
		b.swap()
	}
	if !slices.Equal(b.interior(), serial(nx, ny, iters)) {
		t.Fatal("a one-block sweep differs from the serial solution")
	}
}

// randomBounds returns a random partition of m rows over p nodes, each
// with at least one row.
func randomBounds(seed uint64, p, m int) []int {
	chi := make([]float64, p)
	for i := range chi {
		seed = seed*6364136223846793005 + 1442695040888963407
		chi[i] = float64(seed>>40+1) / (1 << 24)
	}
	return partition(m, relative(chi), 2)
}
