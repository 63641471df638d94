package comm

// ElementwiseFloat64 lets the external tests check elementwise on ops
// made in another package.
func ElementwiseFloat64(op Op[float64]) bool { return elementwise(op) }
