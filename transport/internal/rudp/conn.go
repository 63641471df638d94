// The Conn type and its state, construction and start, the net.Conn
// accessors and Stats. The rest of it: conn_send.go (the send path),
// conn_recv.go (the receive path and reassembly), conn_ack.go
// (acknowledgements and loss detection), conn_timer.go (timers and
// retransmission timeouts) and conn_close.go (closing and teardown).

package rudp

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is a reliable, ordered, full-duplex byte stream over UDP. It
// implements net.Conn.
//
// Goroutines: a timer goroutine per Conn, plus the socket reader (owned by
// the Conn when dialled, by the Listener otherwise). Close stops them and
// waits. Transmission is done by whichever goroutine holds the send token
// (Write, the reader after an ACK, the timer, Read for a window update):
// see flush.
//
// Lock order: readMu / writeMu, then mu. Listener.mu is never held while
// taking a Conn's mu (nor the reverse).
type Conn struct {
	cfg      Config
	ep       endpoint
	laddr    net.Addr
	raddr    net.Addr
	peer     netip.AddrPort
	isClient bool
	epoch    time.Time
	auth     *authKey // nil: control packets are not authenticated
	// promote, set on a listener's connections, hands the connection to
	// Accept once the handshake is complete (called without mu).
	promote func()
	rstLim  rstLimiter // reflected RSTs (dialled: used by its reader only)

	readMu  sync.Mutex
	writeMu sync.Mutex
	rdl     *deadline
	wdl     *deadline

	quit        chan struct{} // closed at teardown
	established chan struct{} // closed when the handshake completes
	closing     chan struct{} // closed by Close
	readable    chan struct{} // capacity 1: data, EOF or an error for Read
	writable    chan struct{} // capacity 1: send buffer space for Write
	wg          sync.WaitGroup
	closeOnce   sync.Once

	drops dropCounters // updated by the reader without mu

	mu sync.Mutex
	// Everything below is guarded by mu.
	state      connState
	err        error // why the connection died
	userClosed bool
	wClosed    bool // CloseWrite or Close queued the FIN
	finish     bool // FIN acknowledged after Close: tear down
	lingerAt   time.Duration

	localID, peerID uint64
	maxPacket       int // negotiated datagram size
	maxPayload      int // payload bytes per data packet
	slotCharge      int // receive-buffer charge of one full packet
	maxWnd          int // receive window limit in packets
	ackEvery        int // in-order packets per immediate ACK

	timer   *time.Timer
	timerAt time.Duration // 0: not armed

	lastSent  time.Duration
	lastRecv  time.Duration
	synDue    bool // client: send SYN
	synAt     time.Duration
	synCount  int
	synackDue bool          // server: send SYNACK
	lastProbe time.Duration // server: when probe last asked for a packet
	pingDue   bool

	// Send token (see flush).
	sending  bool
	again    bool
	deferred []*segment // acknowledged while a batch was being written
	batch    [][]byte
	ctrlSyn  []byte
	ctrlAck  []byte
	fresh    []span

	snd   sendState
	rcv   recvState
	rtt   rttEstimator
	cc    cubic
	pace  pacer
	stats Stats
}

type connState uint8

const (
	stateSynSent connState = iota
	stateEstablished
	stateDead
	// stateSynRcvd: a listener's connection that has answered a SYN but
	// not yet received a packet naming its own (fresh, random) id, which
	// proves the peer got the SYNACK. Only then does Accept return it.
	stateSynRcvd
)

// sendState is the sending half: sequence numbers una <= nxt <= end.
type sendState struct {
	una, nxt, end uint64
	queue         segRing  // segments [una, end); nil where SACKed
	sacked        rangeSet // SACKed sequence numbers >= una
	flight        segList  // in flight, by transmission number
	lost          segList  // awaiting retransmission, by seq
	inflight      int      // bytes in flight (segment.wire)
	charge        int      // buffer bytes held by queued segments
	peerEdge      uint64   // the peer accepts seq < peerEdge
	nextTx        uint64   // next transmission number
	largestAcked  uint64   // highest transmission number acknowledged
	ptoAt         time.Duration
	ptoCount      int           // probes since the last acknowledgement progress
	rtoCount      int           // RTO backoff exponent
	lastProgress  time.Duration // last acknowledgement of new data (or start of a flight)
	undo          rtoUndo
	lossAt        time.Duration
	pacingAt      time.Duration
	probes        int // packets allowed past cwnd and the pacer (PTO probes)
	cwndLimited   bool
	stop          uint8 // why the last collect stopped sending
	finQueued     bool
	finAcked      bool
}

// rtoUndo remembers the congestion state before a retransmission timeout,
// to restore it if the timeout turns out to have been spurious.
type rtoUndo struct {
	pending  bool
	spurious bool
	tx       uint64 // first transmission number after the timeout
	cwnd     int
	ssthresh int
}

// recvState is the receiving half.
type recvState struct {
	nxt      uint64   // next in-order seq expected
	edge     uint64   // advertised right edge of the window (never shrinks)
	advEdge  uint64   // edge last sent to the peer
	ooo      []rxSlot // out-of-order packets, indexed by seq & (len-1)
	have     rangeSet // seqs held in ooo
	lastOOO  uint64
	readq    []rxChunk
	readHead int
	readable int // bytes in readq
	held     int // buffer bytes held (readq and ooo)
	eof      bool
	finSeen  bool
	finSeq   uint64
	echoTs   uint32
	echoAt   time.Duration
	haveEcho bool
	unacked  int // data packets received since the last ACK was sent
	ackNow   bool
	ackAt    time.Duration
	sack     [maxSACKBlocks]sackBlock
}

type dropCounters struct {
	malformed atomic.Uint64
	foreign   atomic.Uint64
	unauth    atomic.Uint64
}

const maxBatch = 32

// ackBytes is the in-order data after which an ACK is sent at once.
const ackBytes = 16 << 10

// Reasons collectLocked stopped sending data.
const (
	stopNone uint8 = iota
	stopCwnd
	stopPacing
)

func newConn(cfg Config, ep endpoint, laddr, raddr net.Addr, peer netip.AddrPort, client bool) *Conn {
	c := &Conn{
		cfg:         cfg,
		ep:          ep,
		laddr:       laddr,
		raddr:       raddr,
		peer:        peer,
		isClient:    client,
		epoch:       time.Now().Add(-time.Second), // now() is never 0
		rdl:         newDeadline(),
		wdl:         newDeadline(),
		quit:        make(chan struct{}),
		established: make(chan struct{}),
		closing:     make(chan struct{}),
		readable:    make(chan struct{}, 1),
		writable:    make(chan struct{}, 1),
		ctrlSyn:     make([]byte, maxCtrlLen),
		ctrlAck:     make([]byte, maxHeaderLen),
		batch:       make([][]byte, 0, maxBatch+2),
	}
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	now := c.now()
	c.lastRecv = now
	c.lastSent = now
	return c
}

// setPacketSize fixes the negotiated datagram size and what follows from it.
func (c *Conn) setPacketSize(n int) {
	c.maxPacket = n
	c.maxPayload = n - dataOff
	c.slotCharge = bufCharge(n)
	c.maxWnd = max(2, c.cfg.RecvBuffer/c.slotCharge)
	// Acknowledge every second packet, but not more often than every
	// ackBytes: small packets would otherwise cost one ACK per 3 KB.
	c.ackEvery = max(2, ackBytes/c.maxPayload)
	size := 1
	for size < c.maxWnd {
		size <<= 1
	}
	c.rcv.ooo = make([]rxSlot, size)
	c.cc = newCubic(c.maxPayload+headerLen, c.cfg.InitialWindow, 4*max(c.cfg.SendBuffer, c.cfg.RecvBuffer))
	c.updateEdgeLocked()
}

// start launches the timer goroutine (and the reader when owned).
func (c *Conn) start(reader func()) {
	if reader != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			reader()
		}()
	}
	c.wg.Add(1)
	go c.timerLoop()
}

func (c *Conn) now() time.Duration { return time.Since(c.epoch) }

func usec(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

// LocalAddr returns the local UDP address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's UDP address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets both the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read calls, pending ones included.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rdl.set(t); return nil }

// SetWriteDeadline sets the deadline for Write calls, pending ones included.
// Write only waits for send-buffer space; data already accepted is still
// delivered.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Stats is a snapshot of a connection's counters and estimates.
type Stats struct {
	PacketsSent         uint64 // datagrams sent (all types)
	PacketsReceived     uint64 // datagrams accepted for this connection
	BytesSent           uint64 // UDP payload bytes sent, headers included
	BytesReceived       uint64
	DataPacketsSent     uint64 // DATA packets, retransmissions included
	DataPacketsReceived uint64
	Retransmissions     uint64 // DATA packets sent again
	FastRetransmits     uint64 // losses inferred from acknowledgements (SACK)
	Probes              uint64 // tail-loss probes (a timer resent one packet)
	Timeouts            uint64 // retransmission timeouts (window collapsed)
	SpuriousTimeouts    uint64 // timeouts undone because the originals were acknowledged
	LossEvents          uint64 // congestion-window reductions
	DuplicatesDropped   uint64 // DATA packets already held or delivered
	OutOfOrder          uint64 // DATA packets that arrived ahead of a gap
	OutsideWindow       uint64 // DATA packets beyond the advertised window
	Malformed           uint64 // datagrams that failed validation
	Foreign             uint64 // well-formed datagrams for another connection
	// Unauthenticated counts control packets (SYN, SYNACK, RST) dropped
	// because their MAC was missing or wrong (only with Config.Key; a
	// listener's connections count them in ListenerStats instead).
	Unauthenticated uint64
	// StaleHandshakes counts SYNs and SYNACKs of this connection that
	// arrived after its handshake was over (late duplicates or replays):
	// ignored.
	StaleHandshakes uint64

	SRTT, RTTVar, MinRTT, RTO time.Duration

	CongestionWindow   int     // bytes
	SlowStartThreshold int     // bytes (large before the first loss)
	BytesInFlight      int     // bytes
	PacingRate         float64 // bytes per second, 0 when not pacing
	PeerWindow         int     // packets the peer accepts beyond what it acknowledged
	SendQueued         int     // buffer bytes held by unacknowledged data
	RecvBuffered       int     // bytes ready for Read
	MaxPacketSize      int     // negotiated datagram size
}

// Stats returns a snapshot of the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Malformed = c.drops.malformed.Load()
	st.Foreign = c.drops.foreign.Load()
	st.Unauthenticated = c.drops.unauth.Load()
	st.SRTT = c.rtt.srtt
	st.RTTVar = c.rtt.rttvar
	st.MinRTT = c.rtt.min
	st.RTO = c.rtoLocked()
	st.CongestionWindow = c.cc.cwnd
	st.SlowStartThreshold = c.cc.ssthresh
	st.LossEvents = uint64(c.cc.lossEvents)
	st.BytesInFlight = c.snd.inflight
	if !c.cfg.DisablePacing && c.rtt.samples > 0 {
		st.PacingRate = c.cc.pacingRate(c.rtt.srtt)
	}
	if c.snd.peerEdge > c.snd.una {
		st.PeerWindow = int(c.snd.peerEdge - c.snd.una)
	}
	st.SendQueued = c.snd.charge
	st.RecvBuffered = c.rcv.readable
	st.MaxPacketSize = c.maxPacket
	return st
}

var _ net.Conn = (*Conn)(nil)
