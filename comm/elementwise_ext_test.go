package comm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/comm"
)

// TestElementwiseFromAnotherPackage: the built-in ops and OpFunc's are
// known element-wise also when a program in another package passes them.
func TestElementwiseFromAnotherPackage(t *testing.T) {
	require.True(t, comm.ElementwiseFloat64(comm.Sum[float64]))
	require.True(t, comm.ElementwiseFloat64(comm.Min[float64]))
	require.True(t, comm.ElementwiseFloat64(comm.OpFunc(func(a, b float64) float64 { return a + 2*b })))
	require.False(t, comm.ElementwiseFloat64(func(dst, src []float64) {}))
}
