package launch

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  RankError
		want int
	}{
		{RankError{Status: 3}, 3},
		{RankError{Status: 127}, 127},
		{RankError{Status: 255}, 255},
		{RankError{Status: -1, Signal: syscall.SIGKILL}, 128 + 9},
		{RankError{Err: errors.New("exec: no such file")}, 1},
	} {
		require.Equal(t, tc.want, tc.err.ExitCode(), "%v", &tc.err)
	}
}

// TestSlotsPlacement: a hostfile's slots fill each host in turn, as
// mpirun places ranks by slot.
func TestSlotsPlacement(t *testing.T) {
	hosts, err := ParseHostfile("a slots=2\n# a comment\nb slots=3\nc\n")
	require.NoError(t, err)
	s := Spec{Hosts: hosts}
	var got []string
	for r := 0; r < 7; r++ {
		got = append(got, s.host(r))
	}
	require.Equal(t, []string{"a", "a", "b", "b", "b", "c", "a"}, got, "filled in order, then round again")
	_, err = ParseHostfile("a slots=zero\n")
	require.ErrorContains(t, err, "bad slots")
}
