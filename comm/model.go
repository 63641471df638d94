package comm

// The cost model and its upkeep: the probe at start-up and Reprobe, the
// rails' costs, drift proposals and their application, and links that
// emulate a model.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

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
	pcfg := w.cfg.ProbeConfig
	pcfg.Cuts = append(w.subnetCuts(), pcfg.Cuts...)
	if pcfg.Hosts == nil {
		pcfg.Hosts = w.machines()
	}
	res, err := netprobe.Directory(ctx, port, mode, pcfg, dir, w.probeKey(), func(msg string) {
		w.log.Warn("comm: " + msg)
	})
	if err != nil {
		return err
	}
	w.setModel(res.Model, res.Offsets)
	w.probed.Store(res)
	return nil
}

// subnetCuts groups the ranks by the subnet of their first rail's
// address (IPv4 /24, IPv6 /64) for the segment probe to test first: subnets are joined by
// routers, whose links the ranks of a subnet share. Nil when the ranks
// are all on one subnet or an address is not an IP address.
func (w *world) subnetCuts() [][]int {
	if w.dir == nil {
		return nil
	}
	groups := map[string][]int{}
	var order []string
	for r, h := range w.dir.Peers {
		hosts := h.RailHosts()
		if len(hosts) == 0 {
			return nil
		}
		ip := net.ParseIP(hosts[0])
		if ip == nil {
			return nil
		}
		key := ip.Mask(net.CIDRMask(64, 128)).String()
		if v4 := ip.To4(); v4 != nil {
			key = v4.Mask(net.CIDRMask(24, 32)).String()
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], r)
	}
	if len(order) < 2 {
		return nil
	}
	var cuts [][]int
	for _, k := range order {
		cuts = append(cuts, groups[k])
	}
	return cuts
}

// machines names the machine every rank runs on, for the segment probe
// (netprobe.Config.Hosts): its first rail's address (every loopback
// address is one machine), or, on in-process links (mem), its host name
// and process. Host names alone do not tell network namespaces of one
// machine apart, which testbeds use as hosts.
func (w *world) machines() []string {
	if w.dir == nil {
		return nil
	}
	out := make([]string, len(w.dir.Peers))
	for r, p := range w.dir.Peers {
		hosts := p.RailHosts()
		var ip net.IP
		if len(hosts) > 0 {
			ip = net.ParseIP(hosts[0])
		}
		switch {
		case w.kind == transport.KindMem:
			out[r] = fmt.Sprintf("%s/%d", p.Host, p.PID)
		case ip != nil && ip.IsLoopback():
			out[r] = "loopback"
		case ip != nil:
			out[r] = ip.String()
		case len(hosts) > 0:
			out[r] = hosts[0]
		}
	}
	return out
}

// probeKey names this world's network for the model cache.
func (w *world) probeKey() netprobe.Key {
	k := netprobe.Key{Transport: w.kind.String(), Hosts: make([]string, w.size), Rails: make([][]string, w.size)}
	if w.dir == nil {
		return k
	}
	for r, h := range w.dir.Peers {
		k.Hosts[r] = h.Host
		k.Rails[r] = h.RailHosts()
	}
	if w.numRails() > 1 {
		// The top-level costs sum the rails up under the policy.
		k.Transport += "+rails:" + w.cfg.RailPolicy.String()
	}
	if w.emulated != 0 {
		// Links shaped in user space are another network than the bare ones.
		k.Transport += fmt.Sprintf("+emulated:%016x", w.emulated)
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
func (w *world) numRails() int { return w.dir.Rails() }

// railProbePort is the probe's port on a world with several rails.
type railProbePort struct {
	probePort
	w *world
}

func (p railProbePort) Rails() int { return p.w.numRails() }

func (p railProbePort) RailPolicy() transport.RailPolicy { return p.w.cfg.RailPolicy }

// UseRail pins every RailSet of this rank to rail i: that rail looks free
// and infinitely fast, the others slow beyond any use.
// UseCosts implements netprobe.RailPort.
func (p railProbePort) UseCosts(m *collective.Model) { p.w.applyRailCosts(m) }

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
// The digest is computed once per model (models are never changed once
// installed), not on every Alltoallv: it reads all n x n pairs.
func (w *world) modelDigest() uint64 {
	m := w.model.Load()
	if c := w.digest.Load(); c != nil && c.model == m {
		return c.digest
	}
	d := m.Digest()
	w.digest.Store(&modelDigest{model: m, digest: d})
	return d
}

// modelDigest is a model with its digest.
type modelDigest struct {
	model  *collective.Model
	digest uint64
}

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

// Pace implements netprobe.PacedPort with the link's pacing (transport
// SetPacing); links that cannot pace say so.
func (p probePort) Pace(peer int, rate float64) error {
	if peer < 0 || peer >= p.c.Size() || peer == p.c.rank {
		return fmt.Errorf("%w: no link to rank %d", ErrArgument, peer)
	}
	l := p.c.w.links[p.c.group[peer]]
	if l == nil {
		return fmt.Errorf("%w: no link to rank %d", ErrArgument, peer)
	}
	return transport.SetPacing(l, rate)
}

func (p probePort) Gather(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return p.c.Gatherv(ctx, root, data)
}

func (p probePort) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	return p.c.Bcast(ctx, root, data)
}

// LoadModel reads a cost-model JSON file (the format of `hetbench probe
// -out`: latency and bandwidth matrices, row = sender) and validates it.
func LoadModel(path string) (*collective.Model, error) {
	return loadOnce(path, "model", loadModel)
}

func loadModel(path string) (*collective.Model, error) {
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

// LoadEmulation reads what HETCOMM_EMULATE names: a cost-model JSON file
// (LoadModel) or a netlab topology (docs/netlab.md; an object with
// "hosts"), whose shaping becomes a model of the rate and latency of every
// pair of hosts, in the file's order (what one TCP flow would get with
// nothing else running; shared backbones are not emulated).
func LoadEmulation(path string) (*collective.Model, error) {
	return loadOnce(path, "emulation", loadEmulation)
}

func loadEmulation(path string) (*collective.Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("comm: emulation: %w", err)
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil || keys["hosts"] == nil {
		return loadModel(path)
	}
	t, err := netlab.ParseBytes(b)
	if err != nil {
		return nil, fmt.Errorf("comm: emulation: topology %s: %w", path, err)
	}
	lat, rate, err := t.Rates()
	if err != nil {
		return nil, fmt.Errorf("comm: emulation: topology %s: %w", path, err)
	}
	m := &collective.Model{Latency: lat, Bandwidth: rate}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("comm: emulation: topology %s: %w", path, err)
	}
	return m, nil
}

// emulate shapes every link's sending side to the rates and delays of the
// model or topology named by Bootstrap.Emulate (none: nothing to do).
func (w *world) emulate() error {
	if w.boot.Emulate == "" {
		return nil
	}
	m, err := LoadEmulation(w.boot.Emulate)
	if err != nil {
		return fmt.Errorf("comm: init: %w", err)
	}
	if m.Size() != w.size {
		return fmt.Errorf("comm: init: emulation model %s describes %d ranks, the world has %d", w.boot.Emulate, m.Size(), w.size)
	}
	w.emulated = m.Digest()
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

// loaded keeps the models read from files, by what was read and how, so
// that the ranks of one process (an in-process world of hundreds) parse a
// file once rather than once each: 256 ranks parsing a 256-rank model
// twice each took most of the start-up's 20 s.
var loaded struct {
	sync.Mutex
	m map[loadKey]*collective.Model
}

type loadKey struct {
	how, path string
	size      int64
	mod       time.Time
}

// loadOnce returns a copy of what load(path) returns, reading the file
// only when it is new or has changed since (size or modification time).
// Errors are not kept.
func loadOnce(path, how string, load func(string) (*collective.Model, error)) (*collective.Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return load(path) // the loader names the problem
	}
	k := loadKey{how, path, st.Size(), st.ModTime()}
	loaded.Lock()
	defer loaded.Unlock()
	if m, ok := loaded.m[k]; ok {
		return m.Clone(), nil
	}
	m, err := load(path)
	if err != nil {
		return nil, err
	}
	if loaded.m == nil {
		loaded.m = map[loadKey]*collective.Model{}
	}
	if len(loaded.m) >= 16 {
		clear(loaded.m)
	}
	loaded.m[k] = m
	return m.Clone(), nil
}
