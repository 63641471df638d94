// Package rudp is hetcomm's reliable UDP: an ordered, full-duplex byte
// stream over UDP datagrams that implements net.Conn, so the transport
// layer runs its framing and authentication handshake over it exactly as
// over TCP.
//
// # API
//
// Dial and DialFrom open a connection from their own socket (DialFrom binds
// a local address, so a rail's traffic leaves through its NIC); Listen
// accepts many connections on one socket, demultiplexed by the peer's
// address and checked by connection id. DialPacketConn and
// ListenPacketConn take a net.PacketConn instead, such as an endpoint of
// MemNetwork, the in-memory network with seeded loss, duplication,
// reordering, delay and rate limits used by the tests. Config has
// documented zero values, DefaultConfig and Validate. Conn.Stats reports
// counters and the RTT, window and pacing estimates.
//
// # Protocol
//
// The wire format (docs/rudp.md has the table) is a 36-byte big-endian
// header with optional SACK blocks, then payload. In brief:
//
//   - Setup: SYN carries the client's random 64-bit connection id and its
//     largest datagram; SYNACK returns the server's id and the negotiated
//     size. Every later packet names the receiver's id, so stray datagrams
//     and those of an earlier connection from the same address are dropped.
//     Accept returns a connection once the client has named the server's
//     id (it received the SYNACK). A SYN never replaces a connection: one
//     with a new id from a known address makes the listener probe the old
//     connection, and a peer that restarted on that address answers with
//     an RST for its old id.
//   - Authentication: with Config.Key (the transport sets the job's
//     secret) SYN, SYNACK and RST carry an HMAC-SHA256 tag under a derived
//     key, and control packets without a valid one are dropped before they
//     reach any connection, so nobody without the key can open, reset or
//     tear down a connection. Data and acknowledgements carry no MAC: the
//     random connection ids stop blind injection.
//   - Data: the stream is cut into packets numbered by a per-direction
//     sequence number (32 bits on the wire, extended to 64 bits). Every
//     packet acknowledges cumulatively, advertises the receive window in
//     packets (so a slow reader is never overrun), and carries up to 4 SACK
//     blocks (pure ACKs up to 16). The receiver reassembles in order, drops
//     duplicates and acknowledges out-of-order data at once, and otherwise
//     every max(2, 16 KiB/payload) packets or within AckDelay.
//   - Loss recovery: every packet carries a microsecond timestamp that the
//     peer echoes plus the time it held it, giving unambiguous RTT samples
//     even for retransmissions; SRTT, RTTVAR and the RTO follow RFC 6298
//     with exponential backoff. A packet is declared lost, and only it is
//     resent, once a packet sent three transmissions later has been
//     acknowledged or after 9/8 of the RTT (RFC 9002's thresholds, using
//     SACK evidence; lower with fewer than 4 packets in flight). Timers
//     first send tail-loss probes (one packet, backed off); only a whole
//     RTO without progress collapses the window and resends everything in
//     flight. The last packet of a flight carries ACKNOW so that it is not
//     held by a delayed ACK. Unlike the
//     stop-and-wait or go-back-N recovery of URTP (H-Libra) and PLUS (MOL),
//     a loss costs one retransmission, not a window.
//   - Congestion control: slow start, then CUBIC (RFC 9438) with its
//     Reno-friendly region and beta 0.7, one reduction per loss episode, a
//     4-packet minimum window, undo of spurious timeouts (F-RTO), and a
//     token-bucket pacer at 1.25 (2 in slow start) x cwnd/SRTT, so it backs
//     off under loss and shares a link with TCP.
//   - Liveness and close: PINGs after KeepAlive of silence; IdleTimeout
//     without hearing anything fails the connection with ErrPeerTimeout.
//     A FIN occupies a sequence number (CloseWrite sends one; the peer's
//     Read returns io.EOF); Close sends the queued data and a FIN, waits up
//     to Linger for their acknowledgement and sends an RST if the peer had
//     not finished, so its Writes fail with ErrReset instead of hanging.
//
// # Datagram size
//
// Config.MaxPacketSize zero picks the size per path: to a loopback address
// (lo's MTU is 65536) the largest UDP payload, 65507 bytes, so a 4 MiB
// write is 64 datagrams and loopback runs at gigabytes per second;
// otherwise min(1400, the local interface's MTU minus the IP and UDP
// headers), which does not fragment on Ethernet even through a tunnel.
// Both ends use the smaller proposal.
//
// # Concurrency
//
// Each Conn has a timer goroutine, and a socket reader when it owns its
// socket (the Listener's reader serves accepted connections). Close stops
// and waits for them. Packets are sent by whichever goroutine holds the
// connection's send token, so a Write usually transmits its own data
// without a goroutine hand-off. Read, Write and the deadline setters may be
// called concurrently.
package rudp
