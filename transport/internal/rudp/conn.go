package rudp

import (
	"io"
	"net"
	"net/netip"
	"os"
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
	synackDue bool // server: send SYNACK
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
		ctrlSyn:     make([]byte, headerLen+synPayload),
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

// ---------------------------------------------------------------------------
// net.Conn

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

// Read reads in-order stream data. It returns io.EOF after the peer's FIN,
// ErrReset or ErrPeerTimeout (wrapped in *net.OpError) when the connection
// failed, and a timeout error matching os.ErrDeadlineExceeded at the read
// deadline.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	for {
		c.mu.Lock()
		if c.userClosed {
			c.mu.Unlock()
			return 0, opError("read", c, ErrClosed)
		}
		if c.rdl.expired() {
			c.mu.Unlock()
			return 0, opError("read", c, os.ErrDeadlineExceeded)
		}
		if c.rcv.readable > 0 {
			if len(p) == 0 {
				c.mu.Unlock()
				return 0, nil
			}
			n := c.consumeLocked(p)
			update := c.windowUpdateLocked()
			c.mu.Unlock()
			if update {
				c.flush()
			}
			return n, nil
		}
		if c.rcv.eof {
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.state == stateDead {
			err := c.err
			c.mu.Unlock()
			return 0, opError("read", c, err)
		}
		c.mu.Unlock()
		select {
		case <-c.readable:
		case <-c.rdl.wait():
		case <-c.quit:
		case <-c.closing:
		}
	}
}

// consumeLocked copies buffered data into p and releases drained buffers.
func (c *Conn) consumeLocked(p []byte) int {
	n := 0
	r := &c.rcv
	for n < len(p) && r.readHead < len(r.readq) {
		ch := &r.readq[r.readHead]
		k := copy(p[n:], ch.pb.b[ch.off:ch.end])
		ch.off += k
		n += k
		if ch.off == ch.end {
			r.held -= cap(ch.pb.b)
			putBuf(ch.pb)
			*ch = rxChunk{}
			r.readHead++
		}
	}
	r.readable -= n
	if r.readHead == len(r.readq) {
		r.readq = r.readq[:0]
		r.readHead = 0
	} else if r.readHead > 64 && r.readHead*2 > len(r.readq) {
		k := copy(r.readq, r.readq[r.readHead:])
		clear(r.readq[k:])
		r.readq = r.readq[:k]
		r.readHead = 0
	}
	if r.readable > 0 {
		signal(c.readable) // let a concurrent reader continue
	}
	return n
}

// windowUpdateLocked recomputes the window after Read and reports whether
// it opened enough to tell the peer at once.
func (c *Conn) windowUpdateLocked() bool {
	c.updateEdgeLocked()
	r := &c.rcv
	if r.advEdge <= r.nxt || r.edge-r.advEdge >= uint64(max(1, c.maxWnd/4)) {
		r.ackNow = true
		return true
	}
	return false
}

func (c *Conn) updateEdgeLocked() {
	r := &c.rcv
	if c.slotCharge == 0 {
		return // before the handshake fixed the packet size
	}
	free := c.cfg.RecvBuffer - r.held
	if free < 0 {
		free = 0
	}
	w := min(free/c.slotCharge, c.maxWnd)
	if e := r.nxt + uint64(w); e > r.edge {
		r.edge = e
	}
}

// Write queues p on the stream. It blocks while the send buffer is full and
// returns once all of p is queued (not acknowledged).
func (c *Conn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	written := 0
	for {
		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			return written, opError("write", c, err)
		}
		if c.wdl.expired() {
			c.mu.Unlock()
			return written, opError("write", c, os.ErrDeadlineExceeded)
		}
		if len(p) == 0 {
			c.mu.Unlock()
			return written, nil
		}
		// Small writes fill the last segment if it has not left yet.
		if c.snd.end > c.snd.nxt {
			t := c.snd.queue.at(int(c.snd.end - 1 - c.snd.una))
			if !t.fin {
				room := min(len(t.buf.b)-dataOff, c.maxPayload) - t.n
				if room > 0 {
					k := copy(t.buf.b[dataOff+t.n:dataOff+t.n+room], p)
					t.n += k
					p = p[k:]
					written += k
					c.mu.Unlock()
					continue
				}
			}
		}
		if c.snd.charge >= c.cfg.SendBuffer {
			c.mu.Unlock()
			select {
			case <-c.writable:
			case <-c.wdl.wait():
			case <-c.quit:
			case <-c.closing:
			}
			continue
		}
		maxPayload := c.maxPayload
		c.mu.Unlock()

		n := min(len(p), maxPayload)
		s := newSegment(dataOff + n)
		copy(s.buf.b[dataOff:], p[:n])
		s.n = n

		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			freeSegment(s)
			return written, opError("write", c, err)
		}
		c.enqueueLocked(s)
		c.mu.Unlock()
		p = p[n:]
		written += n
		c.flush()
	}
}

func (c *Conn) writeErrLocked() error {
	switch {
	case c.userClosed || c.wClosed:
		return ErrClosed
	case c.state == stateDead:
		return c.err
	}
	return nil
}

func (c *Conn) enqueueLocked(s *segment) {
	s.seq = c.snd.end
	s.state = segQueued
	c.snd.end++
	c.snd.queue.push(s)
	c.snd.charge += cap(s.buf.b)
}

// CloseWrite sends a FIN after the queued data: the peer's Read returns
// io.EOF once it has read everything. Reading continues to work.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.state == stateDead {
		err := c.err
		c.mu.Unlock()
		return opError("close", c, err)
	}
	if c.userClosed {
		c.mu.Unlock()
		return opError("close", c, ErrClosed)
	}
	c.queueFINLocked()
	c.mu.Unlock()
	c.flush()
	return nil
}

func (c *Conn) queueFINLocked() {
	c.wClosed = true
	if c.snd.finQueued {
		return
	}
	c.snd.finQueued = true
	s := newSegment(dataOff)
	s.fin = true
	c.enqueueLocked(s)
}

// Close sends the queued data and a FIN, waits (at most Config.Linger) for
// them to be acknowledged, then stops the connection's goroutines and
// releases its socket. If the peer had not finished its own direction it
// is sent an RST, so its Writes fail instead of hanging. Close is
// idempotent; blocked Reads and Writes return an error matching
// net.ErrClosed.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.userClosed = true
		close(c.closing)
		abort := false
		switch {
		case c.state == stateDead:
		case c.cfg.Linger < 0 || c.state != stateEstablished:
			abort = true
		default:
			c.queueFINLocked()
			c.lingerAt = c.now() + c.cfg.Linger
			c.armLocked(c.lingerAt)
			c.checkFinishLocked()
		}
		fin := c.finish
		c.mu.Unlock()
		if abort || fin {
			c.teardown(ErrClosed, true)
		} else {
			c.flush()
		}
	})
	<-c.quit
	c.wg.Wait()
	c.ep.wait()
	return nil
}

// checkFinishLocked decides whether a closed connection is done.
func (c *Conn) checkFinishLocked() {
	// The FIN alone may be SACKed while earlier packets are missing: done
	// only when the cumulative acknowledgement covers the whole stream.
	if c.userClosed && c.snd.finAcked && c.snd.una == c.snd.end {
		c.finish = true
	}
}

// teardown kills the connection once: blocked calls return cause (or
// buffered data and EOF), an RST tells the peer if rst is set and the peer
// has not finished, and the endpoint releases the socket.
func (c *Conn) teardown(cause error, rst bool) {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return
	}
	c.state = stateDead
	c.err = cause
	c.timer.Stop()
	close(c.quit)
	peerID := c.peerID
	sendRST := rst && peerID != 0 && !c.rcv.eof
	var h header
	if sendRST {
		h = header{typ: typeRST, dst: peerID, tsval: usec(c.now())}
		c.stats.PacketsSent++
	}
	c.mu.Unlock()
	if sendRST {
		// Twice: a lost RST leaves the peer waiting for its Linger.
		b := make([]byte, headerLen)
		h.encode(b)
		_ = c.ep.write(b, c.peer)
		_ = c.ep.write(b, c.peer)
	}
	c.rdl.stop()
	c.wdl.stop()
	c.ep.detach(c)
}

// ---------------------------------------------------------------------------
// Transmission

// flush transmits whatever the windows allow. Only one goroutine at a time
// holds the send token; a caller that finds it taken asks the holder to go
// around once more and returns. The token holder writes packet headers into
// segment buffers under mu and sends them without it; segments acknowledged
// meanwhile are freed only by the holder (deferred), so a buffer is never
// recycled while the kernel reads it.
func (c *Conn) flush() {
	c.mu.Lock()
	if c.sending {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.sending = true
	for {
		c.again = false
		pkts := c.collectLocked()
		if len(pkts) == 0 {
			break
		}
		c.mu.Unlock()
		for _, b := range pkts {
			_ = c.ep.write(b, c.peer)
		}
		c.mu.Lock()
		c.reclaimLocked()
	}
	c.sending = false
	c.reclaimLocked()
	fin := c.finish
	c.mu.Unlock()
	if fin {
		c.teardown(ErrClosed, true)
	}
}

func (c *Conn) reclaimLocked() {
	for i, s := range c.deferred {
		freeSegment(s)
		c.deferred[i] = nil
	}
	c.deferred = c.deferred[:0]
}

func (c *Conn) retireSegLocked(s *segment) {
	if c.sending {
		c.deferred = append(c.deferred, s)
	} else {
		freeSegment(s)
	}
}

// collectLocked prepares the next batch of packets.
func (c *Conn) collectLocked() [][]byte {
	c.batch = c.batch[:0]
	if c.state == stateDead {
		return c.batch
	}
	now := c.now()
	if c.state == stateSynSent {
		if c.synDue {
			c.synDue = false
			c.buildSynLocked(typeSYN, 0, now)
			c.batch = append(c.batch, c.ctrlSyn)
		}
		return c.batch
	}
	if c.synackDue {
		c.synackDue = false
		c.buildSynLocked(typeSYNACK, c.peerID, now)
		c.batch = append(c.batch, c.ctrlSyn)
	}
	var ah header
	nblocks := c.ackHeaderLocked(&ah, now)
	c.snd.stop = stopNone
	sentData := false

	// Retransmissions first, oldest sequence number first.
	for len(c.batch) < maxBatch && c.snd.lost.head != nil {
		s := c.snd.lost.head
		if !c.canSendLocked(s.wire(), now) {
			break
		}
		c.transmitLocked(s, &ah, nblocks, now)
		c.stats.Retransmissions++
		sentData = true
	}
	// New data within the peer's window.
	for len(c.batch) < maxBatch && c.snd.nxt < c.snd.end && c.snd.lost.head == nil {
		if c.snd.nxt >= c.snd.peerEdge {
			// Zero window: probe at the retransmission timeout.
			if c.snd.flight.head == nil && c.snd.ptoAt == 0 {
				c.snd.lastProgress = now
				c.armPTOLocked(now)
			}
			break
		}
		s := c.snd.queue.at(int(c.snd.nxt - c.snd.una))
		if !c.canSendLocked(s.wire(), now) {
			break
		}
		c.snd.nxt++
		c.transmitLocked(s, &ah, nblocks, now)
		sentData = true
	}
	idle := c.snd.nxt == c.snd.end && c.snd.lost.head == nil
	if sentData && c.cc.cwnd <= 4*c.cc.mss {
		// A tiny window gains nothing from delayed ACKs: ask for all.
		for _, b := range c.batch {
			if pktType(b[1]) == typeDATA {
				b[2] |= flagACKNOW
			}
		}
	} else if sentData && c.snd.stop != stopPacing && (c.snd.stop == stopCwnd || idle || c.snd.nxt >= c.snd.peerEdge) {
		// Nothing more leaves now: ask for an immediate ACK of the last
		// packet, so that neither a delayed ACK nor a lost tail waits for a
		// timeout.
		c.batch[len(c.batch)-1][2] |= flagACKNOW
	}
	if !sentData && (c.rcv.ackNow || c.pingDue) {
		if c.pingDue {
			ah.flags = flagPING
		}
		ah.typ = typeACK
		ah.nsack = uint8(nblocks)
		copy(ah.sack[:nblocks], c.rcv.sack[:nblocks])
		n := ah.encode(c.ctrlAck)
		c.batch = append(c.batch, c.ctrlAck[:n])
		c.ackSentLocked()
	}
	if len(c.batch) > 0 {
		c.pingDue = false
		c.lastSent = now
		c.stats.PacketsSent += uint64(len(c.batch))
		for _, b := range c.batch {
			c.stats.BytesSent += uint64(len(b))
		}
	}
	return c.batch
}

// canSendLocked applies the congestion window and the pacer.
func (c *Conn) canSendLocked(size int, now time.Duration) bool {
	if c.snd.probes > 0 {
		c.snd.probes--
		return true
	}
	if c.snd.inflight > 0 && c.snd.inflight+size > c.cc.cwnd {
		c.snd.cwndLimited = true
		c.snd.stop = stopCwnd
		return false
	}
	if c.cfg.DisablePacing || c.rtt.samples == 0 {
		return true
	}
	rate := c.cc.pacingRate(c.rtt.srtt)
	c.pace.refill(now, rate, pacerBurst(rate, c.cc.mss))
	ok, wait := c.pace.take(size, rate)
	if !ok {
		c.snd.stop = stopPacing
		c.snd.pacingAt = now + max(wait, 20*time.Microsecond)
		c.armLocked(c.snd.pacingAt)
	}
	return ok
}

// ackHeaderLocked fills the acknowledgement fields every packet carries and
// the SACK blocks; it returns how many blocks there are.
func (c *Conn) ackHeaderLocked(h *header, now time.Duration) int {
	r := &c.rcv
	c.updateEdgeLocked()
	h.dst = c.peerID
	h.ack = uint32(r.nxt)
	h.wnd = uint32(r.edge - r.nxt)
	h.tsval = usec(now)
	if r.haveEcho {
		h.tsecr = r.echoTs + usec(now-r.echoAt)
	}
	n := 0
	if len(r.have.s) > 0 {
		// First the block holding the latest arrival (RFC 2018), then the
		// others from the lowest, which are the holes to fill first.
		first := -1
		if i := r.have.search(r.lastOOO); i < len(r.have.s) && r.have.s[i].start <= r.lastOOO {
			first = i
			sp := r.have.s[i]
			r.sack[n] = sackBlock{uint32(sp.start), uint32(sp.end)}
			n++
		}
		for i := 0; i < len(r.have.s) && n < maxSACKBlocks; i++ {
			if i == first {
				continue
			}
			sp := r.have.s[i]
			r.sack[n] = sackBlock{uint32(sp.start), uint32(sp.end)}
			n++
		}
	}
	return n
}

func (c *Conn) ackSentLocked() {
	r := &c.rcv
	r.ackNow = false
	r.unacked = 0
	r.ackAt = 0
	r.advEdge = r.edge
}

// transmitLocked writes the header of data segment s and adds it to the
// batch.
func (c *Conn) transmitLocked(s *segment, ah *header, nblocks int, now time.Duration) {
	k := min(nblocks, dataSACKBlocks)
	h := *ah
	h.typ = typeDATA
	h.flags = 0
	if s.fin {
		h.flags = flagFIN
	}
	h.seq = uint32(s.seq)
	h.plen = uint16(s.n)
	h.nsack = uint8(k)
	copy(h.sack[:k], c.rcv.sack[:k])
	start := dataOff - encodedLen(k)
	h.encode(s.buf.b[start:])
	c.batch = append(c.batch, s.buf.b[start:dataOff+s.n])

	switch s.state {
	case segLost:
		c.snd.lost.remove(s)
	case segInFlight:
		c.snd.flight.remove(s)
		c.snd.inflight -= s.wire()
	}
	s.state = segInFlight
	s.tx = c.snd.nextTx
	c.snd.nextTx++
	s.sentAt = now
	s.txCount++
	c.snd.flight.pushBack(s)
	c.snd.inflight += s.wire()
	c.stats.DataPacketsSent++
	if c.snd.ptoAt == 0 {
		c.snd.lastProgress = now
		c.armPTOLocked(now)
	}
	c.ackSentLocked()
}

func (c *Conn) buildSynLocked(typ pktType, dst uint64, now time.Duration) {
	h := header{typ: typ, dst: dst, tsval: usec(now), plen: synPayload}
	if c.rcv.haveEcho {
		h.tsecr = c.rcv.echoTs + usec(now-c.rcv.echoAt)
	}
	if typ == typeSYNACK {
		h.wnd = uint32(c.rcv.edge - c.rcv.nxt)
	} else {
		h.wnd = uint32(max(2, c.cfg.RecvBuffer/bufCharge(c.maxPacket)))
	}
	h.encode(c.ctrlSyn)
	encodeSYN(c.ctrlSyn[headerLen:], synInfo{srcID: c.localID, maxPacket: uint16(c.maxPacket)})
}

// rtoLocked is the RFC 6298 retransmission timeout with exponential backoff.
func (c *Conn) rtoLocked() time.Duration {
	rto := c.rtt.rto(c.cfg.InitialRTO, c.cfg.AckDelay, c.cfg.MinRTO, c.cfg.MaxRTO)
	for i := 0; i < c.snd.rtoCount && rto < c.cfg.MaxRTO; i++ {
		rto *= 2
	}
	return min(rto, max(c.cfg.MaxRTO, c.cfg.InitialRTO))
}

// probeLocked is the tail-loss probe timeout, doubled per unanswered probe
// and never beyond the RTO.
func (c *Conn) probeLocked() time.Duration {
	p := c.rtt.probeTimeout(c.cfg.InitialRTO) << min(c.snd.ptoCount, 20)
	return min(p, c.rtoLocked())
}

// armPTOLocked schedules the next probe, or the RTO counted from the last
// acknowledgement progress, whichever is first.
func (c *Conn) armPTOLocked(now time.Duration) {
	s := &c.snd
	s.ptoAt = min(now+c.probeLocked(), max(s.lastProgress+c.rtoLocked(), now))
	c.armLocked(s.ptoAt)
}

// ---------------------------------------------------------------------------
// Reception

// handlePacket processes one decoded datagram from the peer. pb is the
// buffer payload lives in; the result says whether the Conn kept it.
func (c *Conn) handlePacket(h *header, payload []byte, pb *pbuf) (kept bool) {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return false
	}
	now := c.now()
	c.stats.PacketsReceived++
	c.stats.BytesReceived += uint64(encodedLen(int(h.nsack)) + len(payload))
	var fail error
	switch h.typ {
	case typeSYN:
		// A retransmitted SYN: our SYNACK was lost.
		if info, err := decodeSYN(payload); err == nil && info.srcID == c.peerID && !c.isClient {
			c.lastRecv = now
			c.noteEchoLocked(h, now)
			c.synackDue = true
		} else {
			c.drops.foreign.Add(1)
		}
	case typeSYNACK:
		c.onSynAckLocked(h, payload, now)
	default:
		if h.typ == typeRST && c.peerID != 0 && h.dst == c.peerID {
			// Reflected by the peer's listener: it has no connection
			// with the id we know it by any more.
			fail = ErrReset
			break
		}
		if h.dst != c.localID || c.state != stateEstablished {
			c.drops.foreign.Add(1)
			break
		}
		if h.typ == typeRST {
			fail = ErrReset
			break
		}
		if !c.onAckLocked(h, now) {
			c.drops.malformed.Add(1)
			break
		}
		c.lastRecv = now
		c.noteEchoLocked(h, now)
		switch h.typ {
		case typeDATA:
			kept = c.onDataLocked(h, payload, pb, now)
		case typeACK:
			if h.flags&flagPING != 0 {
				c.rcv.ackNow = true
			}
		}
	}
	c.mu.Unlock()
	if fail != nil {
		c.teardown(fail, false)
		return kept
	}
	c.flush()
	return kept
}

func (c *Conn) noteEchoLocked(h *header, now time.Duration) {
	c.rcv.echoTs = h.tsval
	c.rcv.echoAt = now
	c.rcv.haveEcho = true
}

func (c *Conn) onSynAckLocked(h *header, payload []byte, now time.Duration) {
	info, err := decodeSYN(payload)
	if err != nil || !c.isClient || h.dst != c.localID {
		c.drops.foreign.Add(1)
		return
	}
	if c.state != stateSynSent {
		if info.srcID == c.peerID {
			c.rcv.ackNow = true // the server missed our ACK; harmless
		}
		return
	}
	if int(info.maxPacket) > c.maxPacket {
		c.drops.malformed.Add(1)
		return
	}
	c.peerID = info.srcID
	c.setPacketSize(int(info.maxPacket))
	c.snd.peerEdge = uint64(min(h.wnd, 1<<24))
	c.state = stateEstablished
	c.lastRecv = now
	c.noteEchoLocked(h, now)
	if d := usec(now) - h.tsecr; h.tsecr != 0 && d < 1<<31 {
		c.rtt.update(time.Duration(d) * time.Microsecond)
	}
	c.rcv.ackNow = true
	close(c.established)
}

// onAckLocked processes the acknowledgement fields. It returns false for a
// packet that acknowledges data never sent (dropped as malformed).
func (c *Conn) onAckLocked(h *header, now time.Duration) bool {
	s := &c.snd
	ack, ok := unwrap(h.ack, s.una)
	if !ok || ack > s.nxt {
		return false
	}
	ackedBytes := 0
	priorInflight := s.inflight
	newly := false
	for s.una < ack {
		seg := s.queue.pop()
		s.una++
		if seg != nil {
			ackedBytes += c.ackSegLocked(seg)
			newly = true
		}
	}
	s.sacked.trimBelow(s.una)
	for i := range int(h.nsack) {
		b := h.sack[i]
		st, ok1 := unwrap(b.start, s.una)
		en, ok2 := unwrap(b.end, s.una)
		if !ok1 || !ok2 {
			continue
		}
		st = max(st, s.una)
		en = min(en, s.nxt)
		if st >= en {
			continue
		}
		c.fresh = s.sacked.add(st, en, c.fresh[:0])
		for _, sp := range c.fresh {
			for q := sp.start; q < sp.end; q++ {
				i := int(q - s.una)
				if seg := s.queue.at(i); seg != nil {
					s.queue.set(i, nil)
					ackedBytes += c.ackSegLocked(seg)
					newly = true
				}
			}
		}
	}
	if e := ack + uint64(min(h.wnd, 1<<24)); e > s.peerEdge {
		s.peerEdge = e
	}
	if newly || c.rtt.samples == 0 {
		if d := usec(now) - h.tsecr; h.tsecr != 0 && d < 1<<31 && d < 60_000_000 {
			c.rtt.update(time.Duration(d) * time.Microsecond)
		}
	}
	if s.undo.pending && newly {
		if s.undo.spurious {
			c.undoRTOLocked()
		}
		s.undo = rtoUndo{}
	}
	if newly {
		s.ptoCount = 0
		s.rtoCount = 0
		s.lastProgress = now
		limited := s.cwndLimited || 2*priorInflight >= c.cc.cwnd
		s.cwndLimited = false
		c.cc.onAck(ackedBytes, now, c.rtt.smoothed(c.cfg.InitialRTO), limited)
		c.detectLossLocked(now)
		if s.flight.head != nil {
			c.armPTOLocked(now)
		} else {
			s.ptoAt = 0
		}
		signal(c.writable)
		c.checkFinishLocked()
	}
	return true
}

// undoRTOLocked reverts a spurious timeout: the window comes back and the
// packets it marked lost that were not resent yet are in flight again.
func (c *Conn) undoRTOLocked() {
	s := &c.snd
	c.stats.SpuriousTimeouts++
	c.cc.cwnd = max(c.cc.cwnd, s.undo.cwnd)
	c.cc.ssthresh = max(c.cc.ssthresh, s.undo.ssthresh)
	for seg := s.lost.head; seg != nil; {
		next := seg.next
		if seg.tx < s.undo.tx {
			s.lost.remove(seg)
			seg.state = segInFlight
			// Keep the flight list ordered by transmission number.
			p := s.flight.head
			for p != nil && p.tx < seg.tx {
				p = p.next
			}
			if p == nil {
				s.flight.pushBack(seg)
			} else {
				seg.prev, seg.next = p.prev, p
				if p.prev != nil {
					p.prev.next = seg
				} else {
					s.flight.head = seg
				}
				p.prev = seg
				s.flight.n++
			}
			s.inflight += seg.wire()
		}
		seg = next
	}
}

// ackSegLocked retires an acknowledged segment and returns its wire size.
func (c *Conn) ackSegLocked(seg *segment) int {
	s := &c.snd
	switch seg.state {
	case segInFlight:
		s.flight.remove(seg)
		s.inflight -= seg.wire()
	case segLost:
		s.lost.remove(seg)
	}
	// Which transmission of a resent packet was acknowledged is unknown;
	// crediting the latest one would declare everything sent between them
	// lost. Only packets sent once advance the loss-detection reference.
	if seg.txCount == 1 && seg.tx > s.largestAcked {
		s.largestAcked = seg.tx
	}
	if s.undo.pending && seg.tx < s.undo.tx {
		// Acknowledged without having been resent since the RTO: the
		// timeout was spurious (F-RTO, RFC 5682).
		s.undo.spurious = true
	}
	if seg.fin {
		s.finAcked = true
	}
	s.charge -= cap(seg.buf.b)
	n := seg.wire()
	c.retireSegLocked(seg)
	return n
}

// detectLossLocked declares lost the packets sent before an acknowledged
// one that are either three transmissions older (packet threshold) or
// older by 9/8 of the RTT (time threshold), as RFC 9002 does. With fewer
// than four packets in flight the packet threshold drops to what can still
// be observed (early retransmit, RFC 5827), so that small windows recover
// from acknowledgements rather than timers.
func (c *Conn) detectLossLocked(now time.Duration) {
	s := &c.snd
	s.lossAt = 0
	delay := c.rtt.lossDelay()
	thresh := uint64(min(3, max(1, s.flight.n-1)))
	for seg := s.flight.head; seg != nil && seg.tx < s.largestAcked; {
		next := seg.next
		if seg.tx+thresh <= s.largestAcked || now-seg.sentAt >= delay {
			c.markLostLocked(seg)
			c.stats.FastRetransmits++
			c.cc.onLoss(seg.tx, s.nextTx-1)
		} else {
			s.lossAt = seg.sentAt + delay
			c.armLocked(s.lossAt)
			break
		}
		seg = next
	}
}

func (c *Conn) markLostLocked(seg *segment) {
	c.snd.flight.remove(seg)
	c.snd.inflight -= seg.wire()
	seg.state = segLost
	c.snd.lost.insertBySeq(seg)
}

// onDataLocked handles a DATA packet's payload.
func (c *Conn) onDataLocked(h *header, payload []byte, pb *pbuf, now time.Duration) (kept bool) {
	r := &c.rcv
	c.stats.DataPacketsReceived++
	fin := h.flags&flagFIN != 0
	seq, ok := unwrap(h.seq, r.nxt)
	if !ok || seq < r.nxt || r.have.contains(seq) {
		c.stats.DuplicatesDropped++
		r.ackNow = true
		return false
	}
	if seq >= r.edge || (r.finSeen && seq > r.finSeq) {
		c.stats.OutsideWindow++
		r.ackNow = true
		return false
	}
	if fin {
		if r.finSeen && r.finSeq != seq {
			c.drops.malformed.Add(1)
			return false
		}
		if r.have.len() > 0 && r.have.s[len(r.have.s)-1].end > seq+1 {
			c.drops.malformed.Add(1) // data beyond the FIN
			return false
		}
		r.finSeen, r.finSeq = true, seq
	}
	if seq != r.nxt {
		// Out of order: hold it, SACK it at once.
		c.stats.OutOfOrder++
		slot := &r.ooo[seq&uint64(len(r.ooo)-1)]
		kept = c.storeLocked(&slot.pb, &slot.off, &slot.end, payload, pb)
		slot.fin = fin
		slot.present = true
		c.fresh = r.have.add(seq, seq+1, c.fresh[:0])
		r.lastOOO = seq
		r.ackNow = true
		c.updateEdgeLocked()
		return kept
	}
	kept = c.deliverLocked(payload, pb, fin)
	r.nxt++
	filled := false
	if sp, ok := r.have.first(); ok && sp.start == r.nxt {
		for q := sp.start; q < sp.end; q++ {
			c.deliverSlotLocked(&r.ooo[q&uint64(len(r.ooo)-1)])
		}
		r.nxt = sp.end
		filled = true
		r.have.trimBelow(r.nxt)
	}
	c.updateEdgeLocked()
	r.unacked++
	if r.unacked >= c.ackEvery || filled || fin || r.have.len() > 0 || h.flags&flagACKNOW != 0 {
		r.ackNow = true
	} else if r.ackAt == 0 {
		r.ackAt = now + c.cfg.AckDelay
		c.armLocked(r.ackAt)
	}
	signal(c.readable)
	return kept
}

// storeLocked keeps payload in *dst: small payloads are copied into a small
// buffer so that a 64 KiB read buffer is not pinned; otherwise pb itself is
// kept (the result says so).
func (c *Conn) storeLocked(dst **pbuf, off, end *int, payload []byte, pb *pbuf) bool {
	if len(payload) <= smallBufSize && cap(pb.b) > smallBufSize {
		nb := getBuf(len(payload))
		copy(nb.b, payload)
		*dst, *off, *end = nb, 0, len(payload)
		c.rcv.held += cap(nb.b)
		return false
	}
	*dst = pb
	*off = cap(pb.b) - cap(payload)
	*end = *off + len(payload)
	c.rcv.held += cap(pb.b)
	return true
}

// deliverLocked appends in-order payload to the read queue.
func (c *Conn) deliverLocked(payload []byte, pb *pbuf, fin bool) (kept bool) {
	r := &c.rcv
	if fin {
		r.eof = true
	}
	if len(payload) == 0 {
		return false
	}
	r.readable += len(payload)
	if c.appendTailLocked(payload) {
		return false
	}
	var ch rxChunk
	kept = c.storeLocked(&ch.pb, &ch.off, &ch.end, payload, pb)
	r.readq = append(r.readq, ch)
	return kept
}

// appendTailLocked copies a small payload behind the last unread chunk when
// its buffer has room.
func (c *Conn) appendTailLocked(payload []byte) bool {
	r := &c.rcv
	if len(payload) > smallBufSize/2 || len(r.readq) == r.readHead {
		return false
	}
	t := &r.readq[len(r.readq)-1]
	if cap(t.pb.b)-t.end < len(payload) {
		return false
	}
	t.end += copy(t.pb.b[t.end:cap(t.pb.b)], payload)
	return true
}

func (c *Conn) deliverSlotLocked(slot *rxSlot) {
	r := &c.rcv
	if slot.fin {
		r.eof = true
	}
	if n := slot.end - slot.off; n > 0 {
		r.readable += n
		if c.appendTailLocked(slot.pb.b[slot.off:slot.end]) {
			r.held -= cap(slot.pb.b)
			putBuf(slot.pb)
		} else {
			r.readq = append(r.readq, rxChunk{pb: slot.pb, off: slot.off, end: slot.end})
		}
	} else if slot.pb != nil {
		r.held -= cap(slot.pb.b)
		putBuf(slot.pb)
	}
	*slot = rxSlot{}
}

// ---------------------------------------------------------------------------
// Timers

// armLocked makes the timer fire no later than at.
func (c *Conn) armLocked(at time.Duration) {
	if at <= 0 || c.state == stateDead {
		return
	}
	if c.timerAt != 0 && c.timerAt <= at {
		return
	}
	c.timerAt = at
	c.timer.Reset(max(at-c.now(), 0))
}

func (c *Conn) timerLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.quit:
			return
		case <-c.timer.C:
		}
		c.onTimer()
	}
}

func (c *Conn) onTimer() {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return
	}
	now := c.now()
	c.timerAt = 0
	var fail error
	rst := false
	if c.cfg.IdleTimeout > 0 && now-c.lastRecv >= c.cfg.IdleTimeout {
		fail = ErrPeerTimeout
	}
	if c.userClosed && c.lingerAt != 0 && now >= c.lingerAt {
		fail, rst = ErrClosed, true
	}
	if c.state == stateSynSent && now >= c.synAt {
		c.synDue = true
		c.synCount++
		c.synAt = now + min(c.cfg.InitialRTO<<min(c.synCount, 10), max(c.cfg.MaxRTO, c.cfg.InitialRTO))
	}
	if c.rcv.ackAt != 0 && now >= c.rcv.ackAt {
		c.rcv.ackNow = true
		c.rcv.ackAt = 0
	}
	if c.snd.lossAt != 0 && now >= c.snd.lossAt {
		c.detectLossLocked(now)
	}
	if c.snd.ptoAt != 0 && now >= c.snd.ptoAt {
		c.onPTOLocked(now)
	}
	if c.snd.pacingAt != 0 && now >= c.snd.pacingAt {
		c.snd.pacingAt = 0
	}
	if c.state == stateEstablished && c.cfg.KeepAlive > 0 && now-c.lastSent >= c.cfg.KeepAlive {
		c.pingDue = true
	}
	c.armLocked(c.nextDeadlineLocked(now))
	c.mu.Unlock()
	if fail != nil {
		c.teardown(fail, rst)
		return
	}
	c.flush()
}

// onPTOLocked handles the retransmission timer. Before a full RTO has
// passed without acknowledgement progress it sends a tail-loss probe (the
// oldest unacknowledged packet again, past the congestion window), whose
// acknowledgement lets SACK-based detection find the other losses. After
// the RTO the path is taken to have lost everything: the window collapses
// to one packet and all in-flight packets are resent (RFC 6298 5.5-5.7).
func (c *Conn) onPTOLocked(now time.Duration) {
	s := &c.snd
	s.ptoAt = 0
	switch {
	case s.flight.head != nil:
		if now >= s.lastProgress+c.rtoLocked() {
			s.rtoCount++
			c.stats.Timeouts++
			if !s.undo.pending {
				s.undo = rtoUndo{pending: true, tx: s.nextTx, cwnd: c.cc.cwnd, ssthresh: c.cc.ssthresh}
			}
			c.cc.onRTO(s.nextTx - 1)
			for s.flight.head != nil {
				c.markLostLocked(s.flight.head)
			}
			s.lastProgress = now
		} else {
			s.ptoCount++
			c.stats.Probes++
			c.markLostLocked(s.flight.head)
		}
		s.probes = 1
		c.armPTOLocked(now)
	case s.nxt < s.end && s.nxt >= s.peerEdge:
		// Zero-window probe: ask for the current window.
		s.ptoCount++
		c.pingDue = true
		s.lastProgress = now
		c.armPTOLocked(now)
	}
}

// nextDeadlineLocked is the earliest time the timer must look again.
func (c *Conn) nextDeadlineLocked(now time.Duration) time.Duration {
	next := time.Duration(0)
	consider := func(t time.Duration) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	consider(c.snd.ptoAt)
	consider(c.snd.lossAt)
	consider(c.snd.pacingAt)
	consider(c.rcv.ackAt)
	consider(c.lingerAt)
	if c.state == stateSynSent {
		consider(c.synAt)
	}
	if c.cfg.KeepAlive > 0 && c.state == stateEstablished {
		consider(c.lastSent + c.cfg.KeepAlive)
	}
	if c.cfg.IdleTimeout > 0 {
		consider(c.lastRecv + c.cfg.IdleTimeout)
	}
	if next != 0 && next <= now {
		next = now + time.Microsecond
	}
	return next
}

// ---------------------------------------------------------------------------
// Statistics

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
