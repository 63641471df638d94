package comm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// Lock order: world.mu is the only mutex of the world; Comm has none. Never
// call a transport Send while holding world.mu.

// slotKind separates the two kinds of rendezvous slots.
type slotKind uint8

const (
	slotCTS  slotKind = 1 // at a sender: the receiver's grant
	slotData slotKind = 2 // at a receiver: the granted payload
)

// slotKey names one rendezvous: the peer, the context (communicator and
// p2p/collective), the tag and a sequence number.
type slotKey struct {
	kind slotKind
	peer int
	ctx  uint32
	tag  int32
	seq  uint64
}

// preGrantSeq is the sequence number of a payload sent to a buffer its
// receiver granted in advance (Alltoallv's naive exchange): the payload
// may be shorter than the buffer, which the receiver checks.
const preGrantSeq = ^uint64(0)

// slot is where one side of a rendezvous waits for the other.
type slot struct {
	ch    chan struct{} // closed when done or failed
	buf   []byte        // data slots: where the payload lands
	n     int           // bytes that arrived
	err   error
	done  bool
	begin time.Time // data slots: when the payload started to arrive
	at    time.Time // when it completed
}

// inMsg is a message (or a rendezvous request) waiting to be matched.
type inMsg struct {
	src   int // world rank
	tag   int32
	flags uint16
	data  []byte // eager payload
	rndv  bool
	id    uint64 // rendezvous id
	size  int64  // rendezvous size
	useq  uint64 // the sender's per-message sequence number (collectives)
}

// recvReq is a posted receive or probe.
type recvReq struct {
	src   int // world rank or anySource
	tag   int32
	useq  int64 // the message's sequence number, or -1 for any
	probe bool
	done  chan struct{}
	msg   *inMsg
	err   error
}

// mqueue holds one context's unmatched messages and receives.
type mqueue struct {
	unexpected []*inMsg
	posted     []*recvReq
	probes     []*recvReq
}

const (
	anySource = -1
	anyTag    = int32(-1 << 31)
)

// world is the state shared by every communicator of one process.
type world struct {
	rank, size int
	boot       *Bootstrap
	cfg        Config
	job        uint64
	log        *slog.Logger
	model      atomic.Pointer[collective.Model]
	modelGen   atomic.Uint64 // bumped when the model changes (plans are redone)
	offsets    atomic.Pointer[[]float64]
	probed     atomic.Pointer[netprobe.Result]
	dir        *directory
	kind       transport.Kind
	driftMu    sync.Mutex
	drift      *netprobe.Drift // nil when disabled

	links     []transport.Link // by peer world rank; nil for self
	listeners []transport.Listener
	router    *transport.RailRouter // with several rails: places their parts
	railDown  map[int]float64       // under driftMu: peers whose rails failed -> surviving rate
	railSets  []*transport.RailSet  // by peer: the pairs with several rails

	mu        sync.Mutex
	queues    map[uint32]*mqueue
	slots     map[slotKey]*slot
	failed    []error         // by peer: why it failed, nil while alive
	graceful  []bool          // by peer: it left with a goodbye (not a failure)
	failCh    []chan struct{} // by peer: closed when it failed
	closeRecv []bool          // by peer: it sent MsgClose
	comms     map[*Comm]struct{}
	closing   bool

	nextID    atomic.Uint64
	lastRecv  []atomic.Int64 // unix nanos
	lastSend  []atomic.Int64
	busySince []atomic.Int64 // unix nanos when a payload from the peer started, 0 if none

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

func newWorld(boot *Bootstrap, cfg Config) *world {
	n := boot.Size
	w := &world{
		rank: boot.Rank, size: n, boot: boot, cfg: cfg,
		log:       cfg.Logger,
		links:     make([]transport.Link, n),
		queues:    map[uint32]*mqueue{},
		slots:     map[slotKey]*slot{},
		failed:    make([]error, n),
		graceful:  make([]bool, n),
		failCh:    make([]chan struct{}, n),
		closeRecv: make([]bool, n),
		comms:     map[*Comm]struct{}{},
		lastRecv:  make([]atomic.Int64, n),
		lastSend:  make([]atomic.Int64, n),
		busySince: make([]atomic.Int64, n),
		epoch:     time.Now(),
		quit:      make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for i := range w.failCh {
		w.failCh[i] = make(chan struct{})
	}
	h := fnv.New64a()
	h.Write([]byte(boot.Job))
	w.job = h.Sum64()
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
	boot := c.Bootstrap
	if boot == nil {
		if boot, err = BootstrapFromEnv(nil); err != nil {
			return nil, err
		}
	} else {
		b := *boot
		if b.Timeout == 0 {
			b.Timeout = DefaultTimeout
		}
		if b.Transport == "" {
			b.Transport = "tcp"
		}
		if b.Job == "" {
			b.Job = "hetcomm-job"
		}
		boot = &b
		if err := boot.Validate(); err != nil {
			return nil, err
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
	local := localProcesses(w.dir.Peers, w.rank)
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

// localProcesses counts the processes of the world on rank me's host (the
// same host name; ranks of one process count once).
func localProcesses(peers []hello, me int) int {
	host := peers[me].Host
	pids := map[int]bool{peers[me].PID: true}
	for _, p := range peers {
		if host != "" && p.Host == host {
			pids[p.PID] = true
		}
	}
	return len(pids)
}

// probeCommID is the private communicator the probe runs on.
const probeCommID = 0

// probe runs the netprobe directory (cached or full) and installs its
// model and clock offsets.
func (w *world) probe(ctx context.Context, mode netprobe.Mode) error {
	// The refresher keeps out of the probe's way (refresh.go).
	w.probing.Store(true)
	defer w.probing.Store(false)
	pc := w.newComm(probeCommID, identity(w.size), w.rank)
	defer pc.Close()
	dir := w.cfg.CacheDir
	if dir == "" {
		dir = netprobe.DefaultCacheDir()
	}
	var port netprobe.Port = probePort{pc}
	if w.numRails() > 1 {
		port = railProbePort{probePort{pc}, w}
	}
	res, err := netprobe.Directory(ctx, port, mode, w.cfg.ProbeConfig, dir, w.probeKey(), func(msg string) {
		w.log.Warn("comm: " + msg)
	})
	if err != nil {
		return err
	}
	w.setModel(res.Model, res.Offsets)
	w.probed.Store(res)
	return nil
}

// probeKey names this world's network for the model cache.
func (w *world) probeKey() netprobe.Key {
	k := netprobe.Key{Transport: w.kind.String(), Hosts: make([]string, w.size), Rails: make([][]string, w.size)}
	if w.dir == nil {
		return k
	}
	for r, h := range w.dir.Peers {
		k.Hosts[r] = h.Host
		for _, a := range h.Addrs {
			k.Rails[r] = append(k.Rails[r], hostOf(a))
		}
	}
	if w.numRails() > 1 {
		// The top-level costs sum the rails up under the policy.
		k.Transport += "+rails:" + w.cfg.RailPolicy.String()
	}
	return k
}

// setModel installs a new cost model (and clock offsets, if known); plans
// made with the old one are dropped.
func (w *world) setModel(m *collective.Model, offsets []float64) {
	w.model.Store(m)
	if offsets != nil {
		w.offsets.Store(&offsets)
	}
	w.modelGen.Add(1)
	w.applyRailCosts(m)
}

// applyRailCosts gives every RailSet its rails' costs from a model that
// lists rails (rails this rank sends on: row w.rank).
func (w *world) applyRailCosts(m *collective.Model) {
	if m == nil || len(m.Rails) < 2 {
		return
	}
	for p, rs := range w.railSets {
		if rs == nil {
			continue
		}
		k := len(rs.Stats())
		costs, measured := netprobe.RailCosts(m, w.rank, p, k)
		if !measured {
			w.log.Warn("comm: the model's rail costs do not fit the rails", "peer", p, "rails", k, "model rails", len(m.Rails))
			continue
		}
		if err := rs.SetCosts(costs); err != nil {
			w.log.Warn("comm: the model's rail costs do not fit the rails", "peer", p, "err", err)
		}
	}
}

// numRails is the most rails any pair of ranks has in common (the same on
// every rank: it comes from the directory).
func (w *world) numRails() int {
	most := 1
	for a := range w.dir.Peers {
		for b := a + 1; b < len(w.dir.Peers); b++ {
			most = max(most, min(len(w.dir.Peers[a].Addrs), len(w.dir.Peers[b].Addrs)))
		}
	}
	return most
}

// railProbePort is the probe's port on a world with several rails.
type railProbePort struct {
	probePort
	w *world
}

func (p railProbePort) Rails() int                       { return p.w.numRails() }
func (p railProbePort) RailPolicy() transport.RailPolicy { return p.w.cfg.RailPolicy }

// UseRail pins every RailSet of this rank to rail i: that rail looks free
// and infinitely fast, the others slow beyond any use.
func (p railProbePort) UseRail(i int) {
	w := p.w
	for peer, rs := range w.railSets {
		if rs == nil {
			continue
		}
		k := len(rs.Stats())
		costs := make([]transport.RailCost, k)
		for j := range costs {
			costs[j] = transport.RailCost{Latency: 1, Bandwidth: 1}
		}
		if i < 0 {
			costs, _ = netprobe.RailCosts(w.model.Load(), w.rank, peer, k)
		} else {
			costs[min(i, k-1)] = transport.RailCost{Latency: 1e-9, Bandwidth: 1e12}
		}
		if err := rs.SetCosts(costs); err != nil {
			w.log.Warn("comm: pinning a rail for the probe", "peer", peer, "err", err)
		}
	}
}

// observe feeds a large transfer's measured rate (src's world rank) to the
// drift detector.
func (w *world) observe(src int, bytes int64, seconds float64) {
	m := w.model.Load()
	if w.drift == nil || m == nil || src == w.rank {
		return
	}
	w.driftMu.Lock()
	w.drift.Observe(src, bytes, seconds, m.Rate(src, w.rank))
	w.driftMu.Unlock()
}

// driftProposals returns the rates this rank proposes for its incoming
// links (by world rank), and forgets them.
func (w *world) driftProposals() map[int]float64 {
	if w.drift == nil {
		w.driftMu.Lock()
		defer w.driftMu.Unlock()
		props := w.railDown
		w.railDown = nil
		return props
	}
	w.driftMu.Lock()
	defer w.driftMu.Unlock()
	props := w.drift.Proposals()
	for src, rate := range w.railDown {
		if props == nil {
			props = map[int]float64{}
		}
		props[src] = rate
	}
	w.railDown = nil
	return props
}

// onRailDown is told when a rail to a peer fails; its RailSet has moved
// the traffic to the surviving rails. The pair's cost changes: this rank
// proposes the survivors' effective rate for the link from the peer, and
// the next world Alltoallv spreads the proposal as it spreads drift, so
// that every rank's model stays the same.
func (w *world) onRailDown(ev transport.RailEvent) {
	w.log.Warn("comm: a rail failed; traffic moved to the others", "peer", ev.Peer, "rail", ev.Rail, "err", ev.Err, "live", ev.Live)
	if len(ev.Live) == 0 {
		return
	}
	w.driftMu.Lock()
	if w.railDown == nil {
		w.railDown = map[int]float64{}
	}
	w.railDown[ev.Peer] = ev.Model.Effective(netprobe.RailRef).Bandwidth
	w.driftMu.Unlock()
}

// applyDrift installs proposed rates: props[dst] maps a source to the rate
// dst observed from it (world ranks). Every rank applies the same
// proposals, from the same exchange, so the models stay identical.
func (w *world) applyDrift(props map[int]map[int]float64) {
	m := w.model.Load()
	if m == nil || len(props) == 0 {
		return
	}
	var rates []collective.PairRate
	for dst, row := range props {
		for src, rate := range row {
			rates = append(rates, collective.PairRate{From: src, To: dst, Rate: rate})
		}
	}
	cp, changed := m.WithRates(rates)
	if changed {
		w.log.Info("comm: link rates drifted from the model; updated", "links", len(props))
		w.setModel(cp, nil)
	}
}

// modelDigest summarises the model, so that ranks can check they plan with
// the same one.
func (w *world) modelDigest() uint64 { return w.model.Load().Digest() }

// probePort lets netprobe talk through a communicator.
type probePort struct{ c *Comm }

func (p probePort) Rank() int { return p.c.Rank() }
func (p probePort) Size() int { return p.c.Size() }

// Send sends eagerly whatever the size, so that every probe message
// crosses the wire the same way (a rendezvous would add a round trip to
// the large ones only and bend the fitted line).
func (p probePort) Send(ctx context.Context, peer, tag int, data []byte) error {
	_, err := p.c.startSendMode(ctx, peer, p2pCtx(p.c.id), int32(tag), 0, data, true, 0)
	return err
}
func (p probePort) Recv(ctx context.Context, peer, tag int) ([]byte, error) {
	b, _, err := p.c.Recv(ctx, peer, tag)
	return b, err
}
func (p probePort) Probe(ctx context.Context, peer, tag int) error {
	_, err := p.c.Probe(ctx, peer, tag)
	return err
}
func (p probePort) Barrier(ctx context.Context) error { return p.c.Barrier(ctx) }
func (p probePort) Gather(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return p.c.Gatherv(ctx, root, data)
}
func (p probePort) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	return p.c.Bcast(ctx, root, data)
}

// LoadModel reads a cost-model JSON file (the format of `hetbench probe
// -out`: latency and bandwidth matrices, row = sender) and validates it.
func LoadModel(path string) (*collective.Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("comm: model: %w", err)
	}
	defer f.Close()
	var m collective.Model
	dec := jsonDecoder(f)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("comm: model %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("comm: model %s: %w", path, err)
	}
	return &m, nil
}

func identity(n int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	return g
}

// hello is what a rank tells the coordinator; the directory is every
// rank's hello.
type hello struct {
	Rank        int      `msgpack:"rank"`
	Addrs       []string `msgpack:"addrs"`
	Fingerprint string   `msgpack:"fp,omitempty"`
	Host        string   `msgpack:"host,omitempty"`
	PID         int      `msgpack:"pid"`
}

type directory struct {
	Peers []hello `msgpack:"peers"`
}

// control is a msgpack control message between ranks.
type control struct {
	Kind   string `msgpack:"kind"`
	Rank   int    `msgpack:"rank,omitempty"`
	Comm   uint32 `msgpack:"comm,omitempty"`
	Reason string `msgpack:"reason,omitempty"`
}

// transportConfig derives the link configuration.
func (w *world) transportConfig() (transport.Config, error) {
	t := w.cfg.Transport
	if t.MaxMessage == 0 && t.HandshakeTimeout == 0 && t.QUIC == (transport.QUICConfig{}) {
		def := transport.DefaultConfig()
		def.Logger, def.SocketBuffer, def.LocalAddr, def.UserTimeout = t.Logger, t.SocketBuffer, t.LocalAddr, t.UserTimeout
		t = def
	}
	if t.Logger == nil {
		t.Logger = w.log
	}
	t.JobID = w.job
	t.Rank = w.rank
	sum := sha256.Sum256(append([]byte("hetcomm job secret\x00"), w.boot.Secret...))
	t.Secret = sum[:]
	t.Alloc = w.alloc
	if t.LowWater == nil {
		t.LowWater = func() int { return int(w.lowWater.Load()) }
	}
	return t, t.Validate()
}

func (w *world) network() (transport.Network, transport.Kind, error) {
	if w.cfg.Network != nil {
		return w.cfg.Network, w.cfg.Network.Kind(), nil
	}
	k, err := transport.ParseKind(w.boot.Transport)
	if err != nil {
		return nil, 0, fmt.Errorf("comm: init: %w", err)
	}
	if k == transport.KindMem {
		return nil, 0, fmt.Errorf("comm: init: the mem transport needs Config.Network (a *transport.MemNetwork)")
	}
	n, err := transport.NetworkFor(k)
	return n, k, err
}

// connect meets the other ranks at the coordinator, then builds the mesh.
func (w *world) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.boot.Timeout)
	defer cancel()
	tcfg, err := w.transportConfig()
	if err != nil {
		return fmt.Errorf("comm: init: %w", err)
	}
	netw, kind, err := w.network()
	if err != nil {
		return err
	}
	if kind == transport.KindQUIC || kind == transport.KindTLS {
		if tcfg.Identity, err = transport.NewIdentity(w.job, w.rank); err != nil {
			return fmt.Errorf("comm: init: %w", err)
		}
	}
	// Listen on every rail before telling anyone where.
	me := hello{Rank: w.rank, PID: os.Getpid()}
	if tcfg.Identity != nil {
		me.Fingerprint = tcfg.Identity.Fingerprint.String()
	}
	addrs, err := w.listenAddrs(kind)
	if err != nil {
		return err
	}
	if len(addrs) > 1 {
		w.router = transport.NewRailRouter(w.alloc)
		tcfg.Alloc = w.router.Alloc
		if tcfg.UserTimeout == 0 && w.cfg.FailAfter > 0 {
			// A rail whose path goes silent must fail, and hand its
			// traffic to the others, well before the peer is declared
			// silent as a whole.
			tcfg.UserTimeout = w.cfg.FailAfter * 2 / 5
		}
	}
	for i, addr := range addrs {
		l, err := netw.Listen(addr, tcfg)
		if err != nil {
			return fmt.Errorf("comm: init: listening on %s: %w", addr, err)
		}
		w.listeners = append(w.listeners, l)
		me.Addrs = append(me.Addrs, advertise(l.Addr(), w.railHost(i)))
	}
	me.Host, _ = os.Hostname()

	// The coordinator speaks TCP on socket transports.
	coordNet := netw
	if kind != transport.KindMem {
		coordNet, _ = transport.NetworkFor(transport.KindTCP)
	}
	coordCfg := tcfg
	coordCfg.Alloc = nil
	var dir *directory
	if w.rank == 0 {
		dir, err = w.coordinate(ctx, coordNet, coordCfg, me)
	} else {
		dir, err = w.join(ctx, coordNet, coordCfg, me)
	}
	if err != nil {
		return err
	}
	w.dir, w.kind = dir, kind
	if err := w.mesh(ctx, netw, tcfg, dir); err != nil {
		return err
	}
	return w.emulate()
}

// emulate shapes every link's sending side to the rates and delays of the
// model named by Bootstrap.Emulate (none: nothing to do).
func (w *world) emulate() error {
	if w.boot.Emulate == "" {
		return nil
	}
	m, err := LoadModel(w.boot.Emulate)
	if err != nil {
		return fmt.Errorf("comm: init: emulation: %w", err)
	}
	if m.Size() != w.size {
		return fmt.Errorf("comm: init: emulation model %s describes %d ranks, the world has %d", w.boot.Emulate, m.Size(), w.size)
	}
	for p, l := range w.links {
		if l == nil {
			continue
		}
		s := transport.ShapeConfig{Rate: m.Rate(w.rank, p)}
		if m.Latency != nil {
			s.Delay = time.Duration(m.Latency[w.rank][p] * float64(time.Second))
		}
		shaped, err := transport.Shape(l, s)
		if err != nil {
			return fmt.Errorf("comm: init: emulating the link to rank %d: %w", p, err)
		}
		w.links[p] = shaped
	}
	return nil
}

// listenAddrs returns where each rail listens, after resolving rails
// given as networks to this host's address in them.
func (w *world) listenAddrs(kind transport.Kind) ([]string, error) {
	if kind == transport.KindMem {
		n := max(1, len(w.boot.Rails))
		addrs := make([]string, n)
		for i := range addrs {
			addrs[i] = fmt.Sprintf("%s/rank%d/rail%d", w.boot.Job, w.rank, i)
		}
		return addrs, nil
	}
	if len(w.boot.Rails) > 0 {
		rails, err := resolveRails(w.boot.Rails, net.InterfaceAddrs)
		if err != nil {
			return nil, err
		}
		w.boot.Rails = rails
		addrs := make([]string, len(rails))
		for i, r := range rails {
			addrs[i] = net.JoinHostPort(hostOf(r), "0")
		}
		return addrs, nil
	}
	return []string{net.JoinHostPort(w.localHost(), "0")}, nil
}

// resolveRails replaces every rail given as a network (CIDR, such as
// 10.77.2.0/24) with this host's address in it, so that one
// HETCOMM_RAILS serves every host of a job.
func resolveRails(rails []string, local func() ([]net.Addr, error)) ([]string, error) {
	out := make([]string, len(rails))
	for i, r := range rails {
		_, network, err := net.ParseCIDR(r)
		if err != nil {
			out[i] = r // an address
			continue
		}
		addrs, err := local()
		if err != nil {
			return nil, fmt.Errorf("comm: init: rail %d (%s): listing this host's addresses: %w", i, r, err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && network.Contains(ipn.IP) {
				out[i] = ipn.IP.String()
				break
			}
		}
		if out[i] == "" {
			return nil, fmt.Errorf("comm: init: rail %d (%s): this host has no address in that network", i, r)
		}
	}
	return out, nil
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// railHost is the host a rail advertises.
func (w *world) railHost(i int) string {
	if len(w.boot.Rails) > i {
		return hostOf(w.boot.Rails[i])
	}
	return w.localHost()
}

// localHost is the address other ranks reach this one at: HETCOMM_HOST,
// or the local end of the route to the coordinator.
func (w *world) localHost() string {
	if w.boot.Host != "" {
		return w.boot.Host
	}
	host, _, err := net.SplitHostPort(w.boot.Coord)
	if err != nil {
		return "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return "127.0.0.1"
	}
	// A UDP "connection" sends nothing; it only asks the kernel for a route.
	c, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// advertise replaces an unspecified listening host by host.
func advertise(a net.Addr, host string) string {
	s := a.String()
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return s
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host, p)
	}
	return s
}

func sendControl(ctx context.Context, l transport.Link, v any) error {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return err
	}
	return l.Send(ctx, transport.Header{Type: transport.MsgControl}, b)
}

func recvControl(ctx context.Context, l transport.Link, v any) error {
	m, err := l.Recv(ctx)
	if err != nil {
		return err
	}
	if m.Header.Type != transport.MsgControl {
		return fmt.Errorf("%w: expected a control message, got %v", ErrProtocol, m.Header.Type)
	}
	return msgpack.Unmarshal(m.Payload, v)
}

// coordinate runs the coordinator on rank 0: it waits until every rank has
// joined, then sends everyone the directory.
func (w *world) coordinate(ctx context.Context, netw transport.Network, cfg transport.Config, me hello) (*directory, error) {
	l, err := netw.Listen(bindAddr(w.boot.Coord), cfg)
	if err != nil {
		return nil, fmt.Errorf("comm: init: coordinator cannot listen on %s: %w", w.boot.Coord, err)
	}
	defer l.Close()
	dir := &directory{Peers: make([]hello, w.size)}
	dir.Peers[0] = me
	joined := make([]transport.Link, w.size)
	defer func() {
		for _, j := range joined {
			if j != nil {
				j.Close()
			}
		}
	}()
	type arrival struct {
		link transport.Link
		h    hello
	}
	arrivals := make(chan arrival)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			link, err := l.Accept(ctx)
			if err != nil {
				acceptErr <- err
				return
			}
			go func() {
				var h hello
				if err := recvControl(ctx, link, &h); err != nil || h.Rank != link.Peer() {
					w.log.Warn("comm: coordinator: bad hello", "peer", link.Peer(), "err", err)
					link.Close()
					return
				}
				select {
				case arrivals <- arrival{link, h}:
				case <-ctx.Done():
					link.Close()
				}
			}()
		}
	}()
	for n := 1; n < w.size; {
		select {
		case a := <-arrivals:
			r := a.h.Rank
			if r <= 0 || r >= w.size || joined[r] != nil {
				w.log.Warn("comm: coordinator: duplicate or invalid rank", "rank", r)
				a.link.Close()
				continue
			}
			joined[r], dir.Peers[r] = a.link, a.h
			n++
		case <-ctx.Done():
			var missing []int
			for r := 1; r < w.size; r++ {
				if joined[r] == nil {
					missing = append(missing, r)
				}
			}
			return nil, &RankError{Op: "init", Rank: missing[0],
				Err: &failure{msg: fmt.Sprintf("did not join the coordinator at %s within %v (missing ranks %v)", w.boot.Coord, w.boot.Timeout, missing), cause: ctx.Err()}}
		case err := <-acceptErr:
			return nil, fmt.Errorf("comm: init: coordinator: %w", err)
		}
	}
	for r := 1; r < w.size; r++ {
		if err := sendControl(ctx, joined[r], dir); err != nil {
			return nil, &RankError{Op: "init", Rank: r, Err: &failure{msg: "sending the directory", cause: err}}
		}
	}
	// Wait for every rank to hang up, so the directory is not lost.
	for r := 1; r < w.size; r++ {
		joined[r].Recv(ctx)
	}
	return dir, nil
}

// bindAddr turns the coordinator address into a listening address: its
// host when that is an IP address, every interface otherwise.
func bindAddr(coord string) string {
	h, p, err := net.SplitHostPort(coord)
	if err != nil {
		return coord
	}
	if net.ParseIP(h) != nil {
		return coord
	}
	if h == "localhost" {
		return net.JoinHostPort("127.0.0.1", p)
	}
	return net.JoinHostPort("", p)
}

// join dials the coordinator (retrying until it is up), says hello and
// waits for the directory.
func (w *world) join(ctx context.Context, netw transport.Network, cfg transport.Config, me hello) (*directory, error) {
	var link transport.Link
	backoff := 20 * time.Millisecond
	for {
		var err error
		link, err = netw.Dial(ctx, w.boot.Coord, 0, cfg)
		if err == nil {
			break
		}
		var ae *transport.AuthError
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("comm: init: authentication with the coordinator (rank 0 at %s) failed (wrong secret or job?): %w", w.boot.Coord, err)
		}
		select {
		case <-ctx.Done():
			return nil, &RankError{Op: "init", Rank: 0, Err: &failure{msg: fmt.Sprintf("cannot reach the coordinator at %s within %v", w.boot.Coord, w.boot.Timeout), cause: err}}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	defer link.Close()
	if err := sendControl(ctx, link, me); err != nil {
		return nil, &RankError{Op: "init", Rank: 0, Err: &failure{msg: "sending hello", cause: err}}
	}
	var dir directory
	if err := recvControl(ctx, link, &dir); err != nil {
		return nil, &RankError{Op: "init", Rank: 0, Err: &failure{msg: "waiting for the directory (some rank did not join?)", cause: err}}
	}
	if len(dir.Peers) != w.size {
		return nil, fmt.Errorf("%w: directory lists %d ranks, expected %d", ErrProtocol, len(dir.Peers), w.size)
	}
	return &dir, nil
}

// mesh connects every pair of ranks: each rank dials the lower ranks and
// accepts the higher ones, once per rail the two have in common (rail i of
// one to rail i of the other; a dialed link leaves from this rank's rail i
// address). A pair with several rails gets one RailSet over them.
func (w *world) mesh(ctx context.Context, netw transport.Network, cfg transport.Config, dir *directory) error {
	dialCfg := cfg
	for r, p := range dir.Peers {
		if p.Fingerprint != "" {
			fp, err := transport.ParseFingerprint(p.Fingerprint)
			if err != nil {
				return fmt.Errorf("%w: rank %d published a bad fingerprint: %v", ErrProtocol, r, err)
			}
			if dialCfg.Fingerprints == nil {
				dialCfg.Fingerprints = map[int]transport.Fingerprint{}
			}
			dialCfg.Fingerprints[r] = fp
		}
	}
	for r, p := range dir.Peers {
		if len(p.Addrs) == 0 {
			return fmt.Errorf("%w: rank %d published no address", ErrProtocol, r)
		}
	}
	rails := make([][]transport.Link, w.size) // by peer, then rail
	for p := range rails {
		if p != w.rank {
			rails[p] = make([]transport.Link, w.railsWith(p))
		}
	}
	var mu sync.Mutex
	errs := make(chan error, len(w.listeners)+1)
	for i, l := range w.listeners {
		go func() {
			need := 0
			for p := w.rank + 1; p < w.size; p++ {
				if i < len(rails[p]) {
					need++
				}
			}
			for need > 0 {
				link, err := l.Accept(ctx)
				if err != nil {
					errs <- w.meshErr(ctx, err)
					return
				}
				p := link.Peer()
				mu.Lock()
				ok := p > w.rank && p < w.size && i < len(rails[p]) && rails[p][i] == nil
				if ok {
					rails[p][i] = link
					need--
				}
				mu.Unlock()
				if !ok {
					w.log.Warn("comm: init: unexpected link", "peer", p, "rail", i)
					link.Close()
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for r := 0; r < w.rank; r++ {
			for i := range rails[r] {
				railCfg := dialCfg
				if len(w.boot.Rails) > i && w.kind != transport.KindMem {
					railCfg.LocalAddr = w.railHost(i)
				}
				var link transport.Link
				var err error
				for attempt := 0; ; attempt++ {
					link, err = netw.Dial(ctx, dir.Peers[r].Addrs[i], r, railCfg)
					if err == nil || ctx.Err() != nil || attempt > 50 {
						break
					}
					var ae *transport.AuthError
					if errors.As(err, &ae) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					errs <- &RankError{Op: "init", Rank: r, Err: &failure{msg: fmt.Sprintf("connecting rail %d", i), cause: err}}
					return
				}
				mu.Lock()
				rails[r][i] = link
				mu.Unlock()
			}
		}
		errs <- nil
	}()
	var first error
	for i := 0; i < len(w.listeners)+1; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		for _, ls := range rails {
			for _, l := range ls {
				if l != nil {
					l.Close()
				}
			}
		}
		return first
	}
	for p, ls := range rails {
		switch {
		case p == w.rank:
		case len(ls) == 1:
			w.links[p] = ls[0]
		default:
			guess, _ := netprobe.RailCosts(nil, w.rank, p, len(ls))
			rs, err := transport.NewRailSet(ls, transport.RailConfig{
				RailModel:  transport.RailModel{Costs: guess, Policy: w.cfg.RailPolicy},
				Router:     w.router,
				MaxMessage: cfg.MaxMessage,
				Logger:     w.log,
				OnRailDown: w.onRailDown,
			})
			if err != nil {
				return fmt.Errorf("comm: init: rails to rank %d: %w", p, err)
			}
			w.links[p] = rs
			if w.railSets == nil {
				w.railSets = make([]*transport.RailSet, w.size)
			}
			w.railSets[p] = rs
		}
	}
	w.applyRailCosts(w.model.Load())
	return nil
}

// railsWith returns how many rails this rank and peer have in common.
func (w *world) railsWith(peer int) int {
	return min(len(w.dir.Peers[w.rank].Addrs), len(w.dir.Peers[peer].Addrs))
}

func (w *world) meshErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		mu := []int{}
		for r := w.rank + 1; r < w.size; r++ {
			if w.links[r] == nil {
				mu = append(mu, r)
			}
		}
		if len(mu) > 0 {
			return &RankError{Op: "init", Rank: mu[0], Err: &failure{msg: fmt.Sprintf("ranks %v did not connect within %v", mu, w.boot.Timeout), cause: ctx.Err()}}
		}
	}
	return fmt.Errorf("comm: init: accepting links: %w", err)
}

// start launches the reader of every link and the heartbeat loop.
func (w *world) start() {
	now := time.Now().UnixNano()
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
		w.wg.Add(1)
		go w.heartbeatLoop()
	}
}

// alloc is the transport's Alloc hook: granted rendezvous payloads land
// straight in their destination buffer, eager ones in a pooled buffer
// (bufpool.go).
func (w *world) alloc(h transport.Header) []byte {
	peer := int(h.Src)
	if peer < 0 || peer >= w.size {
		return nil
	}
	now := time.Now()
	w.busySince[peer].Store(now.UnixNano())
	if h.Type == transport.MsgEager && poolClass(int(h.Len)) >= 0 {
		return getPayload(int(h.Len))
	}
	if h.Type != transport.MsgRndvData {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[slotKey{slotData, peer, h.Comm, h.Tag, h.Seq}]
	if s == nil || uint64(cap(s.buf)) < h.Len {
		return nil
	}
	s.begin = now
	return s.buf[:h.Len]
}

// readLoop receives every message of one link and dispatches it.
func (w *world) readLoop(peer int, l transport.Link) {
	defer w.wg.Done()
	for {
		m, err := l.Recv(context.Background())
		if err != nil {
			w.linkDown(peer, err)
			return
		}
		w.busySince[peer].Store(0)
		w.lastRecv[peer].Store(time.Now().UnixNano())
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
			if err := msgpack.Unmarshal(m.Payload, &c); err != nil {
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

func (w *world) protocolError(peer int, msg string) {
	w.log.Warn("comm: protocol error", "peer", peer, "err", msg)
	w.markFailed(peer, &failure{msg: "protocol error: " + msg, cause: ErrProtocol}, true)
}

// linkDown handles the end of a link.
func (w *world) linkDown(peer int, err error) {
	w.mu.Lock()
	closing, graceful := w.closing, w.closeRecv[peer]
	w.mu.Unlock()
	if closing || graceful {
		w.markClosed(peer)
		return
	}
	w.markFailed(peer, &failure{msg: "link lost (the process died or the network failed)", cause: err}, true)
}

func (w *world) onControl(peer int, c control) {
	switch c.Kind {
	case "failed":
		if c.Rank >= 0 && c.Rank < w.size && c.Rank != w.rank {
			w.markFailed(c.Rank, &failure{msg: fmt.Sprintf("reported failed by rank %d: %s", peer, c.Reason)}, false)
		}
	case "abort":
		w.mu.Lock()
		var target *Comm
		for x := range w.comms {
			if x.id == c.Comm {
				target = x
			}
		}
		w.mu.Unlock()
		if target != nil {
			target.breakWith(&RankError{Rank: peer, Err: fmt.Errorf("%w: %s", ErrMismatch, c.Reason)})
		}
	default:
		w.log.Warn("comm: unknown control message", "peer", peer, "kind", c.Kind)
	}
}

func (w *world) onClose(peer int) {
	w.mu.Lock()
	w.closeRecv[peer] = true
	w.mu.Unlock()
	w.markClosed(peer)
}

// markFailed records that peer is gone and fails everything that waits
// on it. With notify, the other ranks are told. A graceful close (the peer
// said goodbye) fails only what waits on that peer itself; a failure also
// fails wildcard receives and breaks every communicator holding the peer.
func (w *world) markFailed(peer int, why error, notify bool) {
	w.markGone(peer, why, notify, false)
}

// markClosed records a peer's graceful goodbye.
func (w *world) markClosed(peer int) {
	w.markGone(peer, &failure{msg: "closed its communicator"}, false, true)
}

func (w *world) markGone(peer int, why error, notify, graceful bool) {
	w.mu.Lock()
	if w.failed[peer] != nil {
		w.mu.Unlock()
		return
	}
	w.failed[peer] = why
	w.graceful[peer] = graceful
	close(w.failCh[peer])
	rerr := &RankError{Op: "", Rank: peer, Err: why}
	for ctxID, q := range w.queues {
		c := w.commOfCtx(ctxID)
		// Receives and probes from the peer fail; from any source too
		// when the peer failed and belongs to the communicator.
		fail := func(list []*recvReq) []*recvReq {
			keep := list[:0]
			for _, r := range list {
				if r.src == peer || !graceful && r.src == anySource && c != nil && c.hasWorldRank(peer) {
					r.err = rerr
					close(r.done)
					continue
				}
				keep = append(keep, r)
			}
			return keep
		}
		q.posted, q.probes = fail(q.posted), fail(q.probes)
	}
	for k, s := range w.slots {
		if k.peer == peer && !s.done {
			s.err, s.done = rerr, true
			close(s.ch)
		}
	}
	if !graceful {
		for c := range w.comms {
			if c.hasWorldRank(peer) {
				c.breakWith(rerr)
			}
		}
	}
	closing := w.closing
	w.mu.Unlock()
	if notify && !closing {
		w.log.Warn("comm: rank failed", "rank", peer, "reason", why.Error())
		msg := control{Kind: "failed", Rank: peer, Reason: why.Error()}
		for p, l := range w.links {
			if l == nil || p == peer || w.isFailed(p) {
				continue
			}
			w.wg.Add(1)
			go func(l transport.Link) {
				defer w.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				sendControl(ctx, l, msg)
			}(l)
		}
	}
}

func (w *world) isFailed(peer int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed[peer] != nil
}

// commOfCtx finds the communicator of a context id (w.mu held).
func (w *world) commOfCtx(ctxID uint32) *Comm {
	for c := range w.comms {
		if c.id == ctxID>>1 {
			return c
		}
	}
	return nil
}

// heartbeatLoop keeps idle links alive and declares silent peers failed.
func (w *world) heartbeatLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case now := <-t.C:
			for p, l := range w.links {
				if l == nil || w.isFailed(p) {
					continue
				}
				if now.UnixNano()-w.lastSend[p].Load() >= int64(w.cfg.Heartbeat) {
					w.wg.Add(1)
					go func(p int, l transport.Link) {
						defer w.wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Heartbeat)
						defer cancel()
						if l.Send(ctx, transport.Header{Type: transport.MsgHeartbeat}, nil) == nil {
							w.lastSend[p].Store(time.Now().UnixNano())
						}
					}(p, l)
				}
				if w.busySince[p].Load() == 0 && now.UnixNano()-w.lastRecv[p].Load() > int64(w.cfg.FailAfter) {
					w.markFailed(p, &failure{msg: fmt.Sprintf("silent for more than %v", w.cfg.FailAfter)}, true)
				}
			}
		}
	}
}

// close leaves the world gracefully: it tells every peer, waits (up to the
// bootstrap timeout) until every peer has said the same or failed, then
// closes the links and stops every goroutine.
func (w *world) close() error {
	w.closeOnce.Do(func() {
		w.stopRefresh()
		if w.size > 1 && w.links != nil {
			w.mu.Lock()
			w.closing = true
			w.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), w.boot.Timeout)
			var wg sync.WaitGroup
			for p, l := range w.links {
				if l == nil || w.isFailed(p) {
					continue
				}
				wg.Add(1)
				go func(l transport.Link) {
					defer wg.Done()
					l.Send(ctx, transport.Header{Type: transport.MsgClose}, nil)
				}(l)
			}
			wg.Wait()
			for p := range w.links {
				if p == w.rank {
					continue
				}
				select {
				case <-w.failCh[p]:
				case <-ctx.Done():
				}
			}
			cancel()
		}
		w.shutdown()
	})
	return w.closeErr
}

// shutdown closes everything without ceremony and waits for the
// goroutines.
func (w *world) shutdown() {
	w.stopRefresh()
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	for _, l := range w.listeners {
		l.Close()
	}
	for _, l := range w.links {
		if l != nil {
			l.Close()
		}
	}
	w.wg.Wait()
	// Fail whatever still waits.
	w.mu.Lock()
	for _, q := range w.queues {
		for _, r := range append(q.posted, q.probes...) {
			r.err = ErrClosed
			close(r.done)
		}
		q.posted, q.probes = nil, nil
	}
	for _, s := range w.slots {
		if !s.done {
			s.err, s.done = ErrClosed, true
			close(s.ch)
		}
	}
	w.mu.Unlock()
}

// queue returns a context's queue (w.mu held).
func (w *world) queue(ctxID uint32) *mqueue {
	q := w.queues[ctxID]
	if q == nil {
		q = &mqueue{}
		w.queues[ctxID] = q
	}
	return q
}

func matches(r *recvReq, m *inMsg) bool {
	return (r.src == anySource || r.src == m.src) && (r.tag == anyTag || r.tag == m.tag) && (r.useq < 0 || uint64(r.useq) == m.useq)
}

// deliver matches an arriving message with the oldest matching posted
// receive, or queues it.
func (w *world) deliver(ctxID uint32, m *inMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	for i, r := range q.posted {
		if matches(r, m) {
			q.posted = append(q.posted[:i], q.posted[i+1:]...)
			r.msg = m
			close(r.done)
			return
		}
	}
	q.unexpected = append(q.unexpected, m)
	keep := q.probes[:0]
	for _, r := range q.probes {
		if matches(r, m) {
			r.msg = m
			close(r.done)
			continue
		}
		keep = append(keep, r)
	}
	q.probes = keep
}

// post posts a receive (or a probe, which does not consume): it matches
// the oldest matching queued message, or waits.
func (w *world) post(ctxID uint32, src int, tag int32, useq int64, probe bool) *recvReq {
	r := &recvReq{src: src, tag: tag, useq: useq, probe: probe, done: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	for i, m := range q.unexpected {
		if matches(r, m) {
			if !probe {
				q.unexpected = append(q.unexpected[:i], q.unexpected[i+1:]...)
			}
			r.msg = m
			close(r.done)
			return r
		}
	}
	switch {
	case w.closing:
		r.err = ErrClosed
		close(r.done)
	case src != anySource && src != w.rank && w.failed[src] != nil:
		r.err = &RankError{Rank: src, Err: w.failed[src]}
		close(r.done)
	case probe:
		q.probes = append(q.probes, r)
	default:
		q.posted = append(q.posted, r)
	}
	return r
}

// unpost withdraws a receive whose wait was abandoned. If it was matched in
// the meantime, the message goes back to the front of the queue.
func (w *world) unpost(ctxID uint32, r *recvReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(ctxID)
	list := &q.posted
	if r.probe {
		list = &q.probes
	}
	for i, x := range *list {
		if x == r {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return
		}
	}
	if r.msg != nil && !r.probe {
		q.unexpected = append([]*inMsg{r.msg}, q.unexpected...)
		r.msg = nil
	}
}

// getSlot returns (creating it if needed) a rendezvous slot.
func (w *world) getSlot(k slotKey, buf []byte) *slot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[k]
	if s == nil {
		s = &slot{ch: make(chan struct{})}
		w.slots[k] = s
		if w.failed[k.peer] != nil && k.peer != w.rank {
			s.err, s.done = &RankError{Rank: k.peer, Err: w.failed[k.peer]}, true
			close(s.ch)
		}
	}
	if buf != nil {
		s.buf = buf
	}
	return s
}

// awaitSlot waits for slot k (peer's grant or payload) as await does,
// forgets it, and returns it (complete when the error is nil).
func (w *world) awaitSlot(ctx context.Context, k slotKey, c *Comm) (*slot, error) {
	s := w.getSlot(k, nil)
	defer w.dropSlot(k)
	if err := w.await(ctx, s.ch, k.peer, c); err != nil {
		return nil, err
	}
	return s, s.err
}

// dropSlot forgets a slot once its waiter is done with it.
func (w *world) dropSlot(k slotKey) {
	w.mu.Lock()
	delete(w.slots, k)
	w.mu.Unlock()
}

// fire completes a slot (creating it if the waiter has not come yet).
func (w *world) fire(k slotKey, err error, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[k]
	if s == nil {
		s = &slot{ch: make(chan struct{})}
		w.slots[k] = s
	}
	if s.done {
		return
	}
	s.err, s.n, s.done, s.at = err, n, true, time.Now()
	close(s.ch)
}

// fireData completes a data slot with a payload that (normally) already
// landed in the slot's buffer through alloc.
func (w *world) fireData(peer int, h transport.Header, payload []byte) {
	k := slotKey{slotData, peer, h.Comm, h.Tag, h.Seq}
	w.mu.Lock()
	s := w.slots[k]
	w.mu.Unlock()
	if s == nil && h.Seq == preGrantSeq {
		// The receiver granted the buffer in advance, then left the call
		// (its context ended, or the call failed) before this payload
		// came: the sender did nothing wrong.
		w.log.Debug("comm: dropping a payload for an abandoned Alltoallv", "peer", peer, "ctx", h.Comm, "tag", h.Tag, "bytes", len(payload))
		return
	}
	if s == nil {
		w.protocolError(peer, fmt.Sprintf("payload for an unknown rendezvous (ctx %d tag %d seq %d)", h.Comm, h.Tag, h.Seq))
		return
	}
	if len(payload) != len(s.buf) && (h.Seq != preGrantSeq || len(payload) > len(s.buf)) {
		w.fire(k, fmt.Errorf("%w: rank %d sent %d bytes, %d were expected", ErrMismatch, peer, len(payload), len(s.buf)), 0)
		return
	}
	if len(payload) > 0 && &payload[0] != &s.buf[0] {
		copy(s.buf, payload)
	}
	w.fire(k, nil, len(payload))
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
	w.mu.Unlock()
	if closing {
		return ErrClosed
	}
	if why != nil {
		return &RankError{Rank: peer, Err: why}
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
		w.mu.Lock()
		why = w.failed[peer]
		w.mu.Unlock()
		if why != nil {
			return &RankError{Rank: peer, Err: why}
		}
		return &RankError{Rank: peer, Err: &failure{msg: "send failed", cause: err}}
	}
	w.lastSend[peer].Store(time.Now().UnixNano())
	if !isRefreshCtx(h.Comm) {
		w.activity.Add(1)
	}
	return nil
}

// await waits for ch, failing early if peer (>= 0) fails, if c (non-nil)
// breaks, if ctx ends or if the world closes.
func (w *world) await(ctx context.Context, ch <-chan struct{}, peer int, c *Comm) error {
	select {
	case <-ch:
		return nil
	default:
	}
	var peerCh, brokenCh <-chan struct{}
	if peer >= 0 && peer != w.rank {
		peerCh = w.failCh[peer]
	}
	if c != nil {
		brokenCh = c.broken
	}
	select {
	case <-ch:
		return nil
	case <-peerCh:
		select {
		case <-ch:
			return nil
		default:
		}
		w.mu.Lock()
		why := w.failed[peer]
		w.mu.Unlock()
		return &RankError{Rank: peer, Err: why}
	case <-brokenCh:
		select {
		case <-ch:
			return nil
		default:
		}
		return c.brokenErr()
	case <-ctx.Done():
		if peer >= 0 {
			return fmt.Errorf("waiting for rank %d: %w", peer, ctx.Err())
		}
		return ctx.Err()
	case <-w.quit:
		return ErrClosed
	}
}

// sortedInts returns a sorted copy.
func sortedInts(xs []int) []int {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	return s
}
