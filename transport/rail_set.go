// The RailSet type, its configuration, constructor, accessors and Close.
// The rest of it: rail_send.go (sending), rail_ack.go (acknowledgements and
// the tick), rail_recv.go (receiving and reassembly), rail_lend.go (lending a
// rail to the Recv callers) and rail_fail.go (rail failure and fail-over).

package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
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

// Progress implements ProgressCounter: the payload bytes that arrived on
// every rail whose link counts them.
func (rs *RailSet) Progress() uint64 {
	total := uint64(0)
	for _, r := range rs.rails {
		if n, ok := Progress(r.link); ok {
			total += n
		}
	}
	return total
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

// Close closes the RailSet: it tells the peer (best effort), closes every
// link and waits for its goroutines. Pending Send and Recv fail with
// ErrClosed. It is idempotent.
func (rs *RailSet) Close() error {
	rs.c.Close(func() {
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
