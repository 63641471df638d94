package transport

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
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

// ProgressCounter is a Link that counts the bytes of large payloads as
// they arrive, so that an upper layer can tell a peer that is in the
// middle of sending a long message from one that went silent in the
// middle of it. Stream links (tcp, tls, udp), quic links, RailSets and
// shaped links over any of these implement it.
type ProgressCounter interface {
	// Progress returns the payload bytes read from the peer so far; the
	// count only grows.
	Progress() uint64
}

// Progress returns l's payload bytes read so far, and whether l counts
// them (ProgressCounter).
func Progress(l Link) (uint64, bool) {
	if pc, ok := l.(ProgressCounter); ok {
		return pc.Progress(), true
	}
	return 0, false
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
// KindQUIC or KindUDP. Use NewMemNetwork for KindMem. KindQUIC lives in
// package github.com/hetcomm/hetcomm/transport/quic, which registers it
// (RegisterNetwork) when it is linked in; comm links it in. Without it,
// NetworkFor(KindQUIC) fails with an error that matches ErrBadConfig and
// names that package.
func NetworkFor(k Kind) (Network, error) {
	switch k {
	case KindTCP:
		return tcpNetwork{tls: false}, nil
	case KindTLS:
		return tcpNetwork{tls: true}, nil
	case KindUDP:
		return udpNetwork{}, nil
	}
	return networks.lookup(k)
}

// RegisterNetwork makes n the Network of transport k for NetworkFor,
// Listen and Dial. A transport that lives in a package of its own, so that
// programs that do not use it do not link its dependencies, calls it from
// that package's init function; a program then enables the transport by
// importing the package, for its side effects only if it needs nothing
// else from it (as with database/sql drivers and image formats):
//
//	import _ "github.com/hetcomm/hetcomm/transport/quic"
//
// Only such transports can be registered: today KindQUIC. RegisterNetwork
// panics if k is built in (mem, tcp, tls, udp) or unknown, if n is nil or
// n.Kind() is not k, or if k is already registered: each is a programming
// error, found when the program starts.
func RegisterNetwork(k Kind, n Network) {
	networks.register(k, n)
}

// pluggable maps the transports that live in their own package to that
// package's import path.
var pluggable = map[Kind]string{
	KindQUIC: "github.com/hetcomm/hetcomm/transport/quic",
}

// registry holds the Networks registered with RegisterNetwork.
type registry struct {
	mu   sync.RWMutex
	nets map[Kind]Network
}

// networks is the registry of RegisterNetwork and NetworkFor.
var networks registry

func (r *registry) register(k Kind, n Network) {
	if _, ok := pluggable[k]; !ok {
		panic(fmt.Sprintf("transport: RegisterNetwork(%v): only transports in their own package can be registered", k))
	}
	if n == nil {
		panic(fmt.Sprintf("transport: RegisterNetwork(%v): nil Network", k))
	}
	if n.Kind() != k {
		panic(fmt.Sprintf("transport: RegisterNetwork(%v): the Network is of transport %v", k, n.Kind()))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.nets[k]; dup {
		panic(fmt.Sprintf("transport: RegisterNetwork(%v) called twice", k))
	}
	if r.nets == nil {
		r.nets = make(map[Kind]Network)
	}
	r.nets[k] = n
}

func (r *registry) lookup(k Kind) (Network, error) {
	r.mu.RLock()
	n := r.nets[k]
	r.mu.RUnlock()
	if n != nil {
		return n, nil
	}
	if pkg, ok := pluggable[k]; ok {
		return nil, fmt.Errorf("%w: transport %v is not linked into this program: import _ %q", ErrBadConfig, k, pkg)
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
