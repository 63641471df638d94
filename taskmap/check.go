package taskmap

import (
	"fmt"
	"math"
)

// LowerBound returns a lower bound on the completion time of any mapping
// under the run-time values rt (nil: the expected values): the larger of
// the critical path, where every subtask takes its least time over the
// machines and no data takes any time (a subtask on machine x starts no
// earlier than A[x]), and the total least work plus the machines'
// availability times spread over all machines.
func LowerBound(p *Problem, rt *RunTimes) (float64, error) {
	v := &values{p: p}
	if rt != nil {
		if err := rt.Validate(p); err != nil {
			return 0, err
		}
		v = rt.values(p)
	}
	lbf := make([]float64, p.n)
	cp, work := 0.0, 0.0
	for _, a := range p.avail {
		work += a
	}
	for _, i := range p.order {
		ready := 0.0
		for _, d := range p.preds[i] {
			ready = max(ready, lbf[d.task])
		}
		best, least := math.Inf(1), math.Inf(1)
		for x := 0; x < p.m; x++ {
			e := v.execTime(i, x)
			best = min(best, max(ready, p.avail[x])+e)
			least = min(least, e)
		}
		lbf[i] = best
		cp = max(cp, best)
		work += least
	}
	return max(cp, work/float64(p.m)), nil
}

// CheckSchedule verifies a schedule against the problem and the run-time
// values it ran with: every subtask ran exactly once, on the machine the
// schedule says, for its run-time execution time, no earlier than its
// machine's availability; no machine ran two subtasks at once; and every
// subtask started after each input item could have arrived (its
// producer's completion plus the run-time transfer time). tol absorbs
// floating-point rounding (and clock noise for measured schedules).
func CheckSchedule(p *Problem, rt *RunTimes, s *Schedule, tol float64) error {
	if s == nil {
		return invalid("nil schedule")
	}
	v := &values{p: p}
	if rt != nil {
		if err := rt.Validate(p); err != nil {
			return err
		}
		v = rt.values(p)
	}
	if len(s.Machine) != p.n || len(s.Start) != p.n || len(s.Finish) != p.n || len(s.Order) != p.m {
		return invalid("schedule has the wrong shape for %d tasks on %d machines", p.n, p.m)
	}
	seen := make([]bool, p.n)
	for x, ord := range s.Order {
		prev := -1
		for _, i := range ord {
			if i < 0 || i >= p.n {
				return invalid("machine %d ran task %d, which does not exist", x, i)
			}
			name := p.g.taskName(i)
			if seen[i] {
				return fmt.Errorf("taskmap: %s ran twice", name)
			}
			seen[i] = true
			if s.Machine[i] != x {
				return fmt.Errorf("taskmap: %s is in machine %d's order but the schedule says machine %d", name, x, s.Machine[i])
			}
			if d := s.Finish[i] - s.Start[i]; math.Abs(d-v.execTime(i, x)) > tol {
				return fmt.Errorf("taskmap: %s ran %v on machine %d, its run-time execution time is %v", name, d, x, v.execTime(i, x))
			}
			if s.Start[i] < p.avail[x]-tol {
				return fmt.Errorf("taskmap: %s started at %v, before machine %d is available (%v)", name, s.Start[i], x, p.avail[x])
			}
			if prev >= 0 && s.Start[i] < s.Finish[prev]-tol {
				return fmt.Errorf("taskmap: machine %d runs %s from %v while %s runs until %v", x, name, s.Start[i], p.g.taskName(prev), s.Finish[prev])
			}
			prev = i
		}
	}
	mk := 0.0
	for i := 0; i < p.n; i++ {
		if !seen[i] {
			return fmt.Errorf("taskmap: %s never ran", p.g.taskName(i))
		}
		for _, d := range p.preds[i] {
			arrive := s.Finish[d.task] + v.comm(d.edge, s.Machine[d.task], s.Machine[i])
			if s.Start[i] < arrive-tol {
				return fmt.Errorf("taskmap: %s started at %v before its input from %s arrived (%v)", p.g.taskName(i), s.Start[i], p.g.taskName(d.task), arrive)
			}
		}
		mk = max(mk, s.Finish[i])
	}
	if math.Abs(mk-s.Makespan) > tol {
		return fmt.Errorf("taskmap: makespan %v, the last completion is %v", s.Makespan, mk)
	}
	return nil
}
