package taskmap

// minHeap is a binary min-heap ordered by less; ties must be broken by
// less itself, so that what pops first is deterministic.
type minHeap[T any] struct {
	a    []T
	less func(x, y T) bool
}

func (h *minHeap[T]) len() int { return len(h.a) }

func (h *minHeap[T]) push(v T) {
	h.a = append(h.a, v)
	a := h.a
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(a[i], a[p]) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap[T]) pop() T {
	a := h.a
	v := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && h.less(a[l], a[m]) {
			m = l
		}
		if r < len(a) && h.less(a[r], a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
	h.a = a
	return v
}
