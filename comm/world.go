package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// Lock order: world.mu is the only mutex of the world; Comm has none. Never
// call a transport Send while holding world.mu.

// world is the state shared by every communicator of one process.
type world struct {
	rank, size int
	boot       *bootstrap.Bootstrap
	cfg        Config
	job        uint64
	log        *slog.Logger
	model      atomic.Pointer[collective.Model]
	modelGen   atomic.Uint64               // bumped when the model changes (plans are redone)
	digest     atomic.Pointer[modelDigest] // the model's digest, once computed
	offsets    atomic.Pointer[[]float64]
	probed     atomic.Pointer[netprobe.Result]
	dir        *bootstrap.Directory
	kind       transport.Kind
	emulated   uint64 // the emulated network's model digest (HETCOMM_EMULATE), 0: none
	driftMu    sync.Mutex
	drift      *netprobe.Drift // nil when disabled

	links     []transport.Link // by peer world rank; nil for self
	listeners []transport.Listener
	railDown  map[int]float64      // under driftMu: peers whose rails failed -> surviving rate
	railSets  []*transport.RailSet // by peer: the pairs with several rails

	mu     sync.Mutex
	queues map[uint32]*mqueue
	slots  map[slotKey]*slot
	// landers counts the posted receives with a buffer to land an eager
	// payload in (recvReq.land); landing maps such a payload, by its
	// first byte, to its receive until deliver hands it over (w.mu).
	landers  atomic.Int32
	landing  map[*byte]*recvReq
	failed   []error         // by peer: why it failed, nil while alive
	graceful []bool          // by peer: it left with a goodbye (not a failure)
	failCh   []chan struct{} // by peer: closed when it failed
	// failing: by peer, markGone has taken up its failure (it may still
	// be telling the other ranks before it records it in failed).
	failing []bool
	// linkEnd: by peer, closed when the read loop of its link ended (all
	// it sent before the end has been handled).
	linkEnd []chan struct{}
	// failOrder is closed when the latest markGone to start has recorded
	// its failure: the next records after it, so that failures are
	// recorded in the order they were noticed.
	failOrder chan struct{}
	// reports holds every reported failure not yet recorded (reported),
	// by the channel closed when it is.
	reports   map[chan struct{}]report
	reportSeq uint64
	closeRecv []bool // by peer: it sent MsgClose
	comms     map[*Comm]struct{}
	closing   bool

	nextID    atomic.Uint64
	lastRecv  []atomic.Int64 // unix nanos
	lastSend  []atomic.Int64
	busySince []atomic.Int64 // unix nanos when a payload from the peer started, 0 if none
	// lastProgress is each link's transport.Progress at the last
	// heartbeat tick (heartbeatLoop only).
	lastProgress []uint64
	// pulses is the liveness side channel (liveness.go), nil on mem or
	// if it could not be opened; set before the read loops start.
	pulses *transport.Pulses
	// pulseSeen: a pulse from the peer arrived, so pulses reach this
	// rank from it (liveness.go, silent); lastPulse: when the last one
	// did (unix nanos).
	pulseSeen []atomic.Bool
	lastPulse []atomic.Int64
	// started: something (a message, a pulse) came from the peer since
	// this rank's start, so it is past its own start-up (liveness.go).
	started []atomic.Bool

	// activity counts the messages sent and received other than the
	// refresher's and heartbeats (refresh.go).
	activity atomic.Int64
	// preGranted counts payloads sent to buffers their receiver granted
	// in advance (Alltoallv's naive exchange).
	preGranted atomic.Int64
	probing    atomic.Bool  // a probe (start-up or Reprobe) runs
	lowWater   atomic.Int64 // the links' receive low-water mark (transport.Config.LowWater)
	refresh    *refresher   // nil unless Config.Refresh

	epoch     time.Time // timeline clock origin
	quit      chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// ctx ids: communicator id << 1, low bit 1 for collective traffic.
func p2pCtx(id uint32) uint32  { return id << 1 }
func collCtx(id uint32) uint32 { return id<<1 | 1 }

// worldCommID is the id of the world communicator.
const worldCommID = 1

func newWorld(boot *bootstrap.Bootstrap, cfg Config) *world {
	n := boot.Size
	w := &world{
		rank: boot.Rank, size: n, boot: boot, cfg: cfg,
		log:          cfg.Logger,
		links:        make([]transport.Link, n),
		queues:       map[uint32]*mqueue{},
		landing:      map[*byte]*recvReq{},
		slots:        map[slotKey]*slot{},
		failed:       make([]error, n),
		graceful:     make([]bool, n),
		failCh:       make([]chan struct{}, n),
		failing:      make([]bool, n),
		linkEnd:      make([]chan struct{}, n),
		reports:      map[chan struct{}]report{},
		closeRecv:    make([]bool, n),
		comms:        map[*Comm]struct{}{},
		lastRecv:     make([]atomic.Int64, n),
		lastSend:     make([]atomic.Int64, n),
		busySince:    make([]atomic.Int64, n),
		lastProgress: make([]uint64, n),
		pulseSeen:    make([]atomic.Bool, n),
		lastPulse:    make([]atomic.Int64, n),
		started:      make([]atomic.Bool, n),
		epoch:        time.Now(),
		quit:         make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for i := range w.failCh {
		w.failCh[i] = make(chan struct{})
		w.linkEnd[i] = make(chan struct{})
	}
	w.job = bootstrap.JobID(boot.Job)
	return w
}

// Init joins this process to its world and returns the world
// communicator. It blocks until every rank has joined and authenticated,
// or fails after the bootstrap timeout with an error naming the ranks that
// are missing. cfg may be nil.
func Init(ctx context.Context, cfg *Config) (*Comm, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c, err := c.normalize()
	if err != nil {
		return nil, err
	}
	var boot *bootstrap.Bootstrap
	if c.Bootstrap == nil {
		boot, err = bootstrap.FromEnv(nil)
	} else {
		boot, err = c.Bootstrap.WithDefaults()
	}
	if err != nil {
		return nil, err
	}
	if boot.Watch != "" {
		// No rank outlives its launcher (hetrun), on any host. A rank that
		// cannot reach the launcher (another network namespace, a
		// firewall) runs on without the watch, and says so.
		if err := bootstrap.WatchLauncher(ctx, boot.Watch, watchDialTimeout, func(err error) {
			fmt.Fprintf(os.Stderr, "comm: rank %d: the launcher is gone (%v); exiting\n", boot.Rank, err)
			os.Exit(1)
		}); err != nil {
			fmt.Fprintf(os.Stderr, "comm: rank %d: warning: %v; this rank will not notice if the launcher dies\n", boot.Rank, err)
		}
	}
	if c.RailPolicy == transport.RailAuto && boot.RailPolicy != "" {
		if c.RailPolicy, err = transport.ParseRailPolicy(boot.RailPolicy); err != nil {
			return nil, fmt.Errorf("comm: init: %w", err)
		}
	}
	if c.Refresh == 0 {
		c.Refresh = boot.Refresh
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = boot.OpTimeout
	}
	w := newWorld(boot, c)
	if c.Drift >= 0 {
		w.drift = netprobe.NewDrift()
		if c.Drift > 0 {
			w.drift.Threshold = c.Drift
		}
	}
	model := c.Model
	if model == nil && boot.Model != "" {
		if model, err = LoadModel(boot.Model); err != nil {
			return nil, err
		}
	}
	if model != nil && model.Size() != boot.Size {
		return nil, fmt.Errorf("comm: init: the cost model describes %d ranks, the world has %d", model.Size(), boot.Size)
	}
	if model != nil {
		w.setModel(model, nil)
	}
	mode := c.Probe
	if mode == "" {
		mode = netprobe.Mode(boot.Probe)
	}
	if mode == "" {
		mode = netprobe.ModeCached
	}
	if _, err := netprobe.ParseMode(string(mode)); err != nil {
		return nil, fmt.Errorf("comm: config: %w", err)
	}
	if boot.Size > 1 {
		if err := w.connect(ctx); err != nil {
			w.shutdown()
			return nil, err
		}
		w.shareCPUs()
		w.start()
		if model == nil && mode != netprobe.ModeOff {
			pctx, cancel := context.WithTimeout(ctx, w.boot.Timeout)
			err := w.probe(pctx, mode)
			cancel()
			if err != nil {
				w.shutdown()
				return nil, fmt.Errorf("comm: init: probing the links: %w", err)
			}
		}
		w.startRefresh()
	}
	return w.newComm(worldCommID, identity(boot.Size), boot.Rank), nil
}

// watchDialTimeout bounds the connection to the launcher's watch port: a
// port behind a firewall that drops must not delay start-up long.
const watchDialTimeout = 3 * time.Second

// startProcs is GOMAXPROCS as the process started: the host's CPUs (or
// its container's share, or the GOMAXPROCS variable).
var startProcs = runtime.GOMAXPROCS(0)

// oversubscribedLowWater is the links' receive low-water mark when the
// world's processes outnumber their host's cores: a reader waiting for a
// large payload is woken once this much of it has arrived, not at every
// segment, and leaves the core to the processes that have work (4 ranks
// on 2 cores: a 1 MiB Alltoallv 20% faster). With a core each, early
// wake-ups let the reader copy while the sender writes, so the mark stays
// off.
const oversubscribedLowWater = 256 << 10

// oversubscribedSocketBuffer is the socket buffer size of loopback links
// when the host's processes outnumber its cores: with 4 ranks on 2 cores a
// 1 MiB Alltoallv took 6% less time than with the 256 KiB that serve a
// single busy link best (transport.LoopbackSocketBuffer), where 512 KiB
// halved the bandwidth.
const oversubscribedSocketBuffer = 512 << 10

// shareCPUs sets GOMAXPROCS as Config.CPUs says, and the links' receive
// low-water mark and loopback socket buffers when the host's processes
// outnumber its cores.
func (w *world) shareCPUs() {
	local := w.dir.LocalProcesses(w.rank)
	if local > runtime.NumCPU() {
		w.lowWater.Store(oversubscribedLowWater)
		for _, l := range w.links {
			if l != nil {
				transport.SetLoopbackBuffers(l, oversubscribedSocketBuffer)
			}
		}
	}
	if w.cfg.CPUs < 0 || (w.cfg.CPUs == 0 && os.Getenv("GOMAXPROCS") != "") {
		return
	}
	procs := w.cfg.CPUs
	if procs == 0 {
		if local == 1 {
			return
		}
		procs = startProcs / local
	}
	runtime.GOMAXPROCS(max(1, procs))
}

func identity(n int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	return g
}

// transportConfig derives the links' configuration; bootstrap.Connect adds
// the job's identity and secret.
func (w *world) transportConfig() transport.Config {
	t := w.cfg.Transport
	if t.MaxMessage == 0 && t.HandshakeTimeout == 0 && t.QUIC == (transport.QUICConfig{}) {
		def := transport.DefaultConfig()
		def.Logger, def.SocketBuffer, def.LocalAddr, def.UserTimeout = t.Logger, t.SocketBuffer, t.LocalAddr, t.UserTimeout
		t = def
	}
	if t.Logger == nil {
		t.Logger = w.log
	}
	t.Alloc = w.alloc
	if t.LowWater == nil {
		t.LowWater = func() int { return int(w.lowWater.Load()) }
	}
	return t
}

// connect meets the other ranks at the coordinator and connects to each
// (bootstrap.Connect), then emulates the links if asked to.
func (w *world) connect(ctx context.Context) error {
	cfg := bootstrap.Config{
		Transport: w.transportConfig(),
		RailCosts: func(peer, rails int) []transport.RailCost {
			costs, _ := netprobe.RailCosts(w.model.Load(), w.rank, peer, rails)
			return costs
		},
		RailPolicy: w.cfg.RailPolicy,
		OnRailDown: w.onRailDown,
		Logger:     w.log,
	}
	if w.cfg.FailAfter > 0 {
		cfg.RailUserTimeout = w.cfg.FailAfter * 2 / 5
	}
	mesh, err := bootstrap.Connect(ctx, w.boot, w.cfg.Network, cfg)
	if err != nil {
		return initErr(err)
	}
	w.dir, w.kind = mesh.Dir, mesh.Kind
	w.links, w.railSets, w.listeners = mesh.Links, mesh.RailSets, mesh.Listeners
	w.applyRailCosts(w.model.Load())
	return w.emulate()
}

// initErr is a start-up failure in comm's terms: a *RankError naming the
// rank that did not join or connect, or the bootstrap's error.
func initErr(err error) error {
	var pe *bootstrap.PeerError
	if errors.As(err, &pe) {
		return &RankError{Op: "init", Rank: pe.Rank, Err: &failure{msg: pe.Msg, cause: pe.Err}}
	}
	return fmt.Errorf("comm: init: %w", err)
}

// start launches the reader of every link and the heartbeat loop.
func (w *world) start() {
	now := time.Now().UnixNano()
	if w.cfg.Heartbeat > 0 {
		w.startPulses()
	}
	for p, l := range w.links {
		if l == nil {
			continue
		}
		w.lastRecv[p].Store(now)
		w.lastSend[p].Store(now)
		w.wg.Add(1)
		go w.readLoop(p, l)
	}
	if w.cfg.Heartbeat > 0 {
		w.tellPulseAddr()
		w.wg.Add(1)
		go w.heartbeatLoop()
	}
}

// readLoop receives every message of one link and dispatches it.
func (w *world) readLoop(peer int, l transport.Link) {
	defer w.wg.Done()
	for {
		m, err := l.Recv(context.Background())
		if err != nil {
			close(w.linkEnd[peer])
			w.linkDown(peer, err)
			return
		}
		w.busySince[peer].Store(0)
		heard(&w.lastRecv[peer], time.Now().UnixNano())
		w.started[peer].Store(true)
		h := m.Header
		if h.Type != transport.MsgHeartbeat && !isRefreshCtx(h.Comm) {
			w.activity.Add(1)
		}
		switch h.Type {
		case transport.MsgEager:
			w.deliver(h.Comm, &inMsg{src: peer, tag: h.Tag, flags: h.Flags, data: m.Payload, useq: h.Seq})
		case transport.MsgRTS:
			if len(m.Payload) != 16 {
				w.protocolError(peer, fmt.Sprintf("rendezvous request of %d bytes", len(m.Payload)))
				continue
			}
			size := int64(binary.BigEndian.Uint64(m.Payload))
			useq := binary.BigEndian.Uint64(m.Payload[8:])
			w.deliver(h.Comm, &inMsg{src: peer, tag: h.Tag, flags: h.Flags, rndv: true, id: h.Seq, size: size, useq: useq})
		case transport.MsgCTS:
			w.fire(slotKey{slotCTS, peer, h.Comm, h.Tag, h.Seq}, nil, 0)
		case transport.MsgRndvData:
			w.fireData(peer, h, m.Payload)
		case transport.MsgControl:
			var c control
			if err := transport.DecodeControl(m.Payload, &c); err != nil {
				w.protocolError(peer, "undecodable control message: "+err.Error())
				continue
			}
			w.onControl(peer, c)
		case transport.MsgHeartbeat:
		case transport.MsgClose:
			w.onClose(peer)
		default:
			// A newer peer's message type: ignore it.
		}
	}
}

// sendMsg sends one message to a peer, failing at once if it is gone.
func (w *world) sendMsg(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	return w.sendParts(ctx, peer, h, payload, nil)
}

// sendParts is sendMsg for the payload head followed by tail, which a
// stream link writes in one vectored write without joining them.
func (w *world) sendParts(ctx context.Context, peer int, h transport.Header, head, tail []byte) error {
	w.mu.Lock()
	why := w.failed[peer]
	closing := w.closing
	var ferr error
	if why != nil {
		ferr = w.failedErrLocked(h.Comm, peer)
	}
	w.mu.Unlock()
	if closing {
		return ErrClosed
	}
	if ferr != nil {
		return ferr
	}
	var err error
	if len(tail) == 0 {
		err = w.links[peer].Send(ctx, h, head)
	} else {
		err = transport.SendParts(ctx, w.links[peer], h, head, tail)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sending to rank %d: %w", peer, ctx.Err())
		}
		// The link broke: the peer's read loop is about to say why (its
		// last messages may tell: a rank that panicked reports it on its
		// way out). Give it a moment, so that the error names the cause.
		select {
		case <-w.failCh[peer]:
		case <-time.After(causeWait):
		case <-ctx.Done():
		}
		w.mu.Lock()
		if w.failed[peer] != nil {
			ferr = w.failedErrLocked(h.Comm, peer)
		}
		w.mu.Unlock()
		if ferr != nil {
			return ferr
		}
		return &RankError{Rank: peer, Err: &failure{msg: "send failed", cause: err}}
	}
	w.lastSend[peer].Store(time.Now().UnixNano())
	if !isRefreshCtx(h.Comm) {
		w.activity.Add(1)
	}
	return nil
}

// causeWait bounds how long a failed send waits for the peer's read loop
// to record why the peer is gone.
const causeWait = time.Second

// sortedInts returns a sorted copy.
func sortedInts(xs []int) []int {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	return s
}
