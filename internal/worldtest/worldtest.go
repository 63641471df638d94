// Package worldtest starts comm worlds of in-process ranks for the tests
// of the packages built on comm (netprobe, taskrun, the examples).
package worldtest

import (
	"context"
	"testing"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
)

// Start starts n ranks in this process over netw (a fresh in-memory
// network when nil) and returns their world communicators, closed when
// the test ends. Each rank's config has the bootstrap of commtest.Start
// (mem transport, a job of its own, a 20 s timeout), a model cache of the
// test's own (a temporary directory), and then goes through
// tweak, if set, which may change anything (a nil Network and a tcp
// transport with a Coord run the ranks over real sockets). It fails the
// test, naming the rank, if a rank cannot start.
func Start(t testing.TB, n int, netw transport.Network, tweak func(rank int, c *comm.Config)) []*comm.Comm {
	t.Helper()
	if netw == nil {
		netw = transport.NewMemNetwork(1)
	}
	cache := t.TempDir() // probed models stay out of the user's cache
	return commtest.Start(t, n, func(b *bootstrap.Bootstrap) (*comm.Comm, error) {
		cfg := &comm.Config{Bootstrap: b, Network: netw, CacheDir: cache}
		if tweak != nil {
			tweak(b.Rank, cfg)
		}
		return comm.Init(context.Background(), cfg)
	})
}
