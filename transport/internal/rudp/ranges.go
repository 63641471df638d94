package rudp

// span is a half-open range [start, end) of sequence numbers.
type span struct{ start, end uint64 }

// rangeSet is a sorted set of disjoint, non-adjacent spans. Both ends use it:
// the receiver for the out-of-order packets it holds (to build SACK blocks),
// the sender for the packets the peer has selectively acknowledged (so each
// SACK block costs only the packets it newly covers).
type rangeSet struct {
	s []span
}

func (r *rangeSet) len() int { return len(r.s) }

// contains reports whether x is in the set.
func (r *rangeSet) contains(x uint64) bool {
	i := r.search(x)
	return i < len(r.s) && r.s[i].start <= x
}

// search returns the index of the first span whose end is > x.
func (r *rangeSet) search(x uint64) int {
	lo, hi := 0, len(r.s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.s[m].end <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add inserts [a, b) and appends the parts that were not yet in the set to
// fresh (which it returns).
func (r *rangeSet) add(a, b uint64, fresh []span) []span {
	if a >= b {
		return fresh
	}
	i := r.search(a)
	// Spans from i on overlap or follow [a,b); those starting <= b merge
	// (adjacent ones too).
	j := i
	cur := a
	for j < len(r.s) && r.s[j].start <= b {
		if r.s[j].start > cur {
			fresh = append(fresh, span{cur, min(r.s[j].start, b)})
		}
		cur = max(cur, r.s[j].end)
		j++
	}
	if cur < b {
		fresh = append(fresh, span{cur, b})
	}
	// Adjacent span just before i (its end == a) merges too.
	if i > 0 && r.s[i-1].end == a {
		i--
	}
	if i == j {
		// Pure insertion.
		r.s = append(r.s, span{})
		copy(r.s[i+1:], r.s[i:])
		r.s[i] = span{a, b}
		return fresh
	}
	merged := span{min(a, r.s[i].start), max(b, r.s[j-1].end)}
	r.s[i] = merged
	r.s = append(r.s[:i+1], r.s[j:]...)
	return fresh
}

// trimBelow removes everything below x.
func (r *rangeSet) trimBelow(x uint64) {
	i := 0
	for i < len(r.s) && r.s[i].end <= x {
		i++
	}
	if i > 0 {
		r.s = append(r.s[:0], r.s[i:]...)
	}
	if len(r.s) > 0 && r.s[0].start < x {
		r.s[0].start = x
	}
}

// first returns the lowest span, if any.
func (r *rangeSet) first() (span, bool) {
	if len(r.s) == 0 {
		return span{}, false
	}
	return r.s[0], true
}
