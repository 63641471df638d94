package transport

import (
	"fmt"
	"log/slog"
	"time"
)

// Kind names a transport.
type Kind uint8

// Transports. Numbers are stable (they may appear in configuration files).
const (
	KindMem  Kind = 1 // in-process links, for tests and emulation
	KindTCP  Kind = 2 // one TCP connection per peer and rail
	KindTLS  Kind = 3 // TCP with TLS 1.3 and per-job certificates
	KindQUIC Kind = 4 // quic-go, one stream per channel (package transport/quic)
	KindUDP  Kind = 5 // reliable UDP (transport/internal/rudp)
)

var kindNames = [...]string{KindMem: "mem", KindTCP: "tcp", KindTLS: "tls", KindQUIC: "quic", KindUDP: "udp"}

func (k Kind) String() string {
	if k != 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps "mem", "tcp", "tls", "quic" or "udp" to its Kind.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n != "" && n == s {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown transport %q", ErrBadConfig, s)
}

// AnyRank, passed as the peer rank to Dial, accepts whichever rank answers.
const AnyRank = -1

// Defaults used when a Config field is zero.
const (
	DefaultMaxMessage       = 1 << 30 // 1 GiB
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultPreAuthTimeout   = 2 * time.Second
	DefaultSendWindow       = 4 << 20 // bytes queued per direction on mem and shaped links
	LoopbackSocketBuffer    = 256 << 10
	MinSecretLen            = 16
)

// Config configures links and listeners. The zero value of each field is
// documented; DefaultConfig fills in the defaults explicitly. JobID, Rank
// and Secret have no usable zero value.
type Config struct {
	// JobID identifies the job. Peers of another job are rejected.
	JobID uint64
	// Rank is this process's rank (>= 0).
	Rank int
	// Secret is the per-job secret shared by all ranks, at least
	// MinSecretLen bytes. It never crosses the wire.
	Secret []byte

	// MaxMessage bounds the payload length accepted from a peer (and sent).
	// A header that claims more closes the link with ErrTooLarge.
	// 0 means DefaultMaxMessage.
	MaxMessage int64
	// HandshakeTimeout bounds the membership handshake of one connection.
	// 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// PreAuthTimeout is how long a listener waits for an accepted
	// connection's first bytes (the dialer speaks first, at once): one
	// that says nothing in time is closed, so that idle connections
	// cannot hold the handshake slots that real ranks need. 0 means
	// DefaultPreAuthTimeout.
	PreAuthTimeout time.Duration
	// Logger receives rejected connections and broken links. nil discards.
	Logger *slog.Logger

	// Alloc, if set, chooses the buffer a received payload is read into. It
	// is called once per message, after the header has been validated and
	// before any payload byte is read, possibly from a goroutine internal
	// to the link and concurrently for different links or channels. If it
	// returns a slice with capacity >= h.Len the payload lands there (the
	// Message's Payload aliases it); otherwise the link allocates. nil
	// means always allocate.
	Alloc func(h Header) []byte

	// LowWater, if set, is asked before a TCP link (on Linux) waits for
	// the rest of a large payload: it returns how many bytes must have
	// arrived before the waiting reader is woken (the socket's
	// SO_RCVLOWAT, capped at what is left of the payload; below 64 KiB,
	// or 0, the reader wakes at every segment as usual). Fewer wake-ups
	// pay off when processes outnumber cores: 4 ranks on 2 cores ran a
	// 1 MiB Alltoallv 20% faster with 256 KiB. With a core per process
	// they cost bandwidth instead (the reader no longer copies while the
	// sender writes), so nil is the default; comm sets it when its ranks
	// outnumber their host's cores. Called from the link's reading
	// goroutine.
	LowWater func() int

	// Identity is this rank's TLS certificate for the TLS and QUIC
	// transports. nil means an ephemeral one is generated per listener or
	// dial (then peers can only check it if Fingerprints is empty).
	Identity *Identity
	// Fingerprints maps ranks to the SHA-256 fingerprint of their
	// certificate, as published by the bootstrap. If non-empty, a TLS or
	// QUIC peer must present a certificate listed here, and after the
	// handshake its fingerprint must be the one of the rank it proved to
	// be. Empty means certificates are not checked (the HMAC handshake,
	// bound to the TLS session, still proves membership).
	Fingerprints map[int]Fingerprint

	// LocalAddr, if set, is the local address ("ip" or "ip:port") that
	// dialed sockets bind to, so that a rail's traffic leaves through its
	// own NIC. Empty lets the kernel choose.
	LocalAddr string

	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF on TCP sockets. 0 means
	// the default policy: LoopbackSocketBuffer for a loopback peer (where
	// copying is the only cost, buffers that stay in the CPU cache move
	// data fastest: measured 30-50% more bandwidth than autotuned buffers
	// on the benchmark machine), the kernel's autotuning otherwise (a
	// long, fast path needs large windows). Negative leaves the kernel's
	// autotuning on for every peer.
	SocketBuffer int

	// UserTimeout, if positive, bounds how long data sent on a TCP or TLS
	// link may stay unacknowledged before the link fails
	// (TCP_USER_TIMEOUT, Linux only). A path that silently stops
	// carrying packets (a NIC or cable gone) then fails within it instead
	// of the kernel's many minutes of retransmissions, which a rail of a
	// RailSet needs to hand its traffic to the others. 0 keeps the
	// kernel's behaviour.
	UserTimeout time.Duration

	// QUIC tunes the QUIC transport.
	QUIC QUICConfig
}

// QUICConfig tunes quic-go (the QUIC transport, package transport/quic).
// Zero fields take the defaults given.
type QUICConfig struct {
	// StreamWindow is the maximum per-stream receive window. 0: 32 MiB.
	StreamWindow uint64
	// ConnWindow is the maximum per-connection receive window. 0: 64 MiB.
	ConnWindow uint64
	// KeepAlive is the keep-alive period. 0: 5 s.
	KeepAlive time.Duration
	// IdleTimeout closes a connection whose peer went silent. 0: 30 s.
	IdleTimeout time.Duration
}

// DefaultConfig returns a Config with every tunable at its default. The
// caller still sets JobID, Rank and Secret.
func DefaultConfig() Config {
	return Config{
		MaxMessage:       DefaultMaxMessage,
		HandshakeTimeout: DefaultHandshakeTimeout,
		PreAuthTimeout:   DefaultPreAuthTimeout,
		QUIC: QUICConfig{
			StreamWindow: 32 << 20,
			ConnWindow:   64 << 20,
			KeepAlive:    5 * time.Second,
			IdleTimeout:  30 * time.Second,
		},
	}
}

// Validate reports whether c is usable. Errors match ErrBadConfig.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, a...)...)
	}
	switch {
	case c.Rank < 0 || int64(c.Rank) > int64(^uint32(0)>>1):
		return bad("rank %d out of range", c.Rank)
	case len(c.Secret) < MinSecretLen:
		return bad("secret of %d bytes, need at least %d", len(c.Secret), MinSecretLen)
	case c.MaxMessage < 0:
		return bad("negative MaxMessage %d", c.MaxMessage)
	case c.HandshakeTimeout < 0:
		return bad("negative HandshakeTimeout %v", c.HandshakeTimeout)
	case c.PreAuthTimeout < 0:
		return bad("negative PreAuthTimeout %v", c.PreAuthTimeout)
	case c.QUIC.KeepAlive < 0 || c.QUIC.IdleTimeout < 0:
		return bad("negative QUIC timeout")
	}
	for r := range c.Fingerprints {
		if r < 0 {
			return bad("fingerprint for negative rank %d", r)
		}
	}
	return nil
}

// withDefaults returns a validated copy of c with zero fields defaulted.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	d := DefaultConfig()
	if c.MaxMessage == 0 {
		c.MaxMessage = d.MaxMessage
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.PreAuthTimeout == 0 {
		c.PreAuthTimeout = d.PreAuthTimeout
	}
	if c.QUIC.StreamWindow == 0 {
		c.QUIC.StreamWindow = d.QUIC.StreamWindow
	}
	if c.QUIC.ConnWindow == 0 {
		c.QUIC.ConnWindow = d.QUIC.ConnWindow
	}
	if c.QUIC.KeepAlive == 0 {
		c.QUIC.KeepAlive = d.QUIC.KeepAlive
	}
	if c.QUIC.IdleTimeout == 0 {
		c.QUIC.IdleTimeout = d.QUIC.IdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Secret = append([]byte(nil), c.Secret...)
	return c, nil
}
