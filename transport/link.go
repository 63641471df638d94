package transport

import (
	"bytes"
	"context"
	"fmt"
	"net"
)

// Message is one received message: its header and its payload (exactly
// Header.Len bytes).
type Message struct {
	Header  Header
	Payload []byte
}

// Link is a reliable, message-framed connection to one authenticated peer
// over one rail (one NIC, one address, one protocol).
//
// Concurrency contract:
//   - Send may be called from several goroutines at once. Each message is
//     written whole; messages of concurrent Sends are never interleaved.
//     Messages from one goroutine on one Channel (see ChannelOf) arrive in
//     the order they were sent; on single-stream transports (tcp, tls,
//     udp, mem) all messages arrive in send order.
//   - Recv may be called from several goroutines at once; each message is
//     delivered to exactly one caller. The usual pattern is one receiving
//     goroutine per link.
//   - Close may be called at any time and more than once. It unblocks every
//     pending Send and Recv, which then fail with an error matching
//     net.ErrClosed. Messages still in flight may be lost: an upper layer
//     that needs a graceful end exchanges MsgClose first.
//
// Errors are *OpError wrapping: ErrClosed (also net.ErrClosed) after Close;
// ErrPeerClosed (also net.ErrClosed and io.EOF) when the peer went away; the
// context's error (context.DeadlineExceeded, context.Canceled) when ctx ended;
// a *FrameError when the peer sent an invalid header.
//
// If ctx ends while a message is partly written or read, the byte stream can
// no longer be trusted: the link closes itself and later calls fail with
// ErrClosed. A ctx that ends while Send waits for its turn, or while Recv
// waits for the first byte of a message, leaves the link usable.
type Link interface {
	// Send sends one message. It fills in h.Version, h.Job, h.Src (this
	// rank) and h.Len (len(payload)); the caller sets Type, Flags, Comm, Tag
	// and Seq. Send returns once the message has been handed to the
	// transport (kernel socket, QUIC stream, mem queue): the caller may then
	// reuse payload. The payload is written as is, never re-encoded.
	Send(ctx context.Context, h Header, payload []byte) error
	// Recv returns the next message. The payload lands in the buffer chosen
	// by Config.Alloc, or in a freshly allocated slice of exactly
	// Header.Len bytes.
	Recv(ctx context.Context) (Message, error)
	// Peer is the peer's rank, as proven by the membership handshake.
	Peer() int
	// Kind is the link's transport.
	Kind() Kind
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Close closes the link. It is idempotent.
	Close() error
}

// PartsSender is a Link that can send a payload given in parts as one
// message, without joining the parts first: the parts go out in one
// vectored write. Stream links (tcp, tls, udp) implement it; SendParts
// (below) serves any link.
type PartsSender interface {
	// SendParts is Send with the payload split in parts: the receiver
	// gets one message whose payload is the parts one after the other.
	SendParts(ctx context.Context, h Header, parts ...[]byte) error
}

// SendParts sends parts as the payload of one message on l: in one
// vectored write when l is a PartsSender, else joined in a new buffer.
func SendParts(ctx context.Context, l Link, h Header, parts ...[]byte) error {
	if ps, ok := l.(PartsSender); ok {
		return ps.SendParts(ctx, h, parts...)
	}
	if len(parts) == 1 {
		return l.Send(ctx, h, parts[0])
	}
	return l.Send(ctx, h, bytes.Join(parts, nil))
}

// Listener accepts authenticated links from many peers. Connections that
// fail the handshake are logged (Config.Logger) and dropped; Accept only
// ever returns authenticated links.
type Listener interface {
	// Accept waits for the next authenticated link.
	Accept(ctx context.Context) (Link, error)
	// Addr is the address peers dial.
	Addr() net.Addr
	// Close stops listening, aborts handshakes in progress and closes links
	// accepted but not yet returned by Accept. Links already returned stay
	// open. It is idempotent.
	Close() error
}

// Network creates listeners and dials links on one transport.
type Network interface {
	Kind() Kind
	// Listen listens on addr ("host:port" for sockets, any name for mem).
	Listen(addr string, cfg Config) (Listener, error)
	// Dial connects to the listener at addr and authenticates; peer is the
	// rank expected there, or AnyRank.
	Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error)
}

// NetworkFor returns the Network of a socket transport: KindTCP, KindTLS,
// KindQUIC or KindUDP. Use NewMemNetwork for KindMem.
func NetworkFor(k Kind) (Network, error) {
	switch k {
	case KindTCP:
		return tcpNetwork{tls: false}, nil
	case KindTLS:
		return tcpNetwork{tls: true}, nil
	case KindQUIC:
		return quicNetwork{}, nil
	case KindUDP:
		return udpNetwork{}, nil
	}
	return nil, fmt.Errorf("%w: no socket network for transport %v", ErrBadConfig, k)
}

// Listen listens on addr with the socket transport k (see NetworkFor).
func Listen(k Kind, addr string, cfg Config) (Listener, error) {
	n, err := NetworkFor(k)
	if err != nil {
		return nil, err
	}
	return n.Listen(addr, cfg)
}

// Dial dials the listener at addr with the socket transport k and
// authenticates; peer is the rank expected there, or AnyRank.
func Dial(ctx context.Context, k Kind, addr string, peer int, cfg Config) (Link, error) {
	n, err := NetworkFor(k)
	if err != nil {
		return nil, err
	}
	return n.Dial(ctx, addr, peer, cfg)
}
