package collective

import (
	"math"
	"slices"
)

// Median returns the median of xs: the middle value, or the mean of the
// two middle values when len(xs) is even; NaN when xs is empty. xs is not
// modified. It is the one median of the project: planners use it to
// summarise a group's links, netprobe to fit samples, bench and the
// examples to report timings.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
