package taskmap

import (
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/stretchr/testify/require"
)

// fig3Problem is a DAG in the spirit of the paper's Figure 3 (whose
// matrix is only in the figure): two machines, a transfer costs 2 s
// between them and nothing on one machine, and two chains
//
//	s0 -> s2 -> s4            (s4 a sink)
//	s1 -> s3 -> s5 -> s6      (and s1 -> s5)
//
// Blocks: {s0, s1}, {s2, s3}, {s4, s5}, {s6}.
//
//	e (seconds)   m0   m1
//	s0            20   15
//	s1            35   40
//	s2            10   15
//	s3             5   35
//	s4            25   35
//	s5            25   25
//	s6            25   10
func fig3Problem(t *testing.T) *Problem {
	t.Helper()
	exec := [][]float64{{20, 15}, {35, 40}, {10, 15}, {5, 35}, {25, 35}, {25, 25}, {25, 10}}
	g := &Graph{}
	for i, e := range exec {
		g.Tasks = append(g.Tasks, Task{Name: "s" + string(rune('0'+i)), Exec: e})
	}
	for _, e := range [][2]int{{0, 2}, {1, 3}, {2, 4}, {3, 5}, {1, 5}, {5, 6}} {
		g.Items = append(g.Items, Item{Size: 1 << 20, Producer: e[0], Consumers: []int{e[1]}})
	}
	model := &collective.Model{Latency: [][]float64{{0, 2}, {2, 0}}, PerByte: [][]float64{{0, 0}, {0, 0}}}
	p, err := NewProblem(g, model, nil)
	require.NoError(t, err)
	return p
}

// TestFigure3 checks, against values computed by hand, the paper's point
// about CD (section 3.6): run-time completion times can make the subtask
// with the lower static rank critical; CD, ordering the block by
// ct(s_i, initial machine), maps it first, while PS and CS keep the
// static order.
func TestFigure3(t *testing.T) {
	p := fig3Problem(t)
	require.Equal(t, [][]int{{0, 1}, {2, 3}, {4, 5}, {6}}, p.Blocks())

	// Baseline: order s1, s0 | s3, s2 | s5, s4 | s6 (descendants 3, 2 |
	// 2, 1 | 1, 0 | 0).
	//   s1: m0 35, m1 40          -> m0 [0, 35]
	//   s0: m0 55, m1 15          -> m1 [0, 15]
	//   s3: m0 40, m1 37+35 = 72  -> m0 [35, 40]
	//   s2: m0 40+10 = 50, m1 30  -> m1 [15, 30]
	//   s5: m0 40+25 = 65, m1 max(30, 42)+25 = 67 -> m0 [40, 65]
	//   s4: m0 65+25 = 90, m1 30+35 = 65          -> m1 [30, 65]
	//   s6: m0 65+25 = 90, m1 max(65, 67)+10 = 77 -> m1 [67, 77]
	base := Baseline(p)
	require.Equal(t, []int{1, 0, 1, 0, 1, 0, 1}, base.Machine)
	require.Equal(t, [][]int{{1, 3, 5}, {0, 2, 4, 6}}, base.Order)
	require.Equal(t, []float64{15, 35, 30, 40, 65, 65, 77}, base.Finish)
	require.Equal(t, 77.0, base.Makespan)

	// Ranks under the baseline: rank(s6) = 10, rank(s5) = 25 + 2 + 10 =
	// 37, rank(s4) = 35, rank(s3) = 5 + 37 = 42, rank(s2) = 15 + 35 = 50,
	// rank(s1) = 35 + max(42, 37) = 77, rank(s0) = 15 + 50 = 65. s5 ranks
	// above s4.
	rk, err := Ranks(p, base)
	require.NoError(t, err)
	require.Equal(t, []float64{65, 77, 50, 42, 35, 37, 10}, rk)

	// At run time s0 takes 30 s instead of 15 (the rest as expected).
	rt := Expected(p)
	rt.Exec[0] = []float64{40, 30}

	// Static: m1 runs s0 [0, 30], s2 [30, 45], s4 [45, 80], s6 [80, 90]
	// (s5's data arrives at 67); m0 runs s1 [0, 35], s3 [35, 40],
	// s5 [40, 65]. Completion 90.
	static, err := Simulate(p, rt, Static, SimOptions{})
	require.NoError(t, err)
	require.Equal(t, 90.0, static.Makespan)

	// Block 1 is remapped at t = 0 (s1 starts) with expected values only;
	// every variant keeps s2 on m1 and s3 on m0. Block 2 is remapped at
	// t = 30, when s2 starts: s0 has completed (30, late by 15), s1 is
	// running (expected to complete at 35), s3 will run [35, 40], s2 is
	// expected to complete at 45. So A = [40, 45], and
	//
	//   ct(s4, m1) = pct(s4, m1)           = max(45, 45) + 35     = 80
	//   ct(s5, m0) = pct(s5, m0) + c + rank(s6) = max(40, 40) + 25 + 2 + 10 = 77
	//
	// so CD takes s4 first although its static rank is lower. With the
	// expected 15 s for s0, block 2 is remapped at t = 15 with A = [40,
	// 30]: ct(s4, m1) = 65 < ct(s5, m0) = 77, the static order.
	for _, c := range []struct {
		rt  *RunTimes
		now float64
		ct4 float64
	}{{rt, 30, 80}, {Expected(p), 15, 65}} {
		var seen bool
		_, err := Simulate(p, c.rt, CD, SimOptions{trace: func(k int, obs *Observation, r *Remapper) {
			if k != 2 {
				return
			}
			seen = true
			require.Equal(t, c.now, obs.Now)
			r.expect(obs)
			copy(r.a, r.free)
			require.Equal(t, c.ct4, r.pct(4, 1, obs.Now)+r.tail(4, 1))
			require.Equal(t, 77.0, r.pct(5, 0, obs.Now)+r.tail(5, 0))
		}})
		require.NoError(t, err)
		require.True(t, seen)
	}

	// PS and CS map s5 first, to m0 (pct 65, ct 77; on m1 pct 70, ct 80),
	// then s4 to m1 (pct 80; on m0 90): the static mapping. Block 3 (s6,
	// remapped at 40 when s5 starts, A = [65, 80]) ties at 90 on both
	// machines and goes to m0. Completion: s6 [65, 90], 90.
	//
	// CD maps s4 first, to m0 (pct 72 = max(40, 45+2) + 25, against 80 on
	// m1), then s5 to m1 (pct 70 = max(45, 40+2) + 25, ct 80; on m0 pct
	// 97, ct 109). s5 runs [45, 70] on m1, s4 [47, 72] on m0; block 3 is
	// remapped at 45 with A = [72, 70]: s6 goes to m1 (80 against 97) and
	// runs [70, 80]. Completion 80, 11% sooner.
	want := map[Algorithm]struct {
		order        []int // block 2 in mapping order
		machine      []int // of every task
		start        []float64
		finish       []float64
		makespan     float64
		blockTwoPred []float64 // predicted completion of s4, s5
	}{
		PS: {[]int{5, 4}, []int{1, 0, 1, 0, 1, 0, 0}, []float64{0, 0, 30, 35, 45, 40, 65}, []float64{30, 35, 45, 40, 80, 65, 90}, 90, []float64{80, 65}},
		CS: {[]int{5, 4}, []int{1, 0, 1, 0, 1, 0, 0}, []float64{0, 0, 30, 35, 45, 40, 65}, []float64{30, 35, 45, 40, 80, 65, 90}, 90, []float64{80, 65}},
		CD: {[]int{4, 5}, []int{1, 0, 1, 0, 0, 1, 1}, []float64{0, 0, 30, 35, 47, 45, 70}, []float64{30, 35, 45, 40, 72, 70, 80}, 80, []float64{72, 70}},
	}
	for _, a := range []Algorithm{PS, CS, CD} {
		t.Run(string(a), func(t *testing.T) {
			w := want[a]
			s, err := Simulate(p, rt, a, SimOptions{})
			require.NoError(t, err)
			require.NoError(t, CheckSchedule(p, rt, s, 0))
			require.Equal(t, w.machine, s.Machine)
			require.Equal(t, w.start, s.Start)
			require.Equal(t, w.finish, s.Finish)
			require.Equal(t, w.makespan, s.Makespan)
			require.Equal(t, 3, s.Remaps)

			// The same remapping through the Remapper API, with the
			// observations the simulator made.
			r, err := NewRemapper(p, nil, a)
			require.NoError(t, err)
			obs := NewObservation(p.Tasks())
			obs.Start[1] = 0
			_, err = r.Remap(1, obs)
			require.NoError(t, err)
			obs.Now = 30
			obs.Start[0], obs.Finish[0], obs.Start[2] = 0, 30, 30
			order, err := r.Remap(2, obs)
			require.NoError(t, err)
			require.Equal(t, w.order, order)
			require.Equal(t, w.blockTwoPred, r.Mapping().Finish[4:6])
			require.Equal(t, w.machine[4:6], r.Mapping().Machine[4:6])
		})
	}
}
