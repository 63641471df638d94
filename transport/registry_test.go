package transport

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeNetwork is a Network that only knows its kind.
type fakeNetwork struct{ kind Kind }

func (n fakeNetwork) Kind() Kind { return n.kind }
func (fakeNetwork) Listen(string, Config) (Listener, error) {
	return nil, errors.New("fake")
}
func (fakeNetwork) Dial(context.Context, string, int, Config) (Link, error) {
	return nil, errors.New("fake")
}

// Without transport/quic, KindQUIC is unknown, and the error says which
// package to import. (A fresh registry: the global one of this test binary
// has QUIC, see quic_register_test.go.)
func TestRegistryQUICNotLinked(t *testing.T) {
	var r registry
	n, err := r.lookup(KindQUIC)
	require.Nil(t, n)
	require.ErrorIs(t, err, ErrBadConfig)
	require.ErrorContains(t, err, "quic")
	require.ErrorContains(t, err, `import _ "github.com/hetcomm/hetcomm/transport/quic"`)

	_, err = r.lookup(Kind(9))
	require.ErrorIs(t, err, ErrBadConfig)
	require.ErrorContains(t, err, "no socket network for transport kind(9)")

	q := fakeNetwork{KindQUIC}
	r.register(KindQUIC, q)
	n, err = r.lookup(KindQUIC)
	require.NoError(t, err)
	require.Equal(t, q, n)
}

// Registering anything but a pluggable transport, a nil or mismatched
// Network, or the same kind twice is a programming error.
func TestRegistryPanics(t *testing.T) {
	for _, k := range []Kind{KindMem, KindTCP, KindTLS, KindUDP, 0, Kind(9)} {
		var r registry
		require.Panics(t, func() { r.register(k, fakeNetwork{k}) }, k.String())
	}
	var r registry
	require.Panics(t, func() { r.register(KindQUIC, nil) })
	require.Panics(t, func() { r.register(KindQUIC, fakeNetwork{KindTCP}) })
	r.register(KindQUIC, fakeNetwork{KindQUIC})
	require.Panics(t, func() { r.register(KindQUIC, fakeNetwork{KindQUIC}) })

	// The global registry already has QUIC (quic_register_test.go): a
	// second registration panics before changing anything.
	require.Panics(t, func() { RegisterNetwork(KindQUIC, fakeNetwork{KindQUIC}) })
	n, err := NetworkFor(KindQUIC)
	require.NoError(t, err)
	require.Equal(t, KindQUIC, n.Kind())
	require.NotEqual(t, fakeNetwork{KindQUIC}, n)
}
