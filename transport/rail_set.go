package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults of RailConfig's zero fields.
const (
	// DefaultRailCopyLimit: messages up to this size are copied by Send,
	// which returns at once; larger ones are not copied and Send returns
	// when the peer has acknowledged them.
	DefaultRailCopyLimit = 256 << 10
	// DefaultRailWindow bounds the copied bytes not yet acknowledged.
	DefaultRailWindow = 8 << 20
	// DefaultRailRecvBuffer bounds the bytes received in order but not yet
	// taken by Recv; beyond it the rails stop reading.
	DefaultRailRecvBuffer = 16 << 20
	// DefaultRailAckDelay is how long a receiver waits for a reverse
	// message to carry its acknowledgement before sending one on its own.
	DefaultRailAckDelay = 2 * time.Millisecond
)

const (
	railMaxUnacked = 4096    // messages a sender keeps unacknowledged
	railMaxReorder = 1 << 20 // how far ahead of the next complete message a receiver accepts
	railOverhead   = 2*HeaderSize + railHeadSize
	railByeTimeout = 100 * time.Millisecond
	railLendMisses = 4 // hand-offs by another rail after which it is lent instead
)

var (
	errRailDown       = errors.New("transport: rail is down")
	errRailBye        = errors.New("transport: peer closed the rail set")
	errRailSuperseded = errors.New("transport: peer re-sent this rail's parts on another rail")
	errRecvStopped    = errors.New("transport: receive stopped")
)

// stoppableLink is a link whose wait for the next frame can be abandoned
// without losing framing (the stream links: TCP, TLS and reliable UDP;
// mem links). A RailSet lends such a rail to its Recv callers, which then
// read it themselves (see readLent).
type stoppableLink interface {
	// recvStoppable is Recv(context.Background()), except that stopRecv,
	// called by another goroutine while it waits for a frame to begin,
	// makes it return errRecvStopped having consumed nothing. Once a
	// frame has begun, it is read whole. A stopRecv that finds no
	// recvStoppable waiting is kept: a later recvStoppable that has no
	// frame begun returns errRecvStopped at once, so callers must take
	// errRecvStopped for a spurious wake-up.
	recvStoppable() (Message, error)
	// stopRecv does not block: a RailSet calls it with its mu held (it
	// takes the link's own locks only).
	stopRecv()
}

// RailConfig configures a RailSet. Only Costs (in the embedded RailModel)
// is required; every other zero value is documented.
type RailConfig struct {
	// RailModel holds one cost per link, in link order, the policy and its
	// tuning (see RailModel).
	RailModel

	// Router, if set, is the RailRouter whose Alloc hook the links were
	// configured with (Config.Alloc), so that the parts of a message land
	// in place, at their offsets in the reassembly buffer, without a copy.
	// The RailSet registers with it under its peer's rank and takes the
	// upper layer's Alloc from it. nil: parts are read into buffers of
	// their own and copied into place.
	Router *RailRouter
	// Alloc chooses the buffer of a received message, with
	// Config.Alloc's semantics: called once per message, with the upper
	// layer's header, before its bytes arrive. It must be nil when Router
	// is set (the router's alloc is used). nil: the RailSet allocates.
	Alloc func(Header) []byte

	// OnRailDown, if set, is called once for each rail that fails (not
	// when the RailSet is closed or the peer closes it), after the rail
	// was removed and its traffic moved to the others, so the caller can
	// update its model. Calls are serialised; it must not block for long
	// and must not call Close.
	OnRailDown func(RailEvent)

	// MaxMessage bounds the message length sent and accepted. The links
	// must accept parts that large. 0 means DefaultMaxMessage.
	MaxMessage int64
	// CopyLimit is the largest message Send copies (then returns at once);
	// larger messages are sent from the caller's buffer and Send returns
	// once the peer acknowledged them. 0 means DefaultRailCopyLimit.
	CopyLimit int
	// Window bounds the copied bytes not yet acknowledged; Send waits
	// beyond it. 0 means DefaultRailWindow.
	Window int
	// RecvBuffer bounds the bytes received in order but not yet returned
	// by Recv; the rails stop reading beyond it. 0 means
	// DefaultRailRecvBuffer.
	RecvBuffer int
	// AckDelay is how long an acknowledgement may wait for a message in
	// the other direction to carry it. 0 means DefaultRailAckDelay.
	AckDelay time.Duration
	// Logger receives rail failures. nil discards.
	Logger *slog.Logger
}

// RailEvent reports a rail that failed.
type RailEvent struct {
	Peer int   // the peer's rank
	Rail int   // the failed rail (its index in the links given to NewRailSet)
	Err  error // why it failed
	// Live lists the rails still up, and Model is the model of those
	// rails (Costs[i] is rail Live[i]'s), with the same policy and tuning:
	// the pair's new effective cost is Model.Time(m).
	Live  []int
	Model RailModel
}

// RailStats describes one rail of a RailSet.
type RailStats struct {
	Rail   int
	Alive  bool
	Cost   RailCost
	Parts  uint64 // parts assigned to this rail, re-sent ones included
	Bytes  uint64 // payload bytes assigned to this rail
	Resent uint64 // parts moved here from a failed rail
	Err    error  // why the rail failed; nil while alive
}

// RailSet is one logical Link to a peer over several rails: links (one per
// NIC, address or transport) to the same authenticated peer, each with its
// fitted cost. A policy (RailPolicy) decides, for every message, which
// rail carries it or how it is split across rails; the receiver
// reassembles the parts (each checked with a CRC-32C) into the buffer its
// Alloc chose and delivers messages in the order they were sent. When a
// rail fails, its unacknowledged parts are sent again on the others: as
// long as one rail survives, nothing is lost.
//
// Both ends must build their RailSet over the same rails in the same
// order: link i of one end is connected to link i of the other.
//
// A RailSet implements Link with the same contract, with these
// differences: Send of a message up to CopyLimit copies it and may return
// before it reached a link (the copy is kept until the peer acknowledges
// it); Send of a larger message returns once the peer acknowledged it. If
// ctx ends while a large message is partly written, the RailSet closes
// itself, as a link does. The wire format is in docs/wire.md, "Rails".
type RailSet struct {
	cfg    RailConfig
	peer   int
	kind   Kind
	rails  []*rail
	upper  func(Header) []byte
	router *RailRouter
	log    *slog.Logger
	maxMsg int64

	c     closer
	ackCh chan struct{} // wakes ackLoop
	// wg counts sendLoop and readLoop of every rail, ackLoop, the Recv
	// callers reading a lent rail (readLent) and the Send callers writing
	// a part themselves (see Send): nothing reads, writes or handles a
	// frame once Close has returned.
	wg sync.WaitGroup
	// tick wakes ackLoop every AckDelay while there is something to
	// watch (see tickLocked); it is stopped otherwise.
	tick *time.Ticker

	// Lock order: allocMu, then mu; evMu is never held with mu. The upper
	// Alloc is called with allocMu only; OnRailDown with evMu only.
	allocMu sync.Mutex
	evMu    sync.Mutex
	mu      sync.Mutex

	// Guarded by mu.
	planner  *railPlanner
	costs    []RailCost
	live     []bool
	nlive    int
	err      error // terminal: every rail is down (or Close)
	peerBye  bool
	sendCh   chan struct{} // closed and replaced when sending state changes, if sendWait > 0
	recvCh   chan struct{} // closed and replaced when receiving state changes, if recvWait > 0
	sendWait int           // goroutines waiting on sendCh
	recvWait int           // goroutines waiting on recvCh
	startBuf [MaxRails]float64

	// Receiving by the Recv callers themselves: at most one rail is lent
	// at a time (see readLent).
	lent        *rail // the rail lent to the Recv callers, or nil
	recvIn      int   // Recv callers in Recv
	recvCallers int   // Recv callers waiting on recvCh
	lendMisses  int   // hand-offs by other rails' reader goroutines since the lent rail delivered

	nextSeq uint64
	unacked []*outMsg // in sequence order
	copied  int64     // bytes of owned messages in unacked

	in         map[uint64]*inMsg
	complete   uint64 // every message below this one is complete
	ready      []Message
	readyHead  int
	readyBytes int64
	ackSent    uint64    // the highest acknowledgement sent
	ackNow     bool      // acknowledge at once: a message asked for it, or a tick found it due
	ticking    bool      // tick is running
	tickSeen   [2]uint64 // complete and lentReads at the last tick
	lentReads  uint64    // reads of the lent rail begun by Recv callers, and lendings
	copyIns    uint64    // parts copied into place rather than read in place
}

var _ Link = (*RailSet)(nil)

type rail struct {
	idx  int
	link Link
	sl   stoppableLink // link, if it is one: the rail can be lent to Recv callers
	// Guarded by RailSet.mu.
	alive  bool
	err    error
	q      []*outPart
	busy   bool      // a goroutine (sendLoop or a Send caller) is writing a part on link (owns frame)
	freeAt time.Time // when the rail is predicted to have sent what it was given
	stats  RailStats
	direct uint64 // parts written by Send callers rather than by sendLoop
	frame  []byte

	// Reading (guarded by RailSet.mu): the rail's reader goroutine reads
	// it unless it is lent, then a Recv caller may (one at a time).
	lent      bool // lent to the Recv callers: the reader goroutine waits
	callerIn  bool // a Recv caller is reading the link
	awaitData bool // the last part header read announced a part whose data frame has not been read
	readerOut bool // the reader goroutine has exited
	doneSent  bool // readerDone is closed

	wake       chan struct{} // cap 1: there is work in q
	lendWake   chan struct{} // cap 1: the rail is no longer lent
	quit       chan struct{} // closed when the rail goes down
	readerDone chan struct{} // closed once the rail is down, nobody reads it and its claims are released
}

func (r *rail) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

type partState uint8

const (
	partQueued partState = iota
	partSending
	partSent
)

// outMsg is a message sent and not yet acknowledged.
type outMsg struct {
	seq      uint64
	h        Header // the upper layer's header
	data     []byte // the payload: the RailSet's copy if owned, else the caller's
	owned    bool
	counted  int64 // bytes counted in RailSet.copied
	parts    []*outPart
	unsent   int // parts not in partSent
	inflight int // transmissions reading data right now
	reqAck   bool
	skip     bool
	acked    bool
}

type outPart struct {
	msg   *outMsg
	off   int64
	n     int64
	crc   uint32
	crcOK bool
	rail  int
	gen   uint32 // incremented when the part moves to another rail
	state partState
}

type inState uint8

const (
	inAnnounced inState = iota // the header arrived
	inClaimed                  // the bytes are being written in place
	inDone                     // the bytes are in place and verified
)

type inPart struct {
	off, n uint64
	crc    uint32
	rail   int // the rail whose copy is expected
	inline bool
	state  inState
}

// inMsg is a message being received.
type inMsg struct {
	h        Header // the upper layer's header
	nparts   uint32
	parts    []*inPart
	done     uint32
	bytes    uint64
	buf      []byte
	inline   []byte // the payload of a single inline part when buf is nil
	reqAck   bool
	skip     bool
	complete bool
}

func (m *inMsg) part(off uint64) *inPart {
	for _, p := range m.parts {
		if p.off == off {
			return p
		}
	}
	return nil
}

// NewRailSet returns a RailSet over links, which must all lead to the same
// peer; cfg.Costs has one cost per link. The RailSet owns the links from
// then on (it closes them); on error they are left to the caller.
func NewRailSet(links []Link, cfg RailConfig) (*RailSet, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: rails: "+format, append([]any{ErrBadConfig}, a...)...)
	}
	if err := cfg.RailModel.Validate(); err != nil {
		return nil, err
	}
	switch {
	case len(links) != len(cfg.Costs):
		return nil, bad("%d links for %d costs", len(links), len(cfg.Costs))
	case cfg.Router != nil && cfg.Alloc != nil:
		return nil, bad("both Router and Alloc set (the router's alloc is used)")
	case cfg.MaxMessage < 0 || cfg.CopyLimit < 0 || cfg.Window < 0 || cfg.RecvBuffer < 0 || cfg.AckDelay < 0:
		return nil, bad("negative limit")
	}
	for i, l := range links {
		if l == nil {
			return nil, bad("link %d is nil", i)
		}
		if l.Peer() != links[0].Peer() {
			return nil, bad("link %d leads to rank %d, link 0 to rank %d", i, l.Peer(), links[0].Peer())
		}
	}
	cfg.Costs = append([]RailCost(nil), cfg.Costs...)
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.CopyLimit == 0 {
		cfg.CopyLimit = DefaultRailCopyLimit
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultRailWindow
	}
	if cfg.RecvBuffer == 0 {
		cfg.RecvBuffer = DefaultRailRecvBuffer
	}
	if cfg.AckDelay == 0 {
		cfg.AckDelay = DefaultRailAckDelay
	}
	rs := &RailSet{
		cfg:    cfg,
		peer:   links[0].Peer(),
		kind:   links[0].Kind(),
		upper:  cfg.Alloc,
		router: cfg.Router,
		log:    cfg.Logger,
		maxMsg: cfg.MaxMessage,
		c:      newCloser(),
		ackCh:  make(chan struct{}, 1),
		costs:  cfg.Costs,
		live:   make([]bool, len(links)),
		nlive:  len(links),
		sendCh: make(chan struct{}),
		recvCh: make(chan struct{}),
		in:     map[uint64]*inMsg{},
	}
	if rs.log == nil {
		rs.log = slog.New(slog.DiscardHandler)
	}
	if rs.router != nil {
		rs.upper = rs.router.alloc
		if err := rs.router.register(rs.peer, rs); err != nil {
			return nil, err
		}
	}
	for i, l := range links {
		rs.live[i] = true
		sl, _ := l.(stoppableLink)
		rs.rails = append(rs.rails, &rail{
			idx: i, link: l, sl: sl, alive: true,
			stats:      RailStats{Rail: i, Alive: true, Cost: cfg.Costs[i]},
			wake:       make(chan struct{}, 1),
			lendWake:   make(chan struct{}, 1),
			quit:       make(chan struct{}),
			readerDone: make(chan struct{}),
		})
	}
	rs.planner = newRailPlanner(cfg.RailModel, rs.live)
	rs.tick = time.NewTicker(cfg.AckDelay)
	rs.tick.Stop()
	for _, r := range rs.rails {
		rs.wg.Add(2)
		go rs.sendLoop(r)
		go rs.readLoop(r)
	}
	rs.wg.Add(1)
	go rs.ackLoop()
	return rs, nil
}

// Peer is the peer's rank.
func (rs *RailSet) Peer() int { return rs.peer }

// Kind is the transport of the first rail.
func (rs *RailSet) Kind() Kind { return rs.kind }

// LocalAddr lists every rail's local address (a RailAddrs).
func (rs *RailSet) LocalAddr() net.Addr {
	a := make(RailAddrs, len(rs.rails))
	for i, r := range rs.rails {
		a[i] = r.link.LocalAddr()
	}
	return a
}

// RemoteAddr lists every rail's remote address (a RailAddrs).
func (rs *RailSet) RemoteAddr() net.Addr {
	a := make(RailAddrs, len(rs.rails))
	for i, r := range rs.rails {
		a[i] = r.link.RemoteAddr()
	}
	return a
}

// RailAddrs is the address of a RailSet: one address per rail.
type RailAddrs []net.Addr

// Network is "rails".
func (a RailAddrs) Network() string { return "rails" }

func (a RailAddrs) String() string {
	s := make([]string, len(a))
	for i, x := range a {
		if x != nil {
			s[i] = x.String()
		}
	}
	return strings.Join(s, ",")
}

func (rs *RailSet) opErr(op string, err error) error {
	return &OpError{Op: op, Transport: rs.kind, Peer: rs.peer, Addr: rs.RemoteAddr(), Err: err}
}

// Model returns the model of the rails still up (Costs[i] is rail
// live[i]'s) and their indices.
func (rs *RailSet) Model() (m RailModel, live []int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.liveModelLocked()
}

func (rs *RailSet) liveModelLocked() (RailModel, []int) {
	m := rs.cfg.RailModel
	m.Costs = nil
	var live []int
	for r, ok := range rs.live {
		if ok {
			live = append(live, r)
			m.Costs = append(m.Costs, rs.costs[r])
		}
	}
	return m, live
}

// SetCosts replaces the rails' costs (one per link given to NewRailSet,
// failed rails included), e.g. after a new probe; the policy's thresholds
// are derived again.
func (rs *RailSet) SetCosts(costs []RailCost) error {
	m := rs.cfg.RailModel
	m.Costs = append([]RailCost(nil), costs...)
	if err := m.Validate(); err != nil {
		return err
	}
	if len(costs) != len(rs.rails) {
		return fmt.Errorf("%w: rails: %d costs for %d rails", ErrBadConfig, len(costs), len(rs.rails))
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.costs = m.Costs
	for i, r := range rs.rails {
		r.stats.Cost = m.Costs[i]
	}
	rs.replanLocked()
	return nil
}

// replanLocked derives the planner from the current costs and live rails.
func (rs *RailSet) replanLocked() {
	m := rs.cfg.RailModel
	m.Costs = rs.costs
	rs.planner = newRailPlanner(m, rs.live)
}

// Stats describes every rail.
func (rs *RailSet) Stats() []RailStats {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]RailStats, len(rs.rails))
	for i, r := range rs.rails {
		out[i] = r.stats
		out[i].Alive, out[i].Err = r.alive, r.err
	}
	return out
}

func (rs *RailSet) sendChangedLocked() {
	if rs.sendWait > 0 {
		close(rs.sendCh)
		rs.sendCh = make(chan struct{})
	}
}

func (rs *RailSet) recvChangedLocked() {
	if rs.recvWait > 0 {
		close(rs.recvCh)
		rs.recvCh = make(chan struct{})
	}
}

// ioCtx is the context of the links' Send and Recv: they are interrupted
// by closing the links, never by a context, so that a partly written part
// cannot break a rail that is otherwise healthy.
var ioCtx = context.Background()

func (rs *RailSet) wakeAcker() {
	select {
	case rs.ackCh <- struct{}{}:
	default:
	}
}

// ---------------------------------------------------------------- sending

// Send sends one message (see Link and RailSet for the contract).
func (rs *RailSet) Send(ctx context.Context, h Header, payload []byte) error {
	if h.Type == 0 {
		return rs.opErr("send", fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	if err := ctx.Err(); err != nil {
		return rs.opErr("send", err)
	}
	n := len(payload)
	if int64(n) > rs.maxMsg {
		return rs.opErr("send", &FrameError{Field: "length", Value: uint64(n), Limit: uint64(rs.maxMsg), Err: ErrTooLarge})
	}
	owned := n <= rs.cfg.CopyLimit
	data := payload
	if owned {
		data = append(make([]byte, 0, n), payload...)
	}
	h.Len = uint64(n)

	rs.mu.Lock()
	for {
		if rs.c.isClosed() {
			rs.mu.Unlock()
			return rs.opErr("send", ErrClosed)
		}
		if rs.err != nil {
			err := rs.err
			rs.mu.Unlock()
			return rs.opErr("send", err)
		}
		if len(rs.unacked) < railMaxUnacked && (!owned || rs.copied == 0 || rs.copied+int64(n) <= int64(rs.cfg.Window)) {
			break
		}
		ch := rs.sendCh
		rs.sendWait++
		rs.unlendLocked() // the acknowledgements must be read
		rs.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-rs.c.quit:
		}
		rs.mu.Lock()
		rs.sendWait--
		if err != nil {
			rs.mu.Unlock()
			return rs.opErr("send", err)
		}
	}
	m := &outMsg{seq: rs.nextSeq, h: h, data: data, owned: owned}
	rs.nextSeq++
	if owned {
		m.counted = int64(n)
		rs.copied += m.counted
	}
	m.reqAck = !owned || rs.copied > int64(rs.cfg.Window)/2 || len(rs.unacked) >= railMaxUnacked/2
	rs.unacked = append(rs.unacked, m)
	rs.assignLocked(m, time.Now())

	// Fast path: a copied message that goes whole on a rail with nothing
	// queued and nothing being written is written by the caller, as
	// sendLoop would write it (see sendDirectLocked).
	direct, job := rs.sendDirectLocked(m)
	if direct == nil {
		for _, p := range m.parts {
			r := rs.rails[p.rail]
			r.q = append(r.q, p)
			r.signal()
		}
	}
	rs.mu.Unlock()
	if direct != nil {
		rs.writePart(direct, &job)
		rs.wg.Done()
	}
	if owned {
		// Handed over: the copy is kept until acknowledged. Only if no
		// rail is left is the message known to be lost.
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.err != nil && !m.acked {
			return rs.opErr("send", rs.err)
		}
		return nil
	}
	return rs.waitAck(ctx, m)
}

// sendDirectLocked prepares the transmission of m by the Send caller
// itself, if m can take the fast path: it is a copy (owned: Send returns
// once it is handed to the link, as for a queued part), it goes whole on
// one rail, and that rail has nothing queued and nobody writing (so the
// rail's frames stay in the order their parts were assigned). It returns
// nil otherwise. On success the rail is busy (its queue waits, and
// sendLoop with it, until writePart is done) and rs.wg counts the caller,
// so that Close waits for the write as it waits for sendLoop's: the
// caller must call writePart, then rs.wg.Done.
//
// The write is sendLoop's (prepareLocked, run, finishLocked, failRail):
// the same bookkeeping (the part is sent, the acknowledgement it carries,
// the queue signalled if a part was queued meanwhile) and the same
// context, ioCtx: the caller's ctx does not interrupt it, so that a ctx
// ending mid-frame cannot break the rail's framing. A failed write takes
// the rail down and moves the part, like every part the rail carried, to
// the rails still up.
func (rs *RailSet) sendDirectLocked(m *outMsg) (*rail, txJob) {
	if !m.owned || len(m.parts) != 1 {
		return nil, txJob{}
	}
	r := rs.rails[m.parts[0].rail]
	if !r.alive || r.busy || len(r.q) > 0 {
		return nil, txJob{}
	}
	// r is alive, so its sendLoop and readLoop are still counted: rs.wg
	// is not zero and Close has not begun waiting.
	rs.wg.Add(1)
	r.direct++
	return r, rs.prepareLocked(r, m.parts[0])
}

// assignLocked splits m over the rails with the policy, given when each
// rail is predicted to be free, and charges the rails' clocks.
func (rs *RailSet) assignLocked(m *outMsg, now time.Time) {
	start := rs.startBuf[:len(rs.rails)]
	for i, r := range rs.rails {
		start[i] = 0
		if d := r.freeAt.Sub(now); d > 0 {
			start[i] = d.Seconds()
		}
	}
	shares, _ := rs.planner.plan(int64(len(m.data)), start)
	var off int64
	for _, s := range shares {
		m.parts = append(m.parts, &outPart{msg: m, off: off, n: s.Bytes, rail: s.Rail})
		off += s.Bytes
		rs.chargeLocked(rs.rails[s.Rail], s.Bytes, now)
	}
	m.unsent = len(m.parts)
}

// chargeLocked advances rail r's predicted free time by n bytes.
func (rs *RailSet) chargeLocked(r *rail, n int64, now time.Time) {
	t := r.freeAt
	if t.Before(now) {
		t = now
	}
	sec := float64(n+railOverhead) / rs.costs[r.idx].Bandwidth
	r.freeAt = t.Add(time.Duration(sec * float64(time.Second)))
	r.stats.Parts++
	r.stats.Bytes += uint64(n)
}

// txJob is one transmission of a part, prepared under mu.
type txJob struct {
	p       *outPart
	gen     uint32
	head    railHead
	data    []byte
	needCRC bool
}

// prepareLocked marks p as being sent on r (which the caller now writes
// on) and builds its rail header.
func (rs *RailSet) prepareLocked(r *rail, p *outPart) txJob {
	m := p.msg
	p.state = partSending
	m.inflight++
	r.busy = true
	head := railHead{Rail: uint16(r.idx), Seq: m.seq, Ack: rs.complete}
	job := txJob{p: p, gen: p.gen}
	if m.skip {
		head.Kind = railKindSkip
	} else {
		head.Kind = railKindPart
		head.CRC = p.crc
		head.Off, head.Len, head.Total = uint64(p.off), uint64(p.n), uint64(len(m.data))
		head.Type, head.UFlags, head.Comm, head.Tag, head.USeq = m.h.Type, m.h.Flags, m.h.Comm, m.h.Tag, m.h.Seq
		head.Parts = uint32(len(m.parts))
		if p.n <= railInlineMax {
			head.Flags |= railFlagInline
		}
		if m.reqAck {
			head.Flags |= railFlagAckReq
		}
		job.data = m.data[p.off : p.off+p.n]
		job.needCRC = !p.crcOK
	}
	job.head = head
	return job
}

// writePart transmits a prepared part on r (whose writer the caller is:
// r.busy), records the outcome and, if the write failed, takes r down. It
// reports whether the write succeeded. sendLoop and the Send callers
// taking the fast path both write through it.
func (rs *RailSet) writePart(r *rail, job *txJob) bool {
	if err := rs.run(r, job); err != nil {
		rs.failRail(r, err)
		return false
	}
	return true
}

// run transmits a prepared part on r and records the outcome.
func (rs *RailSet) run(r *rail, job *txJob) error {
	if job.needCRC {
		job.head.CRC = crc32c(job.data)
	}
	err := rs.transmit(r, job)
	rs.mu.Lock()
	rs.finishLocked(r, job, err)
	rs.mu.Unlock()
	return err
}

// transmit writes a part's frames: the rail header (with the bytes if
// inline), then a MsgRailData frame. The caller owns r.frame (r.busy).
func (rs *RailSet) transmit(r *rail, job *txJob) error {
	h := &job.head
	size := railHeadSize
	inline := h.Flags&railFlagInline != 0
	if inline {
		size += len(job.data)
	}
	if cap(r.frame) < size {
		r.frame = make([]byte, size, max(size, 1024))
	}
	f := r.frame[:size]
	putRailHead(f, h)
	if inline {
		copy(f[railHeadSize:], job.data)
	}
	if err := r.link.Send(ioCtx, Header{Type: MsgRail, Flags: uint16(r.idx), Seq: h.Seq}, f); err != nil {
		return err
	}
	if inline || h.Kind != railKindPart {
		return nil
	}
	return r.link.Send(ioCtx, railDataHeader(r.idx, h.Seq, h.Off), job.data)
}

func (rs *RailSet) finishLocked(r *rail, job *txJob, err error) {
	r.busy = false
	p, m := job.p, job.p.msg
	m.inflight--
	if job.needCRC && !p.crcOK {
		p.crc, p.crcOK = job.head.CRC, true
	}
	if err == nil {
		if p.gen == job.gen && p.state == partSending {
			p.state = partSent
			m.unsent--
		}
		if job.head.Ack > rs.ackSent {
			rs.ackSent = job.head.Ack // the part carried them
		}
	}
	if len(r.q) > 0 {
		r.signal()
	}
	rs.sendChangedLocked()
}

// sendLoop writes the parts queued on r, one at a time.
func (rs *RailSet) sendLoop(r *rail) {
	defer rs.wg.Done()
	for {
		select {
		case <-r.wake:
		case <-r.quit:
			return
		}
		for {
			rs.mu.Lock()
			if !r.alive {
				rs.mu.Unlock()
				return
			}
			if r.busy || len(r.q) == 0 {
				rs.mu.Unlock()
				break
			}
			p := r.q[0]
			r.q[0] = nil
			r.q = r.q[1:]
			if p.msg.acked {
				rs.mu.Unlock()
				continue
			}
			job := rs.prepareLocked(r, p)
			rs.mu.Unlock()
			if !rs.writePart(r, &job) {
				return
			}
		}
	}
}

// waitAck waits until the peer acknowledged m (a message sent from the
// caller's buffer) and no transmission reads the buffer any more.
func (rs *RailSet) waitAck(ctx context.Context, m *outMsg) error {
	done := ctx.Done()
	var ctxErr error
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for {
		if m.inflight == 0 {
			switch {
			case ctxErr != nil:
				return rs.opErr("send", ctxErr)
			case m.acked:
				return nil
			case rs.c.isClosed():
				return rs.opErr("send", ErrClosed)
			case rs.err != nil:
				return rs.opErr("send", rs.err)
			}
		}
		ch := rs.sendCh
		rs.sendWait++
		rs.unlendLocked() // the acknowledgement must be read
		rs.mu.Unlock()
		cancelled := false
		select {
		case <-ch:
		case <-done:
			cancelled = true
		}
		rs.mu.Lock()
		rs.sendWait--
		if !cancelled {
			continue
		}
		done = nil
		if m.acked || rs.err != nil || rs.c.isClosed() {
			continue
		}
		switch rs.cancelLocked(m) {
		case cancelWithdrawn:
			return rs.opErr("send", ctx.Err())
		case cancelCopied:
			return nil
		case cancelBreak:
			ctxErr = ctx.Err()
			rs.mu.Unlock()
			rs.log.Warn("transport: closing rail set: send cancelled while partly written", "peer", rs.peer, "err", ctxErr)
			rs.Close()
			rs.mu.Lock()
		}
	}
}

type cancelOutcome uint8

const (
	cancelWithdrawn cancelOutcome = iota // nothing was sent: the sequence number travels as a skip
	cancelCopied                         // everything was handed to links: keep a copy, Send succeeds
	cancelBreak                          // partly written: the RailSet must close, like a link
)

// cancelLocked handles a ctx that ended while Send waits for m to be
// acknowledged (see cancelOutcome).
func (rs *RailSet) cancelLocked(m *outMsg) cancelOutcome {
	started := false
	for _, p := range m.parts {
		if p.state != partQueued {
			started = true
		}
	}
	switch {
	case !started:
		for _, p := range m.parts {
			r := rs.rails[p.rail]
			for i, q := range r.q {
				if q == p {
					r.q = append(r.q[:i], r.q[i+1:]...)
					break
				}
			}
		}
		m.skip, m.data, m.reqAck = true, nil, false
		shares, _ := rs.planner.plan(0, nil)
		p := &outPart{msg: m, rail: shares[0].Rail}
		m.parts, m.unsent = []*outPart{p}, 1
		r := rs.rails[p.rail]
		r.q = append(r.q, p)
		r.signal()
		return cancelWithdrawn
	case m.unsent == 0 && m.inflight == 0:
		m.data = append([]byte(nil), m.data...)
		m.owned = true
		return cancelCopied
	default:
		return cancelBreak
	}
}

// ---------------------------------------------------------------- failure

// failRail takes rail r down: its queued parts and the parts it carried
// for messages not yet acknowledged move to the rails still up, it is
// closed, and OnRailDown is told. With no rail left the RailSet fails.
func (rs *RailSet) failRail(r *rail, cause error) {
	rs.mu.Lock()
	if !r.alive {
		rs.mu.Unlock()
		return
	}
	quiet := rs.peerBye || rs.c.isClosed()
	if errors.Is(cause, errRailBye) {
		cause = ErrPeerClosed
	}
	r.alive, r.err = false, cause
	close(r.quit)
	if rs.lent == r {
		rs.lent = nil
	}
	r.lent = false
	rs.live[r.idx] = false
	rs.nlive--
	moved := r.q
	r.q = nil
	for _, m := range rs.unacked {
		for _, p := range m.parts {
			if p.rail == r.idx && p.state != partQueued {
				moved = append(moved, p)
			}
		}
	}
	terminated := false
	if rs.nlive == 0 {
		terminated = rs.terminateLocked(cause)
	} else {
		rs.replanLocked()
		// Oldest messages first: the receiver delivers in order.
		sort.SliceStable(moved, func(i, j int) bool { return moved[i].msg.seq < moved[j].msg.seq })
		now := time.Now()
		start := rs.startBuf[:len(rs.rails)]
		front := make(map[*rail][]*outPart)
		for _, p := range moved {
			if p.msg.acked {
				continue
			}
			if p.state == partSent {
				p.msg.unsent++
			}
			p.state = partQueued
			p.gen++
			for i, x := range rs.rails {
				start[i] = 0
				if d := x.freeAt.Sub(now); d > 0 {
					start[i] = d.Seconds()
				}
			}
			shares, _ := rs.planner.mux(p.n, start)
			p.rail = shares[0].Rail
			to := rs.rails[p.rail]
			front[to] = append(front[to], p)
			rs.chargeLocked(to, p.n, now)
			to.stats.Resent++
		}
		for to, ps := range front {
			to.q = append(ps, to.q...)
			to.signal()
		}
	}
	var ev RailEvent
	if !quiet {
		ev = RailEvent{Peer: rs.peer, Rail: r.idx, Err: cause}
		ev.Model, ev.Live = rs.liveModelLocked()
	}
	rs.sendChangedLocked()
	rs.recvChangedLocked()
	rs.mu.Unlock()

	_ = r.link.Close()
	if terminated && rs.router != nil {
		rs.router.unregister(rs.peer, rs)
	}
	if quiet {
		return
	}
	rs.log.Warn("transport: rail down", "peer", rs.peer, "rail", r.idx, "remote", r.link.RemoteAddr().String(),
		"live", len(ev.Live), "err", cause)
	if cb := rs.cfg.OnRailDown; cb != nil {
		rs.evMu.Lock()
		cb(ev)
		rs.evMu.Unlock()
	}
}

// terminateLocked records that no rail is left. It reports whether this
// call did.
func (rs *RailSet) terminateLocked(cause error) bool {
	if rs.err != nil {
		return false
	}
	switch {
	case rs.c.isClosed():
		rs.err = ErrClosed
	case rs.peerBye:
		rs.err = ErrPeerClosed
	default:
		rs.err = fmt.Errorf("%w: every rail failed, the last with: %w", ErrPeerClosed, cause)
	}
	// No tick from now on (watchLocked checks err): ackLoop may have
	// returned already.
	rs.ticking = false
	rs.tick.Stop()
	rs.sendChangedLocked()
	rs.recvChangedLocked()
	rs.wakeAcker()
	return true
}

// Close closes the RailSet: it tells the peer (best effort), closes every
// link and waits for its goroutines. Pending Send and Recv fail with
// ErrClosed. It is idempotent.
func (rs *RailSet) Close() error {
	rs.c.close(func() {
		rs.sayBye()
		rs.mu.Lock()
		for _, r := range rs.rails {
			if r.alive {
				r.alive, r.err = false, ErrClosed
				close(r.quit)
				rs.live[r.idx] = false
			}
		}
		rs.nlive = 0
		rs.terminateLocked(ErrClosed)
		rs.mu.Unlock()
		for _, r := range rs.rails {
			_ = r.link.Close()
		}
		rs.wg.Wait()
		if rs.router != nil {
			rs.router.unregister(rs.peer, rs)
		}
	})
	return nil
}

// sayBye sends a goodbye on every live rail, so that the peer takes the
// links' end for a close, not for rail failures.
func (rs *RailSet) sayBye() {
	rs.mu.Lock()
	var live []*rail
	for _, r := range rs.rails {
		if r.alive {
			live = append(live, r)
		}
	}
	ack := rs.complete
	rs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), railByeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [railHeadSize]byte
			putRailHead(b[:], &railHead{Kind: railKindBye, Rail: uint16(r.idx), Ack: ack})
			_ = r.link.Send(ctx, Header{Type: MsgRail, Flags: uint16(r.idx)}, b[:])
		}()
	}
	wg.Wait()
}

// ---------------------------------------------------------------- receiving

// Recv returns the next message, in the order the peer sent them.
func (rs *RailSet) Recv(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, rs.opErr("recv", err)
	}
	rs.mu.Lock()
	rs.recvIn++
	m, err := rs.recvLocked(ctx)
	rs.recvIn--
	rs.leaveRecvLocked()
	rs.mu.Unlock()
	if err != nil {
		return Message{}, rs.opErr("recv", err)
	}
	return m, nil
}

func (rs *RailSet) recvLocked(ctx context.Context) (Message, error) {
	for {
		if rs.c.isClosed() {
			return Message{}, ErrClosed
		}
		if rs.readyHead < len(rs.ready) {
			m := rs.ready[rs.readyHead]
			rs.ready[rs.readyHead] = Message{}
			rs.readyHead++
			if rs.readyHead == len(rs.ready) {
				rs.ready, rs.readyHead = rs.ready[:0], 0
			}
			full := rs.readyBytes >= int64(rs.cfg.RecvBuffer)
			rs.readyBytes -= int64(len(m.Payload))
			if full && rs.readyBytes < int64(rs.cfg.RecvBuffer) {
				rs.recvChangedLocked() // readers waiting for room
			}
			return m, nil
		}
		if rs.err != nil {
			return Message{}, rs.err
		}
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		if r := rs.lent; r != nil && !r.callerIn {
			rs.readLent(ctx, r)
			continue
		}
		ch := rs.recvCh
		rs.recvWait++
		rs.recvCallers++
		rs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		case <-rs.c.quit:
		}
		rs.mu.Lock()
		rs.recvWait--
		rs.recvCallers--
	}
}

// Reading. Each rail has a reader goroutine (readLoop), which reads its
// frames and hands the messages they complete to the Recv callers. A
// hand-off from one goroutine to another costs more than the rest of a
// small message's way through the rail layer: with an idle CPU, waking
// the Recv caller makes the runtime wake a second thread too. So once the
// reader goroutine of a rail has handed a waiting Recv caller a message,
// it lends the rail to the Recv callers and waits: from then on, a Recv
// caller with nothing to return reads that rail itself (readLent), as it
// would a plain link. Only links whose wait for a frame can be stopped
// (stoppableLink) are lent, at most one rail at a time, and never while a
// part's data frame is due (the callers read headers and inline parts,
// never a large part's bytes, so a Recv's ctx is obeyed within one small
// frame). A Recv caller reading the lent rail is stopped when a message
// becomes ready through another rail (advanceLocked; this also covers
// another rail being lent instead) or its ctx ends, and fails when the
// rail goes down or the RailSet closes (the link is closed). While nobody
// calls Recv, the lent rail is not read, as a plain link is not; anyone
// else who needs its frames gets the rail back to its reader goroutine
// (unlendLocked): a Send that waits for acknowledgements or room, a part
// header announcing bytes to follow, the last Recv caller leaving while a
// Send waits, and the tick if nobody read the rail for a whole tick
// (tickLocked), so that a peer waiting for an acknowledgement, or a rail
// that failed, is never left unattended for long.

// readLent reads and handles one frame of the lent rail r in the Recv
// caller's goroutine. mu is held on entry and exit, not in between. The
// RailSet is not closed on entry (Close waits for readLent to return).
func (rs *RailSet) readLent(ctx context.Context, r *rail) {
	r.callerIn = true
	rs.lentReads++
	rs.wg.Add(1)
	defer rs.wg.Done()
	rs.mu.Unlock()
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, r.sl.stopRecv)
	}
	m, err := r.sl.recvStoppable()
	if stop != nil {
		stop()
	}
	if err == nil {
		err = rs.onFrame(r, &m)
	}
	if err != nil && err != errRecvStopped {
		rs.readFailed(r, err)
	}
	rs.mu.Lock()
	r.callerIn = false
	switch {
	case !r.alive:
		rs.readerGoneLocked(r)
	case !r.lent:
		signal(r.lendWake) // another rail was lent meanwhile
	case r.awaitData:
		// The part's bytes follow: the reader goroutine reads them.
		rs.unlendLocked()
	}
}

// leaveRecvLocked is called when a Recv caller returns: if the lent rail is
// left unread while someone waits for progress, they get it.
func (rs *RailSet) leaveRecvLocked() {
	r := rs.lent
	if r == nil || r.callerIn {
		return
	}
	switch {
	case rs.sendWait > 0:
		rs.unlendLocked()
	case rs.recvCallers > 0:
		rs.recvChangedLocked()
	default:
		rs.watchLocked() // the rail goes back to its reader if unread for long
	}
}

// lendLocked lends rail r to the Recv callers, if it can be: its reader
// goroutine has just handed a Recv caller a message. If another rail is
// lent, r takes its place once the messages keep coming on r.
func (rs *RailSet) lendLocked(r *rail) {
	if r.sl == nil || !r.alive || r.awaitData || rs.sendWait > 0 {
		return
	}
	if l := rs.lent; l != nil {
		if rs.lendMisses++; rs.lendMisses < railLendMisses {
			return
		}
		// l's reader goroutine resumes once the Recv caller reading it,
		// if any, is done with its frame (advanceLocked, our caller, has
		// stopped that caller's wait for one).
		l.lent = false
		if !l.callerIn {
			signal(l.lendWake)
		}
	}
	r.lent, rs.lent, rs.lendMisses = true, r, 0
	rs.lentReads++ // a lease starts (see tickLocked)
}

// unlendLocked gives the lent rail back to its reader goroutine, unless a
// Recv caller is reading it (readLent does, if needed, when it is done).
func (rs *RailSet) unlendLocked() {
	r := rs.lent
	if r == nil || r.callerIn {
		return
	}
	r.lent, rs.lent = false, nil
	signal(r.lendWake)
}

// signal wakes the goroutine that waits on ch (of capacity 1).
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// readLoop is rail r's reader goroutine: it reads the rail while the rail
// is not lent, until the rail goes down.
func (rs *RailSet) readLoop(r *rail) {
	defer rs.wg.Done()
	rs.readFailed(r, rs.readRail(r))
	rs.mu.Lock()
	r.readerOut = true
	rs.readerGoneLocked(r)
	rs.mu.Unlock()
}

// readFailed takes rail r down after reading or handling a frame of it
// failed.
func (rs *RailSet) readFailed(r *rail, err error) {
	var fe *FrameError
	if errors.As(err, &fe) {
		rs.log.Warn("transport: bad rail frame", "peer", rs.peer, "rail", r.idx, "err", err)
	}
	rs.failRail(r, err)
}

// readerGoneLocked closes r.readerDone once the rail is down and neither
// its reader goroutine nor a Recv caller reads it: nothing of this rail
// will be written in place any more, so the parts it was writing can take
// another rail's copy.
func (rs *RailSet) readerGoneLocked(r *rail) {
	if r.alive || !r.readerOut || r.callerIn || r.doneSent {
		return
	}
	r.doneSent = true
	for _, m := range rs.in {
		for _, p := range m.parts {
			if p.rail == r.idx && p.state == inClaimed {
				p.state = inAnnounced
			}
		}
	}
	close(r.readerDone)
}

func (rs *RailSet) readRail(r *rail) error {
	rs.mu.Lock()
	for {
		for r.alive && (r.lent || r.callerIn || rs.readyBytes >= int64(rs.cfg.RecvBuffer)) {
			if r.lent || r.callerIn {
				rs.mu.Unlock()
				select {
				case <-r.lendWake:
				case <-r.quit:
				}
				rs.mu.Lock()
				continue
			}
			ch := rs.recvCh
			rs.recvWait++
			rs.mu.Unlock()
			select {
			case <-ch:
			case <-r.quit:
			}
			rs.mu.Lock()
			rs.recvWait--
		}
		alive := r.alive
		rs.mu.Unlock()
		if !alive {
			return errRailDown
		}
		m, err := r.link.Recv(ioCtx)
		if err != nil {
			return err
		}
		if err := rs.onFrame(r, &m); err != nil {
			return err
		}
		rs.mu.Lock()
	}
}

// onFrame handles a frame read on rail r.
func (rs *RailSet) onFrame(r *rail, m *Message) error {
	switch m.Header.Type {
	case MsgRail:
		return rs.onRail(r, m)
	case MsgRailData:
		return rs.onData(r, m)
	}
	return &FrameError{Field: "rail outer type", Value: uint64(m.Header.Type), Err: ErrMalformed}
}

func (rs *RailSet) onRail(r *rail, m *Message) error {
	h, inline, err := decodeRailFrame(m.Payload, uint64(rs.maxMsg))
	if err != nil {
		return err
	}
	if int(h.Rail) != r.idx || int(m.Header.Flags) != r.idx {
		return railFrameErr("rail", uint64(h.Rail), uint64(r.idx), ErrMalformed)
	}
	if err := rs.onAck(h.Ack); err != nil {
		return err
	}
	switch h.Kind {
	case railKindAck:
		return nil
	case railKindBye:
		rs.mu.Lock()
		rs.peerBye = true
		rs.mu.Unlock()
		return errRailBye
	}
	return rs.onPart(r, &m.Header, &h, inline)
}

// onAck records that the peer has every message below v.
func (rs *RailSet) onAck(v uint64) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if v > rs.nextSeq {
		return railFrameErr("ack", v, rs.nextSeq, ErrMalformed)
	}
	n := 0
	for n < len(rs.unacked) && rs.unacked[n].seq < v {
		m := rs.unacked[n]
		m.acked = true
		rs.copied -= m.counted
		rs.unacked[n] = nil
		n++
	}
	if n > 0 {
		rs.unacked = rs.unacked[n:]
		if len(rs.unacked) == 0 {
			rs.unacked = nil
		}
		rs.sendChangedLocked()
	}
	return nil
}

// inMsgLocked returns the message being received under seq, creating it
// (and calling the upper Alloc, with allocMu only) if this is its first
// part. It returns nil if the message completed meanwhile. mu is held on
// entry and exit but released in between.
func (rs *RailSet) inMsgLocked(outer *Header, h *railHead, inline bool) *inMsg {
	if m := rs.in[h.Seq]; m != nil {
		return m
	}
	rs.mu.Unlock()
	rs.allocMu.Lock()
	defer rs.allocMu.Unlock()
	rs.mu.Lock()
	if m := rs.in[h.Seq]; m != nil || h.Seq < rs.complete {
		return m
	}
	if h.Kind == railKindSkip {
		m := &inMsg{skip: true, nparts: 1}
		rs.in[h.Seq] = m
		return m
	}
	rs.mu.Unlock()
	uh := Header{Version: outer.Version, Type: h.Type, Flags: h.UFlags, Job: outer.Job, Src: outer.Src,
		Comm: h.Comm, Tag: h.Tag, Seq: h.USeq, Len: h.Total}
	var buf []byte
	if rs.upper != nil {
		if b := rs.upper(uh); uint64(cap(b)) >= h.Total {
			buf = b[:h.Total]
		}
	}
	if buf == nil && !(h.Parts == 1 && inline) {
		buf = make([]byte, h.Total)
	}
	rs.mu.Lock()
	m := &inMsg{h: uh, nparts: h.Parts, buf: buf}
	rs.in[h.Seq] = m
	return m
}

// onPart handles a part announcement (or a skip) received on rail r.
func (rs *RailSet) onPart(r *rail, outer *Header, h *railHead, inline []byte) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// A part that is not inline is followed by its data frame on this
	// rail, whatever becomes of this header.
	r.awaitData = h.Kind == railKindPart && h.Flags&railFlagInline == 0
	if h.Seq < rs.complete {
		return nil // a copy of a complete message
	}
	if h.Seq-rs.complete >= railMaxReorder {
		return railFrameErr("seq", h.Seq, rs.complete+railMaxReorder-1, ErrMalformed)
	}
	m := rs.inMsgLocked(outer, h, inline != nil)
	if m == nil {
		return nil
	}
	if m.skip != (h.Kind == railKindSkip) {
		return railFrameErr("kind", uint64(h.Kind), 0, ErrMalformed)
	}
	if m.skip {
		if !m.complete {
			m.complete = true
			rs.advanceLocked(r)
		}
		return nil
	}
	if m.h.Type != h.Type || m.h.Flags != h.UFlags || m.h.Comm != h.Comm || m.h.Tag != h.Tag ||
		m.h.Seq != h.USeq || m.h.Len != h.Total || m.nparts != h.Parts {
		return railFrameErr("message header", h.Seq, 0, ErrMalformed)
	}
	if h.Flags&railFlagAckReq != 0 {
		m.reqAck = true
	}
	isInline := h.Flags&railFlagInline != 0
	p := m.part(h.Off)
	if p == nil {
		if uint32(len(m.parts)) >= m.nparts {
			return railFrameErr("parts", uint64(len(m.parts)+1), uint64(m.nparts), ErrMalformed)
		}
		for _, q := range m.parts {
			if h.Off < q.off+q.n && q.off < h.Off+h.Len {
				return railFrameErr("overlapping part", h.Off, 0, ErrMalformed)
			}
		}
		p = &inPart{off: h.Off, n: h.Len, crc: h.CRC, rail: r.idx, inline: isInline}
		m.parts = append(m.parts, p)
	} else {
		if p.n != h.Len || p.crc != h.CRC || p.inline != isInline {
			return railFrameErr("re-sent part", h.Off, 0, ErrMalformed)
		}
		if p.state == inDone {
			return nil
		}
		if p.rail == r.idx {
			return railFrameErr("part sent twice on one rail", h.Off, 0, ErrMalformed)
		}
		// The peer re-sent the part: it gave up on the rail that carried
		// it. Take that rail down too and wait until its reader can no
		// longer write in place.
		old := rs.rails[p.rail]
		rs.mu.Unlock()
		rs.failRail(old, errRailSuperseded)
		select {
		case <-old.readerDone:
		case <-r.quit:
		}
		rs.mu.Lock()
		if !r.alive {
			return errRailDown
		}
		if p.state == inDone {
			return nil
		}
		p.rail, p.state = r.idx, inAnnounced
	}
	if isInline {
		if m.buf != nil {
			copy(m.buf[p.off:p.off+p.n], inline)
		} else {
			m.inline = inline
		}
		return rs.partDoneLocked(r, m, p)
	}
	return nil
}

// onData handles the bytes of a part received on rail r.
func (rs *RailSet) onData(r *rail, msg *Message) error {
	fh := &msg.Header
	if int(fh.Flags) != r.idx {
		return railFrameErr("data rail", uint64(fh.Flags), uint64(r.idx), ErrMalformed)
	}
	seq, off := fh.Seq, railDataOffset(fh)
	payload := msg.Payload
	// The bytes are this rail's alone (its claim, or its own buffer):
	// check them before taking the lock.
	sum := crc32c(payload)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.awaitData = false
	if !r.alive {
		return errRailDown
	}
	if seq < rs.complete {
		return nil
	}
	m := rs.in[seq]
	var p *inPart
	if m != nil && !m.skip {
		p = m.part(off)
	}
	switch {
	case p == nil || p.inline:
		return railFrameErr("data without its part header", seq, 0, ErrMalformed)
	case uint64(len(payload)) != p.n:
		return railFrameErr("data length", uint64(len(payload)), p.n, ErrMalformed)
	case p.rail != r.idx || p.state == inDone:
		return railFrameErr("data of another rail's part", seq, 0, ErrMalformed)
	}
	if sum != p.crc {
		if p.state == inClaimed {
			p.state = inAnnounced
		}
		return railFrameErr("part checksum", uint64(sum), uint64(p.crc), ErrRailChecksum)
	}
	if &payload[0] != &m.buf[off] {
		// Read elsewhere (no Router, or the Alloc hook ran before the
		// part header was processed): copy into place. The claim keeps
		// the hook off these bytes meanwhile.
		p.state = inClaimed
		rs.copyIns++
		buf := m.buf
		rs.mu.Unlock()
		copy(buf[off:off+p.n], payload)
		rs.mu.Lock()
	}
	return rs.partDoneLocked(r, m, p)
}

// partDoneLocked marks p's bytes, received on rail r, as in place and
// checked.
func (rs *RailSet) partDoneLocked(r *rail, m *inMsg, p *inPart) error {
	p.state = inDone
	m.done++
	m.bytes += p.n
	if m.done < m.nparts {
		return nil
	}
	if m.bytes != m.h.Len {
		return railFrameErr("parts total", m.bytes, m.h.Len, ErrMalformed)
	}
	m.complete = true
	rs.advanceLocked(r)
	return nil
}

// advanceLocked moves the complete messages at the head of the sequence to
// the ready queue, and schedules the acknowledgement. from is the rail
// whose frame completed a message.
func (rs *RailSet) advanceLocked(from *rail) {
	advanced := false
	for {
		m := rs.in[rs.complete]
		if m == nil || !m.complete {
			break
		}
		delete(rs.in, rs.complete)
		rs.complete++
		advanced = true
		if m.reqAck {
			rs.ackNow = true
		}
		if m.skip {
			continue
		}
		payload := m.buf
		if payload == nil {
			payload = m.inline
		}
		if payload == nil {
			payload = []byte{}
		}
		rs.ready = append(rs.ready, Message{Header: m.h, Payload: payload})
		rs.readyBytes += int64(len(payload))
	}
	if !advanced {
		return
	}
	if l := rs.lent; l != nil && l.callerIn && l != from {
		l.sl.stopRecv() // the Recv caller reading it has a message now
	}
	if from.callerIn {
		rs.lendMisses = 0
	} else if rs.recvIn > 0 {
		// A hand-off: from's reader goroutine is done with the frame
		// (this is the last thing it does with it) and stops reading
		// from once lent.
		rs.lendLocked(from)
	}
	rs.recvChangedLocked()
	if rs.ackNow {
		rs.wakeAcker()
	} else {
		rs.watchLocked() // a message in the other direction may carry it
	}
}

// watchLocked starts the tick, if it is not running: an acknowledgement is
// due, or the lent rail was left unread.
func (rs *RailSet) watchLocked() {
	if !rs.ticking && rs.err == nil {
		rs.ticking = true
		rs.tick.Reset(rs.cfg.AckDelay)
	}
}

// tickLocked runs every AckDelay while there is something to watch. A
// tick keeps running while messages come in, rather than being started
// for each one: starting a timer wakes a thread when the process is idle,
// which costs a small message's round trip several microseconds.
//   - An acknowledgement that no message carried since the last tick is
//     sent now, so within AckDelay.
//   - The lent rail, if no Recv caller has read it since the last tick
//     and none is reading it, goes back to its reader goroutine: a peer
//     waiting for an acknowledgement (a large message, a full window)
//     gets it within two ticks even if nobody calls Recv.
//
// The tick stops after a tick with nothing to watch.
func (rs *RailSet) tickLocked() {
	active := false
	if rs.complete > rs.ackSent {
		rs.ackNow, active = true, true
	}
	if rs.complete != rs.tickSeen[0] {
		rs.tickSeen[0], active = rs.complete, true
	}
	if l := rs.lent; l != nil {
		switch {
		case rs.lentReads != rs.tickSeen[1]:
			rs.tickSeen[1], active = rs.lentReads, true
		case !l.callerIn:
			rs.unlendLocked()
		}
	}
	if !active {
		rs.ticking = false
		rs.tick.Stop()
	}
}

// allocPart is the Alloc hook for MsgRailData frames (see RailRouter): the
// bytes of an announced part land at their offset in the message's buffer.
func (rs *RailSet) allocPart(h Header) []byte {
	idx := int(h.Flags)
	off := railDataOffset(&h)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if idx >= len(rs.rails) || !rs.rails[idx].alive {
		return nil
	}
	m := rs.in[h.Seq]
	if m == nil || m.buf == nil {
		return nil
	}
	p := m.part(off)
	if p == nil || p.inline || p.n != h.Len || p.rail != idx || p.state != inAnnounced {
		return nil
	}
	p.state = inClaimed
	return m.buf[off : off+p.n : off+p.n]
}

// ackLoop sends acknowledgements that no message in the other direction
// carried in time, and runs the ticks.
func (rs *RailSet) ackLoop() {
	defer rs.wg.Done()
	defer rs.tick.Stop()
	for {
		tick := false
		select {
		case <-rs.ackCh:
		case <-rs.tick.C:
			tick = true
		case <-rs.c.quit:
			return
		}
		rs.mu.Lock()
		if rs.err != nil {
			rs.mu.Unlock()
			return
		}
		if tick {
			rs.tickLocked()
		}
		if !rs.ackNow || rs.complete <= rs.ackSent {
			rs.ackNow = false
			rs.mu.Unlock()
			continue
		}
		r := rs.ackRailLocked(time.Now())
		if r == nil {
			rs.mu.Unlock()
			return
		}
		val := rs.complete
		rs.ackNow = false
		rs.mu.Unlock()
		var b [railHeadSize]byte
		putRailHead(b[:], &railHead{Kind: railKindAck, Rail: uint16(r.idx), Ack: val})
		err := r.link.Send(ioCtx, Header{Type: MsgRail, Flags: uint16(r.idx)}, b[:])
		if err != nil {
			rs.failRail(r, err)
			rs.mu.Lock()
			rs.ackNow = true
			rs.mu.Unlock()
			rs.wakeAcker()
			continue
		}
		rs.mu.Lock()
		if val > rs.ackSent {
			rs.ackSent = val
		}
		rs.mu.Unlock()
	}
}

// ackRailLocked is the live rail predicted to deliver a tiny message first.
func (rs *RailSet) ackRailLocked(now time.Time) *rail {
	var best *rail
	var bt time.Time
	for _, r := range rs.rails {
		if !r.alive {
			continue
		}
		t := r.freeAt
		if t.Before(now) {
			t = now
		}
		t = t.Add(time.Duration(rs.costs[r.idx].Latency * float64(time.Second)))
		if best == nil || t.Before(bt) {
			best, bt = r, t
		}
	}
	return best
}
