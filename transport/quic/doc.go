// Package quic is hetcomm's QUIC transport (transport.KindQUIC), built on
// quic-go. It lives apart from package transport so that programs that do
// not use QUIC (the launcher, hetrun) do not link quic-go.
//
// It has no API of its own: importing it registers the transport
// (transport.RegisterNetwork), after which transport.NetworkFor,
// transport.Listen and transport.Dial serve KindQUIC. Package comm imports
// it, so every hetcomm program has QUIC; code that uses package transport
// directly imports it for its side effects:
//
//	import _ "github.com/hetcomm/hetcomm/transport/quic"
//
// One QUIC connection carries one link, with the certificates, pinning and
// membership handshake of the TLS transport (docs/wire.md). Each logical
// channel (transport.ChannelOf) has its own stream: channel 0 (control) is
// the bidirectional stream the dialer opens for the handshake, every other
// channel a unidirectional stream opened by its first sender, scheduled
// after control. So a bulk payload never holds up control traffic: order
// holds within a channel, not across channels, except for MsgClose, which
// the peer sees only after everything sent before it on any channel. A
// Close after a MsgClose lingers (up to 5 s) until the peer has
// acknowledged receiving all of it, as TCP's close does, instead of
// discarding what is still in flight. Errors are transport's
// (transport.OpError, ErrClosed, ErrPeerClosed, AuthError, FrameError);
// transport.Config.QUIC tunes quic-go.
package quic
