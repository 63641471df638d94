package quic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/transport"
	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

// Importing the package registers KindQUIC, and only once.
func TestRegistered(t *testing.T) {
	n, err := transport.NetworkFor(transport.KindQUIC)
	require.NoError(t, err)
	require.Equal(t, network{}, n)
	require.Equal(t, transport.KindQUIC, n.Kind())
	require.Panics(t, func() { transport.RegisterNetwork(transport.KindQUIC, network{}) })
}

// classify maps every quic-go error to transport's vocabulary as the
// QUIC link did when it lived in package transport: the peer's close and
// stream resets mean ErrPeerClosed; every other connection error (quic-go
// makes them all match net.ErrClosed) means ErrClosed.
func TestClassify(t *testing.T) {
	peerClosed, closed := transport.ErrPeerClosed, transport.ErrClosed
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&quicgo.ApplicationError{Remote: true, ErrorCode: codeClosed}, peerClosed},
		{fmt.Errorf("read: %w", &quicgo.ApplicationError{Remote: true, ErrorCode: codeBadFrame}), peerClosed},
		{&quicgo.ApplicationError{Remote: false}, closed},
		{&quicgo.StreamError{Remote: true}, peerClosed},
		{&quicgo.StreamError{Remote: false}, peerClosed},
		{&quicgo.IdleTimeoutError{}, closed},
		{&quicgo.HandshakeTimeoutError{}, closed},
		{&quicgo.TransportError{Remote: true, ErrorCode: quicgo.ProtocolViolation}, closed},
		{&quicgo.StatelessResetError{}, closed},
		{quicgo.ErrTransportClosed, closed},
		{io.EOF, peerClosed},
		{net.ErrClosed, closed},
	} {
		got := classify(context.Background(), tc.err, false)
		require.ErrorIs(t, got, tc.want, "%v", tc.err)
		if tc.want == peerClosed {
			require.ErrorIs(t, got, tc.err, "keeps the cause")
		} else {
			require.NotErrorIs(t, got, peerClosed, "%v", tc.err)
		}
	}

	// A local close, an ended ctx, framing and handshake errors come first.
	remote := &quicgo.ApplicationError{Remote: true}
	require.Equal(t, transport.ErrClosed, classify(context.Background(), remote, true))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, context.Canceled, classify(ctx, os.ErrDeadlineExceeded, false))
	fe := &transport.FrameError{Field: "magic", Err: transport.ErrMalformed}
	require.Same(t, fe, classify(ctx, fe, true))
	ae := &transport.AuthError{Role: "dialer", Rank: 1, Err: transport.ErrBadSecret}
	require.Same(t, ae, classify(nil, ae, false))
	require.NoError(t, classify(nil, nil, false))
	other := errors.New("other")
	require.Same(t, other, classify(nil, other, false))
}

// linkPair listens, dials rank 1 from rank 0 at via(the listener's
// address) (a proxy's in front of it, or itself when via is nil) and
// accepts: the two ends of one QUIC link, closed at the test's end.
func linkPair(ctx context.Context, t *testing.T, via func(addr string) string) (a, b transport.Link) {
	t.Helper()
	ln, err := transport.Listen(transport.KindQUIC, "127.0.0.1:0", testConfig(1))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	if via != nil {
		addr = via(addr)
	}
	a, err = transport.Dial(ctx, transport.KindQUIC, addr, 1, testConfig(0))
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return a, b
}

func testConfig(rank int) transport.Config {
	c := transport.DefaultConfig()
	c.JobID = 0x5eed
	c.Rank = rank
	c.Secret = []byte("0123456789abcdef-test-secret")
	return c
}

// A link through the registered network: messages on both channels, the
// peer's close seen as ErrPeerClosed, a local close as ErrClosed.
func TestLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := linkPair(ctx, t, nil)
	require.IsType(t, &link{}, a)
	require.Equal(t, transport.KindQUIC, a.Kind())
	require.Equal(t, 1, a.Peer())
	require.Equal(t, 0, b.Peer())

	require.NoError(t, a.Send(ctx, transport.Header{Type: transport.MsgEager, Tag: 7}, []byte("eager")))
	require.NoError(t, a.Send(ctx, transport.Header{Type: transport.MsgRndvData, Tag: 8}, []byte("bulk")))
	got := map[transport.MsgType]string{}
	for range 2 {
		m, err := b.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, uint32(0), m.Header.Src)
		got[m.Header.Type] = string(m.Payload)
	}
	require.Equal(t, map[transport.MsgType]string{transport.MsgEager: "eager", transport.MsgRndvData: "bulk"}, got)

	require.NoError(t, a.Close())
	require.NoError(t, a.Close()) // idempotent
	_, err := b.Recv(ctx)
	require.ErrorIs(t, err, transport.ErrPeerClosed)
	require.ErrorIs(t, err, net.ErrClosed)
	var oe *transport.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "recv", oe.Op)
	require.Equal(t, transport.KindQUIC, oe.Transport)
	err = a.Send(ctx, transport.Header{Type: transport.MsgEager}, nil)
	require.ErrorIs(t, err, transport.ErrClosed)
	require.NotErrorIs(t, err, transport.ErrPeerClosed)
}

// A wrong secret fails the dial with an *AuthError matching ErrBadSecret.
func TestBadSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := transport.Listen(transport.KindQUIC, "127.0.0.1:0", testConfig(1))
	require.NoError(t, err)
	defer ln.Close()
	c := testConfig(0)
	c.Secret = []byte("another secret of the right length")
	_, err = transport.Dial(ctx, transport.KindQUIC, ln.Addr().String(), 1, c)
	require.ErrorIs(t, err, transport.ErrBadSecret)
	var ae *transport.AuthError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "dialer", ae.Role)
	require.NotNil(t, ae.Remote)
}
