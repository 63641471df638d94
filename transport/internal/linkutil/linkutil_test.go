package linkutil

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLock(t *testing.T) {
	errClosed := errors.New("closed")
	l := NewLock()
	closed := make(chan struct{})
	require.NoError(t, l.Acquire(context.Background(), closed, errClosed))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.Acquire(ctx, closed, errClosed), context.Canceled, "a held lock waits until ctx ends")
	close(closed)
	require.ErrorIs(t, l.Acquire(context.Background(), closed, errClosed), errClosed, "or until the link closes")

	l.Release()
	require.NoError(t, l.Acquire(context.Background(), closed, errClosed), "a free lock is taken even after close")
}

func TestCloser(t *testing.T) {
	c := NewCloser()
	require.False(t, c.IsClosed())
	runs := 0
	require.True(t, c.Close(func() { runs++ }))
	require.False(t, c.Close(func() { runs++ }))
	require.Equal(t, 1, runs)
	require.True(t, c.IsClosed())
	<-c.Quit
}
