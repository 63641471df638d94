package netprobe

// Sweep decides the message sizes of one direction's probe. Sizes grow by
// a factor of 4 from MinBytes; the sweep stops after the first size whose
// best time is at least Dominance times the smallest size's time (the
// m/B term then dominates, so the slope is well measured), or when the
// next size would exceed MaxBytes, or the predicted growth of its time
// over the smallest size's (the m/B part: on a long-latency link the
// latency itself is not the budget's concern) would exceed Budget seconds.
type Sweep struct {
	MinBytes  int64
	MaxBytes  int64
	Dominance float64
	Budget    float64 // seconds for one transfer
	first     float64
	last      int64
	lastT     float64
	done      bool
}

// Next returns the next size to measure, or false when the sweep is over.
func (s *Sweep) Next() (int64, bool) {
	if s.done {
		return 0, false
	}
	if s.last == 0 {
		s.last = s.MinBytes
		return s.last, true
	}
	next := s.last * 4
	if next > s.MaxBytes {
		s.done = true
		return 0, false
	}
	// Predict the next time's growth from the last one (at most linear).
	if s.Growth()*4 > s.Budget {
		s.done = true
		return 0, false
	}
	s.last = next
	return next, true
}

// Growth is the last size's best time minus the smallest size's: the part
// that grows with the size.
func (s *Sweep) Growth() float64 { return s.lastT - s.first }

// Observe records the best time of the size Next returned last.
func (s *Sweep) Observe(best float64) {
	if s.first == 0 {
		s.first = best
	}
	s.lastT = best
	if s.last > s.MinBytes && best >= s.Dominance*s.first {
		s.done = true
	}
}
