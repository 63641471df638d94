package rudp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Limits of the datagram size.
const (
	// MinPacketSize is the smallest MaxPacketSize accepted by Validate.
	MinPacketSize = 256
	// MaxPacketSizeLimit is the largest UDP payload over IPv4 (65535 - 20 - 8).
	MaxPacketSizeLimit = 65507
	// DefaultNetworkPacketSize is the datagram size used on paths that leave
	// the host when Config.MaxPacketSize is zero: it fits a 1500-byte
	// Ethernet MTU with room for tunnels (IPv6 40 + UDP 8 + 52 spare).
	DefaultNetworkPacketSize = 1400
)

// Config tunes a connection or a listener. The zero value of every field
// means "use the default" (the value DefaultConfig shows); durations that
// can be switched off say so.
type Config struct {
	// MaxPacketSize is the largest UDP payload (rudp header included) this
	// end sends or accepts. Zero picks it per path: when the remote address
	// is a loopback address (traffic never leaves lo, whose MTU is 65536)
	// it is 65507 for IPv4 and 65488 for IPv6, so a 4 MiB write crosses in
	// 64 datagrams; otherwise it is min(1400, MTU of the local interface
	// minus the IP and UDP headers), which never fragments on an Ethernet
	// path. A PacketConn that has a method MTU() int (the in-memory
	// network) is asked instead. The two ends use the smaller of their
	// values (negotiated in the handshake). Set it explicitly, for example
	// to 8972, to use jumbo frames.
	MaxPacketSize int

	// SendBuffer bounds the bytes that Write may queue before they are
	// acknowledged; Write blocks beyond it. Default 8 MiB.
	SendBuffer int

	// RecvBuffer bounds the bytes held for the reader (in order and out of
	// order); it sets the receive window advertised to the peer, so a slow
	// reader is never overrun. Default 8 MiB.
	RecvBuffer int

	// SocketBuffer is the SO_SNDBUF/SO_RCVBUF asked for on sockets this
	// package opens or is given (when they are *net.UDPConn). As root the
	// kernel limit net.core.rmem_max is bypassed. Default 8 MiB; negative
	// leaves the operating system's default.
	SocketBuffer int

	// InitialRTO is the retransmission timeout before any RTT sample (also
	// the first SYN retransmission). Default 200 ms.
	InitialRTO time.Duration
	// MinRTO and MaxRTO clamp the RFC 6298 retransmission timeout
	// (SRTT + 4*RTTVAR + AckDelay). Defaults 10 ms and 1 s.
	MinRTO time.Duration
	MaxRTO time.Duration

	// AckDelay is the longest a receiver holds back an acknowledgement
	// (every max(2, 16 KiB/payload) packets, out-of-order data, FIN, PING
	// and ACKNOW are acknowledged at once). Default 1 ms.
	AckDelay time.Duration

	// KeepAlive is the idle time after which a PING is sent so that the
	// peer answers and both sides know the other is alive. Default 1 s;
	// negative disables keepalives (IdleTimeout then fires on a silent but
	// healthy peer).
	KeepAlive time.Duration

	// IdleTimeout: when nothing at all is received for this long the
	// connection fails with ErrPeerTimeout and every blocked Read and Write
	// returns. Default 10 s; negative disables it.
	IdleTimeout time.Duration

	// Linger is how long Close waits for queued data and the FIN to be
	// acknowledged before aborting. Default 5 s; negative makes Close abort
	// at once (an RST is sent).
	Linger time.Duration

	// AcceptBacklog is the number of connections a Listener queues for
	// Accept; further SYNs are dropped. Default 128.
	AcceptBacklog int

	// InitialWindow is the initial congestion window in packets (RFC 6928
	// uses 10). Default 10.
	InitialWindow int

	// DisablePacing turns the token-bucket pacer off (packets then leave in
	// congestion-window bursts). Pacing is on by default.
	DisablePacing bool

	// Key authenticates connection control: with a key, every SYN, SYNACK
	// and RST carries a MAC (HMAC-SHA256, truncated to 16 bytes) under a
	// key derived from it, and control packets whose MAC is missing or
	// wrong are dropped and counted (Stats.Unauthenticated,
	// ListenerStats.Unauthenticated) without touching any connection. Both
	// ends need the same key. The transport's UDP network sets it to the
	// job's secret. At least MinKeyLen bytes; it is read when Listen or
	// Dial is called and never sent. docs/rudp.md, "Authentication", has
	// the threat model.
	//
	// nil (the zero value) means no authentication, for rudp used alone
	// and in tests: control packets carry no MAC and are accepted from
	// anyone who can send to the socket, so connections are then protected
	// only by their random 64-bit ids (a blind sender cannot guess them;
	// one that sees the traffic can reset a connection) and a listener
	// accepts any SYN.
	Key []byte
}

// MinKeyLen is the shortest non-empty Config.Key that Validate accepts.
const MinKeyLen = 16

// Defaults used for zero-valued Config fields.
const (
	defaultSendBuffer    = 8 << 20
	defaultRecvBuffer    = 8 << 20
	defaultSocketBuffer  = 8 << 20
	defaultInitialRTO    = 200 * time.Millisecond
	defaultMinRTO        = 10 * time.Millisecond
	defaultMaxRTO        = time.Second
	defaultAckDelay      = time.Millisecond
	defaultKeepAlive     = time.Second
	defaultIdleTimeout   = 10 * time.Second
	defaultLinger        = 5 * time.Second
	defaultAcceptBacklog = 128
	defaultInitialWindow = 10
)

// DefaultConfig returns the configuration used for zero-valued fields, with
// every field spelled out (MaxPacketSize stays 0: chosen per path).
func DefaultConfig() Config {
	return Config{
		SendBuffer:    defaultSendBuffer,
		RecvBuffer:    defaultRecvBuffer,
		SocketBuffer:  defaultSocketBuffer,
		InitialRTO:    defaultInitialRTO,
		MinRTO:        defaultMinRTO,
		MaxRTO:        defaultMaxRTO,
		AckDelay:      defaultAckDelay,
		KeepAlive:     defaultKeepAlive,
		IdleTimeout:   defaultIdleTimeout,
		Linger:        defaultLinger,
		AcceptBacklog: defaultAcceptBacklog,
		InitialWindow: defaultInitialWindow,
	}
}

// Validate rejects nonsense early. It accepts the zero Config.
func (c Config) Validate() error {
	if c.MaxPacketSize != 0 && (c.MaxPacketSize < MinPacketSize || c.MaxPacketSize > MaxPacketSizeLimit) {
		return fmt.Errorf("rudp: MaxPacketSize %d outside [%d, %d]", c.MaxPacketSize, MinPacketSize, MaxPacketSizeLimit)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"SendBuffer", c.SendBuffer}, {"RecvBuffer", c.RecvBuffer}, {"AcceptBacklog", c.AcceptBacklog}, {"InitialWindow", c.InitialWindow}} {
		if f.v < 0 {
			return fmt.Errorf("rudp: negative %s %d", f.name, f.v)
		}
	}
	if c.SendBuffer != 0 && c.SendBuffer < MaxPacketSizeLimit {
		return fmt.Errorf("rudp: SendBuffer %d smaller than one packet (%d)", c.SendBuffer, MaxPacketSizeLimit)
	}
	if c.RecvBuffer != 0 && c.RecvBuffer < 2*MaxPacketSizeLimit {
		return fmt.Errorf("rudp: RecvBuffer %d smaller than two packets (%d)", c.RecvBuffer, 2*MaxPacketSizeLimit)
	}
	if c.SendBuffer > 1<<30 || c.RecvBuffer > 1<<30 {
		return errors.New("rudp: SendBuffer and RecvBuffer are limited to 1 GiB")
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"InitialRTO", c.InitialRTO}, {"MinRTO", c.MinRTO}, {"MaxRTO", c.MaxRTO}, {"AckDelay", c.AckDelay}} {
		if f.v < 0 {
			return fmt.Errorf("rudp: negative %s %v", f.name, f.v)
		}
	}
	if len(c.Key) > 0 && len(c.Key) < MinKeyLen {
		return fmt.Errorf("rudp: Key of %d bytes, need at least %d (or none)", len(c.Key), MinKeyLen)
	}
	r := c.resolved()
	if r.MinRTO > r.MaxRTO {
		return fmt.Errorf("rudp: MinRTO %v greater than MaxRTO %v", r.MinRTO, r.MaxRTO)
	}
	if r.AckDelay >= r.MinRTO {
		return fmt.Errorf("rudp: AckDelay %v must be below MinRTO %v", r.AckDelay, r.MinRTO)
	}
	if r.KeepAlive > 0 && r.IdleTimeout > 0 && r.IdleTimeout < 2*r.KeepAlive {
		return fmt.Errorf("rudp: IdleTimeout %v must be at least twice KeepAlive %v", r.IdleTimeout, r.KeepAlive)
	}
	return nil
}

// resolved returns c with zero fields replaced by defaults.
func (c Config) resolved() Config {
	d := DefaultConfig()
	if c.SendBuffer == 0 {
		c.SendBuffer = d.SendBuffer
	}
	if c.RecvBuffer == 0 {
		c.RecvBuffer = d.RecvBuffer
	}
	if c.SocketBuffer == 0 {
		c.SocketBuffer = d.SocketBuffer
	}
	if c.InitialRTO == 0 {
		c.InitialRTO = d.InitialRTO
	}
	if c.MinRTO == 0 {
		c.MinRTO = d.MinRTO
	}
	if c.MaxRTO == 0 {
		c.MaxRTO = d.MaxRTO
	}
	if c.AckDelay == 0 {
		c.AckDelay = d.AckDelay
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = d.KeepAlive
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.Linger == 0 {
		c.Linger = d.Linger
	}
	if c.AcceptBacklog == 0 {
		c.AcceptBacklog = d.AcceptBacklog
	}
	if c.InitialWindow == 0 {
		c.InitialWindow = d.InitialWindow
	}
	return c
}

// mtuer is implemented by PacketConns that know their datagram limit (the
// in-memory network).
type mtuer interface{ MTU() int }

// pathPacketSize picks the datagram size for a path when
// Config.MaxPacketSize is zero (see its documentation).
func pathPacketSize(pc any, local, remote netip.Addr) int {
	if m, ok := pc.(mtuer); ok && m.MTU() > 0 {
		return clampPacket(m.MTU())
	}
	remote = remote.Unmap()
	if remote.IsLoopback() {
		if remote.Is4() {
			return MaxPacketSizeLimit
		}
		return 65536 - 40 - 8
	}
	size := DefaultNetworkPacketSize
	if mtu := interfaceMTU(local.Unmap()); mtu > 0 {
		overhead := 28
		if !local.Unmap().Is4() {
			overhead = 48
		}
		size = min(size, mtu-overhead)
	}
	return clampPacket(size)
}

func clampPacket(n int) int {
	return max(MinPacketSize, min(n, MaxPacketSizeLimit))
}

// interfaceMTU returns the MTU of the interface holding addr, or 0.
func interfaceMTU(addr netip.Addr) int {
	if !addr.IsValid() || addr.IsUnspecified() {
		return 0
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if pfx, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(pfx.IP); ok && ip.Unmap() == addr {
					return ifc.MTU
				}
			}
		}
	}
	return 0
}
