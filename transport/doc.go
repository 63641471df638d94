// Package transport moves hetcomm's bytes: it provides links, reliable,
// ordered, message-framed connections to one authenticated peer over one
// rail (one NIC, one address, one protocol), and listeners that accept
// links from many peers.
//
// # Transports
//
//   - tcp: one TCP connection per peer and rail; header and payload leave
//     in one vectored write (writev), TCP_NODELAY is on.
//   - tls: tcp inside TLS 1.3, with per-rank ephemeral certificates
//     (NewIdentity) pinned by their SHA-256 fingerprints
//     (Config.Fingerprints).
//   - quic: quic-go, same certificates; one stream per logical Channel so a
//     bulk payload never holds up control traffic (see ChannelOf). It lives
//     in package transport/quic so that programs that do not use it (the
//     launcher) do not link quic-go: importing that package, as comm does,
//     registers it, and NetworkFor, Listen and Dial then serve KindQUIC.
//   - udp: our reliable UDP (transport/internal/rudp: selective
//     acknowledgements, RTT-driven retransmission, CUBIC with pacing)
//     carrying the same framing and handshake as tcp.
//   - mem: in-process queues (NewMemNetwork) for deterministic tests, with
//     per-direction rate, delay and seeded loss.
//
// A transport in another package implements Link, Listener and Network
// with the link kit (linkkit.go: Config.WithDefaults, TLSConfig,
// DialHandshake and ListenHandshake, FrameWriter and FrameReader,
// ClassifyError), so it speaks the same handshake, frames and errors as
// the built-in ones, and registers itself with RegisterNetwork.
//
// Any link can be shaped in user space (Shape, ShapeNetwork) so that a
// heterogeneous network with latencies can be emulated on one machine
// without root.
//
// # Wire and authentication
//
// Every connection first runs a membership handshake: an HMAC-SHA256
// challenge-response over the per-job secret with fresh random nonces from
// both sides, which proves the job id and both ranks and cannot be
// replayed. Then every message is a 48-byte Header followed by its payload,
// which is never re-encoded; control payloads are msgpack. docs/wire.md
// describes every byte. A wrong secret, job, rank or version, a malformed
// or oversized header or garbage bytes close the connection with a logged,
// typed error (*AuthError, *FrameError) and deliver nothing; a claimed
// length is never allocated before its bytes arrive.
//
// # Errors
//
// Operations return *OpError. Closed links match net.ErrClosed (ErrClosed
// for a local close, ErrPeerClosed for a peer that went away), ended
// contexts match context.DeadlineExceeded or context.Canceled, and
// handshake and framing failures wrap the sentinels ErrBadSecret,
// ErrJobMismatch, ErrRankMismatch, ErrVersion, ErrFingerprint,
// ErrMalformed and ErrTooLarge.
package transport
