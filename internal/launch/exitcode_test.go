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
