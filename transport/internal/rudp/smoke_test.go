package rudp

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	c, s, _ := memPair(t, MemConfig{Seed: 1, MTU: 1400}, testConfig())
	data := pattern(1, 1<<20)
	done := make(chan error, 1)
	go func() { done <- writeChunks(c, data, 1, 100000) }()
	sum, err := readAllHash(s, len(data), 2)
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(data), sum)
	require.NoError(t, <-done)
	t.Logf("client %+v", c.Stats())
	t.Logf("server %+v", s.Stats())
}
