package live

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

// The synthetic benchmark of the multi-network paper (Kim and Lilja,
// section 4.2, Table 3, Figure 12): a master sends N messages, each to a
// slave drawn uniformly, whose size follows, with probability b, a Poisson
// law of mean l1 (8 bytes), otherwise one of mean l2 (2 kB or 20 kB); the
// slave answers each complete message with 4 bytes and the master sends
// the next one when the answer arrives. It runs over each rail alone, mux,
// agg and muxagg, and reports times normalised to the slow rail alone.
//
// Two modes: on netlab hosts through an agent (-rsh, -hosts: each host's
// NICs are the rails, as the agent's NETLAB_ADDRS lists them, eth0 = slow,
// eth1 = fast), or in one process over loopback TCP with the transport's
// emulated shaping (transport.Shape) for machines without root.

// SyntheticType is one parameter set of the paper's Table 3.
type SyntheticType struct {
	Name  string
	Small float64 // b: the probability of a message of mean L1
	L1    float64 // mean size of small messages (bytes)
	L2    float64 // mean size of large messages (bytes)
}

// SyntheticTypes are Table 3's types A to F (K = 1024).
var SyntheticTypes = []SyntheticType{
	{"A", 0.5, 8, 2 << 10}, {"B", 0.1, 8, 2 << 10}, {"C", 0.9, 8, 2 << 10},
	{"D", 0.5, 8, 20 << 10}, {"E", 0.1, 8, 20 << 10}, {"F", 0.9, 8, 20 << 10},
}

// syntheticConfigs are the network options of Figure 12, in its order.
var syntheticConfigs = []string{"slow", "fast", "mux", "agg", "muxagg"}

// synthOptions are SyntheticCommand's settings.
type synthOptions struct {
	N         int
	Types     []SyntheticType
	Configs   []string
	Runs      int
	Seed      uint64
	Slaves    int
	Hosts     []string // netlab mode: master first, then the slaves
	Rsh       string
	Port      int
	SlowRate  float64 // loopback: Mbit/s
	FastRate  float64
	SlowDelay time.Duration // emulated one-way delay added to a rail
	FastDelay time.Duration
	MinChunk  int64
	SplitAt   int64
	Out       string
	Timeout   time.Duration

	rankPrefix []string // the command line that starts a rank (tests); default: this executable
}

func (o *synthOptions) netlab() bool { return o.Rsh != "" }

// shapes returns the emulated shaping of the two rails: rates only in
// loopback mode (on netlab the kernel shapes), delays in both.
func (o *synthOptions) shapes() []transport.ShapeConfig {
	s := []transport.ShapeConfig{{Delay: o.SlowDelay}, {Delay: o.FastDelay}}
	if !o.netlab() {
		s[0].Rate = o.SlowRate * 1e6 / 8
		s[1].Rate = o.FastRate * 1e6 / 8
	}
	return s
}

// SyntheticCommand implements `hetbench synthetic`. Its rank side is the
// hidden command `synthetic-rank` (SyntheticRankCommand), which the
// netlab mode starts on every host through the agent.
func SyntheticCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synthetic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := synthOptions{}
	fs.IntVar(&o.N, "n", 0, "messages per run (the paper: 10000; 0: 10000 on netlab, 500 in loopback)")
	types := fs.String("types", "ABCDEF", "Table 3 types to run")
	configs := fs.String("configs", strings.Join(syntheticConfigs, ","), "network options: slow, fast, mux, agg, muxagg")
	fs.IntVar(&o.Runs, "runs", 3, "runs (seeds) per type and option; the table shows medians")
	seed := fs.Uint64("seed", 1, "random seed")
	fs.IntVar(&o.Slaves, "slaves", 1, "slaves (p - 1); netlab: the hosts after the first")
	hosts := fs.String("hosts", "", "netlab mode: comma-separated hosts (names or addresses), the master first")
	fs.StringVar(&o.Rsh, "rsh", "", "netlab mode: the lab's agent, called as AGENT HOST COMMAND (e.g. /run/netlab/nl-dualnic4/agent)")
	fs.IntVar(&o.Port, "port", 47400, "netlab mode: first port; rail r of a slave listens on port+r")
	fs.Float64Var(&o.SlowRate, "slow-rate", 50, "loopback mode: the slow rail's rate in Mbit/s")
	fs.Float64Var(&o.FastRate, "fast-rate", 200, "loopback mode: the fast rail's rate in Mbit/s")
	slowDelay := fs.Duration("slow-delay", 0, "one-way delay emulated in user space on the slow rail")
	fastDelay := fs.Duration("fast-delay", -1, "one-way delay emulated in user space on the fast rail (-1: 0 on netlab, 2ms in loopback)")
	fs.Int64Var(&o.MinChunk, "min-chunk", 1024, "agg: smallest part on a rail, in bytes (the paper splits from 900 B)")
	fs.Int64Var(&o.SplitAt, "split-at", 0, "muxagg: split messages from this size on (0: derived from the probed costs)")
	fs.StringVar(&o.Out, "out", "bench/results/synthetic", "directory for the CSV, JSON and PNG files")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: hetbench synthetic [flags]

The multi-network paper's synthetic benchmark (Kim and Lilja, Table 3 and
Figure 12): a master sends N messages of Poisson sizes to random slaves,
each answered with 4 bytes, over the slow rail alone, the fast rail alone,
mux, agg and muxagg; times are normalised to the slow rail alone.

On netlab (as root):
  netlab up bench/topologies/dualnic4.json
  hetbench synthetic -rsh /run/netlab/nl-dualnic4/agent -hosts n1,n2
Without root, over loopback with emulated rates and delays:
  hetbench synthetic -n 500

Note: Go's timers sleep at least about 1 ms when the process is idle. An
emulated delay (-fast-delay) spins through its last millisecond, so it is
precise to a few microseconds; in loopback mode, the pacing of a message
shorter than 1 ms still costs about 1 ms.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := bench.ParseFlags(fs, "synthetic", args, false, stderr); !ok {
		return code
	}
	o.Seed = *seed
	o.SlowDelay = *slowDelay
	o.FastDelay = *fastDelay
	if *hosts != "" {
		o.Hosts = strings.Split(*hosts, ",")
	}
	if err := o.finish(*types, *configs); err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	res, err := runSynthetic(ctx, &o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitError
	}
	if err := res.report(&o, stdout); err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitError
	}
	return bench.ExitOK
}

// finish validates the options and fills in the mode defaults.
func (o *synthOptions) finish(types, configs string) error {
	if (o.Rsh == "") != (len(o.Hosts) == 0) {
		return errors.New("-rsh and -hosts go together (netlab mode)")
	}
	if o.netlab() {
		if len(o.Hosts) < 2 {
			return errors.New("-hosts needs the master and at least one slave")
		}
		o.Slaves = len(o.Hosts) - 1
	}
	if o.N == 0 {
		o.N = 10000
		if !o.netlab() {
			o.N = 500
		}
	}
	if o.FastDelay < 0 {
		o.FastDelay = 0
		if !o.netlab() {
			o.FastDelay = 2 * time.Millisecond
		}
	}
	switch {
	case o.N < 1 || o.Runs < 1 || o.Slaves < 1:
		return errors.New("-n, -runs and -slaves must be at least 1")
	case o.SlowRate <= 0 || o.FastRate <= 0:
		return errors.New("rates must be positive")
	case o.SlowDelay < 0 || o.FastDelay < 0 || o.MinChunk < 1 || o.SplitAt < 0:
		return errors.New("negative delay, -min-chunk or -split-at")
	}
	o.Types = nil
	for _, c := range strings.ToUpper(types) {
		i := slices.IndexFunc(SyntheticTypes, func(t SyntheticType) bool { return t.Name == string(c) })
		if i < 0 {
			return fmt.Errorf("unknown type %q (want A to F)", c)
		}
		o.Types = append(o.Types, SyntheticTypes[i])
	}
	o.Configs = nil
	for _, c := range strings.Split(configs, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(syntheticConfigs, c) {
			return fmt.Errorf("unknown option %q (want %s)", c, strings.Join(syntheticConfigs, ", "))
		}
		o.Configs = append(o.Configs, c)
	}
	if len(o.Types) == 0 || len(o.Configs) == 0 {
		return errors.New("no type or no option to run")
	}
	return nil
}

// ---------------------------------------------------------------- workload

// poisson draws from a Poisson law of mean lambda: Knuth's product of
// uniforms for small means, Hörmann's transformed rejection (PTRS) for
// means of 10 and more.
func poisson(rng *mrand.Rand, lambda float64) int {
	if lambda < 10 {
		limit, k, p := math.Exp(-lambda), 0, rng.Float64()
		for p > limit {
			k++
			p *= rng.Float64()
		}
		return k
	}
	slam, loglam := math.Sqrt(lambda), math.Log(lambda)
	b := 0.931 + 2.53*slam
	a := -0.059 + 0.02483*b
	invAlpha := 1.1239 + 1.1328/(b-3.4)
	vr := 0.9277 - 3.6224/(b-2)
	for {
		u := rng.Float64() - 0.5
		v := rng.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + lambda + 0.43)
		if us >= 0.07 && v <= vr {
			return int(k)
		}
		if k < 0 || us < 0.013 && v > us {
			continue
		}
		lg, _ := math.Lgamma(k + 1)
		if math.Log(v)+math.Log(invAlpha)-math.Log(a/(us*us)+b) <= -lambda+k*loglam-lg {
			return int(k)
		}
	}
}

// synthMessage is one event of the benchmark.
type synthMessage struct {
	Dest int // slave index
	Size int
}

// synthWorkload draws the N events of a type for a run.
func synthWorkload(t SyntheticType, n, slaves int, seed uint64) []synthMessage {
	rng := mrand.New(mrand.NewPCG(seed, uint64(t.Name[0])))
	msgs := make([]synthMessage, n)
	for i := range msgs {
		msgs[i].Dest = rng.IntN(slaves)
		mean := t.L2
		if rng.Float64() < t.Small {
			mean = t.L1
		}
		msgs[i].Size = poisson(rng, mean)
	}
	return msgs
}

// ---------------------------------------------------------------- ranks

const (
	synthJob     = 0x5717
	synthAckSize = 4
	synthSlave0  = 1000 // slave i has rank synthSlave0 + i
	envSecret    = "HETBENCH_SECRET"
)

// synthSetup is the first message on every link the master opens.
type synthSetup struct {
	Session int                     `json:"session"` // also the master's rank on this session
	Mode    string                  `json:"mode"`    // raw, rails, quit
	Index   int                     `json:"index"`   // this link's index in the session
	NICs    []int                   `json:"nics"`    // the NIC of each link of the session
	Policy  string                  `json:"policy,omitempty"`
	Costs   []transport.RailCost    `json:"costs,omitempty"` // per link
	Chunk   int64                   `json:"min_chunk,omitempty"`
	SplitAt int64                   `json:"split_at,omitempty"`
	Shapes  []transport.ShapeConfig `json:"shapes,omitempty"` // per NIC, applied by both ends
}

func synthConfig(rank int, secret []byte, alloc func(transport.Header) []byte) transport.Config {
	c := transport.DefaultConfig()
	c.JobID, c.Rank, c.Secret, c.MaxMessage = synthJob, rank, secret, 64<<20
	c.Alloc = alloc
	return c
}

func shapeLink(l transport.Link, s transport.ShapeConfig) (transport.Link, error) {
	if s == (transport.ShapeConfig{}) {
		return l, nil
	}
	return transport.Shape(l, s)
}

// synthSlave serves the master's sessions on the given addresses (one per
// NIC) until a quit session arrives or ctx ends. ready receives the bound
// addresses once it listens.
func synthSlave(ctx context.Context, index int, listen []string, secret []byte, ready func([]string)) error {
	var bufMu sync.Mutex
	bufs := map[uint32][]byte{} // per session (master rank): messages are consumed one at a time
	rt := transport.NewRailRouter(func(h transport.Header) []byte {
		if h.Type != transport.MsgEager || h.Len < 1024 {
			return nil
		}
		bufMu.Lock()
		defer bufMu.Unlock()
		b := bufs[h.Src]
		if uint64(cap(b)) < h.Len {
			b = make([]byte, max(h.Len, 64<<10))
			bufs[h.Src] = b
		}
		return b
	})
	cfg := synthConfig(synthSlave0+index, secret, rt.Alloc)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lns []transport.Listener
	var bound []string
	for _, a := range listen {
		ln, err := transport.Listen(transport.KindTCP, a, cfg)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return err
		}
		lns = append(lns, ln)
		bound = append(bound, ln.Addr().String())
	}
	if ready != nil {
		ready(bound)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	pending := map[int][]transport.Link{}
	var links []transport.Link // every session's link, closed at the end
	track := func(l transport.Link) {
		mu.Lock()
		links = append(links, l)
		mu.Unlock()
	}
	serve := func(l transport.Link) {
		m, err := l.Recv(ctx)
		if err != nil {
			_ = l.Close()
			return
		}
		var s synthSetup
		if err := json.Unmarshal(m.Payload, &s); err != nil || s.Index >= len(s.NICs) || s.NICs[s.Index] >= len(listen) {
			_ = l.Close()
			return
		}
		var shape transport.ShapeConfig
		if s.NICs[s.Index] < len(s.Shapes) {
			shape = s.Shapes[s.NICs[s.Index]]
		}
		switch s.Mode {
		case "quit":
			_ = l.Close()
			cancel()
			return
		case "raw":
			sl, err := shapeLink(l, shape)
			if err != nil {
				_ = l.Close()
				return
			}
			track(sl)
			synthEcho(ctx, sl)
			return
		case "rails":
		default:
			_ = l.Close()
			return
		}
		sl, err := shapeLink(l, shape)
		if err != nil {
			_ = l.Close()
			return
		}
		mu.Lock()
		ls := pending[s.Session]
		if ls == nil {
			ls = make([]transport.Link, len(s.NICs))
			pending[s.Session] = ls
		}
		ls[s.Index] = sl
		full := !slices.Contains(ls, nil)
		if full {
			delete(pending, s.Session)
		}
		mu.Unlock()
		if !full {
			return
		}
		policy, err := transport.ParseRailPolicy(s.Policy)
		if err != nil {
			closeLinks(ls)
			return
		}
		rs, err := transport.NewRailSet(ls, transport.RailConfig{
			RailModel: transport.RailModel{Costs: s.Costs, Policy: policy, MinChunk: s.Chunk, SplitAt: s.SplitAt},
			Router:    rt, MaxMessage: 64 << 20})
		if err != nil {
			closeLinks(ls)
			return
		}
		track(rs)
		synthEcho(ctx, rs)
	}
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := ln.Accept(ctx)
				if err != nil {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					serve(l)
				}()
			}
		}()
	}
	<-ctx.Done()
	for _, ln := range lns {
		_ = ln.Close()
	}
	mu.Lock()
	closeLinks(links)
	for _, ls := range pending {
		closeLinks(ls)
	}
	mu.Unlock()
	wg.Wait()
	return nil
}

func closeLinks(ls []transport.Link) {
	for _, l := range ls {
		if l != nil {
			_ = l.Close()
		}
	}
}

// synthEcho answers every message on l with synthAckSize bytes.
func synthEcho(ctx context.Context, l transport.Link) {
	defer l.Close()
	ack := make([]byte, synthAckSize)
	for {
		if _, err := l.Recv(ctx); err != nil {
			return
		}
		if err := l.Send(ctx, transport.Header{Type: transport.MsgEager}, ack); err != nil {
			return
		}
	}
}

// synthResult is what the master measured.
type synthResult struct {
	Mode    string                  `json:"mode"`
	N       int                     `json:"n"`
	Runs    int                     `json:"runs"`
	Slaves  int                     `json:"slaves"`
	Shapes  []transport.ShapeConfig `json:"shapes"`
	Costs   []transport.RailCost    `json:"costs"`         // probed: slow, fast
	MuxAt   int64                   `json:"mux_crossover"` // smallest size mux sends on the fast rail (-1: never, 0: always)
	SplitAt int64                   `json:"split_at"`      // muxagg splits from here
	// Seconds[type][config] lists each run's time; Predicted[type][config]
	// is the model's time for run 0's messages.
	Seconds   map[string]map[string][]float64 `json:"seconds"`
	Predicted map[string]map[string]float64   `json:"predicted"`
	// RailBytes[config] is the bytes each rail carried (master to slaves).
	RailBytes map[string][]uint64 `json:"rail_bytes"`
}

// synthMaster runs the benchmark against slaves at peers[i][nic]
// ("ip:port"), binding each NIC's links to local[nic] if set.
func synthMaster(ctx context.Context, o *synthOptions, local []string, peers [][]string, secret []byte, log io.Writer) (*synthResult, error) {
	shapes := o.shapes()
	res := &synthResult{N: o.N, Runs: o.Runs, Slaves: len(peers), Shapes: shapes,
		Seconds: map[string]map[string][]float64{}, Predicted: map[string]map[string]float64{}, RailBytes: map[string][]uint64{}}
	res.Mode = "loopback"
	if o.netlab() {
		res.Mode = "netlab"
	}
	session := 0
	var opened []transport.Link
	defer func() { closeLinks(opened) }()
	dialNIC := func(slave, nic int, s synthSetup, alloc func(transport.Header) []byte) (transport.Link, error) {
		cfg := synthConfig(s.Session, secret, alloc)
		if nic < len(local) {
			cfg.LocalAddr = local[nic]
		}
		var l transport.Link
		var err error
		for try := 0; ; try++ { // the slave may still be starting
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err = transport.Dial(dctx, transport.KindTCP, peers[slave][nic], synthSlave0+slave, cfg)
			cancel()
			if err == nil || try == 100 || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(s)
		if err := l.Send(ctx, transport.Header{Type: transport.MsgControl}, b); err != nil {
			_ = l.Close()
			return nil, err
		}
		return shapeLink(l, shapes[nic])
	}
	raw := func(slave, nic int) (transport.Link, error) {
		session++
		l, err := dialNIC(slave, nic, synthSetup{Session: session, Mode: "raw", NICs: []int{nic}, Shapes: shapes}, nil)
		if err == nil {
			opened = append(opened, l)
		}
		return l, err
	}
	rails := func(slave int, policy transport.RailPolicy, costs []transport.RailCost) (*transport.RailSet, error) {
		session++
		s := synthSetup{Session: session, Mode: "rails", NICs: []int{0, 1}, Policy: policy.String(), Costs: costs,
			Chunk: o.MinChunk, SplitAt: o.SplitAt, Shapes: shapes}
		rt := transport.NewRailRouter(nil)
		var ls []transport.Link
		for i := range s.NICs {
			s.Index = i
			l, err := dialNIC(slave, s.NICs[i], s, rt.Alloc)
			if err != nil {
				closeLinks(ls)
				return nil, err
			}
			ls = append(ls, l)
		}
		rs, err := transport.NewRailSet(ls, transport.RailConfig{
			RailModel: transport.RailModel{Costs: costs, Policy: policy, MinChunk: o.MinChunk, SplitAt: o.SplitAt},
			Router:    rt, MaxMessage: 64 << 20})
		if err != nil {
			closeLinks(ls)
			return nil, err
		}
		opened = append(opened, rs)
		return rs, nil
	}
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i)
	}
	pingpong := func(l transport.Link, size int) (float64, error) {
		start := time.Now()
		if err := l.Send(ctx, transport.Header{Type: transport.MsgEager}, payload[:size]); err != nil {
			return 0, err
		}
		m, err := l.Recv(ctx)
		if err != nil {
			return 0, err
		}
		if len(m.Payload) != synthAckSize {
			return 0, fmt.Errorf("an answer of %d bytes", len(m.Payload))
		}
		return time.Since(start).Seconds(), nil
	}

	// Probe each NIC towards slave 0 on a plain link: T is half the
	// median 8-byte round trip; B comes from back-to-back 256 KiB
	// messages (the steady state: tbf's bucket is empty after the first).
	for nic := range 2 {
		l, err := raw(0, nic)
		if err != nil {
			return nil, fmt.Errorf("probing NIC %d: %w", nic, err)
		}
		var small, big []float64
		for range 200 {
			x, err := pingpong(l, 8)
			if err != nil {
				return nil, err
			}
			small = append(small, x)
		}
		for i := range 8 {
			x, err := pingpong(l, 256<<10)
			if err != nil {
				return nil, err
			}
			if i >= 2 {
				big = append(big, x)
			}
		}
		// The median, not the minimum: an emulated delay rides on Go's
		// timers, whose precision depends on the load.
		rtt := collective.Median(small)
		tb := collective.Median(big)
		c := transport.RailCost{Latency: rtt / 2, Bandwidth: float64(256<<10) / math.Max(tb-rtt, 1e-9)}
		res.Costs = append(res.Costs, c)
		fmt.Fprintf(log, "# NIC %d (%s): T = %.1f us, B = %.2f MB/s\n", nic, synthRail(nic), 1e6*c.Latency, c.Bandwidth/1e6)
	}
	models := map[string]transport.RailModel{}
	for _, c := range o.Configs {
		switch c {
		case "mux":
			models[c] = transport.RailModel{Costs: res.Costs, Policy: transport.RailMux}
		case "agg":
			models[c] = transport.RailModel{Costs: res.Costs, Policy: transport.RailAgg, MinChunk: o.MinChunk}
		case "muxagg":
			models[c] = transport.RailModel{Costs: res.Costs, Policy: transport.RailMuxAgg, MinChunk: o.MinChunk, SplitAt: o.SplitAt}
		}
	}
	res.MuxAt = -1
	mux := transport.RailModel{Costs: res.Costs, Policy: transport.RailMux}
	for m := int64(0); m <= 1<<20; m++ {
		if mux.Split(m)[0].Rail == 1 {
			res.MuxAt = m
			break
		}
	}
	res.SplitAt = transport.RailModel{Costs: res.Costs, Policy: transport.RailMuxAgg, MinChunk: o.MinChunk, SplitAt: o.SplitAt}.Threshold()
	fmt.Fprintf(log, "# mux sends from %d B on the fast rail; muxagg splits from %d B\n", res.MuxAt, res.SplitAt)

	// One connection (or rail set) per option and slave.
	conns := map[string][]transport.Link{}
	for _, c := range o.Configs {
		for slave := range peers {
			var l transport.Link
			var err error
			switch c {
			case "slow":
				l, err = raw(slave, 0)
			case "fast":
				l, err = raw(slave, 1)
			default:
				l, err = rails(slave, models[c].Policy, res.Costs)
			}
			if err != nil {
				return nil, fmt.Errorf("connecting %s to slave %d: %w", c, slave, err)
			}
			for range 20 { // warm up
				if _, err := pingpong(l, 1000); err != nil {
					return nil, err
				}
			}
			conns[c] = append(conns[c], l)
		}
	}
	for _, c := range o.Configs {
		res.RailBytes[c] = make([]uint64, 2)
		for _, l := range conns[c] {
			if rs, ok := l.(*transport.RailSet); ok {
				for _, st := range rs.Stats() {
					res.RailBytes[c][st.Rail] -= st.Bytes // subtract the probe and warm-up
				}
			}
		}
	}
	predict := func(c string, msgs []synthMessage) float64 {
		t := 0.0
		for _, m := range msgs {
			switch c {
			case "slow", "fast":
				r := res.Costs[map[string]int{"slow": 0, "fast": 1}[c]]
				t += r.Time(int64(m.Size)) + r.Time(synthAckSize)
			default:
				t += models[c].Time(int64(m.Size)) + models[c].Time(synthAckSize)
			}
		}
		return t
	}

	start := time.Now()
	for run := range o.Runs {
		for ti, typ := range o.Types {
			msgs := synthWorkload(typ, o.N, len(peers), o.Seed+uint64(1000*run+ti))
			if res.Seconds[typ.Name] == nil {
				res.Seconds[typ.Name] = map[string][]float64{}
				res.Predicted[typ.Name] = map[string]float64{}
			}
			// The options in a rotating order, on the same messages.
			for ci := range o.Configs {
				c := o.Configs[(ci+run+ti)%len(o.Configs)]
				t0 := time.Now()
				for _, m := range msgs {
					if _, err := pingpong(conns[c][m.Dest], m.Size); err != nil {
						return nil, fmt.Errorf("type %s, %s: %w", typ.Name, c, err)
					}
				}
				sec := time.Since(t0).Seconds()
				res.Seconds[typ.Name][c] = append(res.Seconds[typ.Name][c], sec)
				if run == 0 {
					res.Predicted[typ.Name][c] = predict(c, msgs)
				}
				fmt.Fprintf(log, "# run %d type %s %-6s %8.3f s (model %.3f s) [%s]\n", run+1, typ.Name, c, sec,
					predict(c, msgs), time.Since(start).Round(time.Second))
			}
		}
	}
	for _, c := range o.Configs {
		for _, l := range conns[c] {
			if rs, ok := l.(*transport.RailSet); ok {
				for _, st := range rs.Stats() {
					res.RailBytes[c][st.Rail] += st.Bytes
				}
			}
		}
	}
	for c, b := range res.RailBytes {
		if b[0] == 0 && b[1] == 0 {
			delete(res.RailBytes, c)
		}
	}
	// Tell the slaves to stop.
	for slave := range peers {
		session++
		if l, err := dialNIC(slave, 0, synthSetup{Session: session, Mode: "quit", NICs: []int{0}}, nil); err == nil {
			_ = l.Close()
		}
	}
	return res, nil
}

func synthRail(nic int) string { return [...]string{"slow", "fast"}[nic] }

// ---------------------------------------------------------------- modes

// runSynthetic runs the benchmark in the mode the options select.
func runSynthetic(ctx context.Context, o *synthOptions, log io.Writer) (*synthResult, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if o.netlab() {
		return runSyntheticNetlab(ctx, o, hex.EncodeToString(secret), log)
	}
	// Loopback: the slaves are goroutines, each with one listener per
	// rail; both ends of every link shape what they send.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	peers := make([][]string, o.Slaves)
	errs := make(chan error, o.Slaves)
	for i := range o.Slaves {
		ready := make(chan []string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := synthSlave(ctx, i, []string{"127.0.0.1:0", "127.0.0.1:0"}, secret, func(a []string) { ready <- a }); err != nil {
				errs <- err
				close(ready)
			}
		}()
		a, ok := <-ready
		if !ok {
			return nil, <-errs
		}
		peers[i] = a
	}
	res, err := synthMaster(ctx, o, nil, peers, secret, log)
	cancel()
	wg.Wait()
	return res, err
}

// runSyntheticNetlab starts the master and the slaves on the lab's hosts
// through the agent and collects the master's result.
func runSyntheticNetlab(ctx context.Context, o *synthOptions, secret string, log io.Writer) (*synthResult, error) {
	log = &lockedWriter{w: log} // every rank's stderr goes there
	prefix := o.rankPrefix
	if prefix == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		prefix = []string{exe, "synthetic-rank"}
	}
	// Each host's NIC addresses, as the agent exports them.
	addrs := make([][]string, len(o.Hosts))
	for i, h := range o.Hosts {
		out, err := exec.CommandContext(ctx, o.Rsh, h, `echo "$NETLAB_ADDRS"`).Output()
		if err != nil {
			return nil, fmt.Errorf("asking %s for its addresses through %s: %w", h, o.Rsh, err)
		}
		addrs[i] = strings.Split(strings.TrimSpace(string(out)), ",")
		if len(addrs[i]) < 2 {
			return nil, fmt.Errorf("host %s has %d NIC(s) (%q): two rails are needed", h, len(addrs[i]), out)
		}
		addrs[i] = addrs[i][:2]
	}
	start := func(host string, args []string, stdout io.Writer) (*exec.Cmd, io.WriteCloser, error) {
		words := append(slices.Clone(prefix), args...)
		for i, w := range words {
			words[i] = shellQuote(w)
		}
		cmd := exec.CommandContext(ctx, o.Rsh, host, strings.Join(words, " "))
		cmd.Env = append(os.Environ(), envSecret+"="+secret)
		cmd.Stdout, cmd.Stderr = stdout, log
		stdin, err := cmd.StdinPipe() // ranks stop when it closes
		if err != nil {
			return nil, nil, err
		}
		return cmd, stdin, cmd.Start()
	}
	common := []string{"-n", fmt.Sprint(o.N), "-runs", fmt.Sprint(o.Runs), "-seed", fmt.Sprint(o.Seed),
		"-types", synthTypeNames(o.Types), "-configs", strings.Join(o.Configs, ","),
		"-slow-delay", o.SlowDelay.String(), "-fast-delay", o.FastDelay.String(),
		"-min-chunk", fmt.Sprint(o.MinChunk), "-split-at", fmt.Sprint(o.SplitAt), "-port", fmt.Sprint(o.Port)}
	var slaves []*exec.Cmd
	var stdins []io.WriteCloser
	defer func() {
		for _, s := range stdins {
			_ = s.Close()
		}
		for _, c := range slaves {
			_ = c.Wait()
		}
	}()
	var peers []string
	for i, h := range o.Hosts[1:] {
		args := append([]string{"-role", "slave", "-index", fmt.Sprint(i), "-addrs", strings.Join(addrs[i+1], ",")}, common...)
		cmd, stdin, err := start(h, args, log)
		if err != nil {
			return nil, fmt.Errorf("starting the slave on %s: %w", h, err)
		}
		slaves = append(slaves, cmd)
		stdins = append(stdins, stdin)
		var p []string
		for nic, a := range addrs[i+1] {
			p = append(p, net.JoinHostPort(a, fmt.Sprint(o.Port+nic)))
		}
		peers = append(peers, strings.Join(p, ","))
	}
	var out strings.Builder
	args := append([]string{"-role", "master", "-addrs", strings.Join(addrs[0], ","), "-peers", strings.Join(peers, ";")}, common...)
	master, stdin, err := start(o.Hosts[0], args, &out)
	if err != nil {
		return nil, fmt.Errorf("starting the master on %s: %w", o.Hosts[0], err)
	}
	err = master.Wait()
	_ = stdin.Close()
	if err != nil {
		return nil, fmt.Errorf("master on %s: %w", o.Hosts[0], err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "SYNTHETIC "); ok {
			var res synthResult
			if err := json.Unmarshal([]byte(rest), &res); err != nil {
				return nil, fmt.Errorf("the master's result: %w", err)
			}
			return &res, nil
		}
	}
	return nil, fmt.Errorf("no result from the master: %q", out.String())
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./,:=;", r))
	}) < 0 && !strings.Contains(s, ";") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func synthTypeNames(ts []SyntheticType) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Name)
	}
	return b.String()
}

// SyntheticRankCommand is the rank side of `hetbench synthetic` in netlab
// mode (the hidden command synthetic-rank): a slave serves the master's
// sessions, the master runs the benchmark and prints its result. Both
// stop when their standard input closes. The per-job secret comes from
// $HETBENCH_SECRET.
func SyntheticRankCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synthetic-rank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "master or slave")
	index := fs.Int("index", 0, "slave index")
	addrs := fs.String("addrs", "", "this host's NIC addresses, slow first")
	peers := fs.String("peers", "", "master: each slave's rail addresses (ip:port,ip:port;...)")
	o := synthOptions{Rsh: "agent"}
	fs.IntVar(&o.N, "n", 10000, "")
	fs.IntVar(&o.Runs, "runs", 3, "")
	fs.Uint64Var(&o.Seed, "seed", 1, "")
	types := fs.String("types", "ABCDEF", "")
	configs := fs.String("configs", strings.Join(syntheticConfigs, ","), "")
	fs.DurationVar(&o.SlowDelay, "slow-delay", 0, "")
	fs.DurationVar(&o.FastDelay, "fast-delay", 0, "")
	fs.Int64Var(&o.MinChunk, "min-chunk", 1024, "")
	fs.Int64Var(&o.SplitAt, "split-at", 0, "")
	fs.IntVar(&o.Port, "port", 47400, "")
	if err := fs.Parse(args); err != nil {
		return bench.ExitUsage
	}
	secret, err := hex.DecodeString(os.Getenv(envSecret))
	if err != nil || len(secret) < transport.MinSecretLen {
		fmt.Fprintf(stderr, "synthetic-rank: $%s must hold the job's secret (hex)\n", envSecret)
		return bench.ExitUsage
	}
	o.Hosts = []string{"master", "slave"}
	o.SlowRate, o.FastRate = 1, 1
	if err := o.finish(*types, *configs); err != nil {
		fmt.Fprintln(stderr, "synthetic-rank:", err)
		return bench.ExitUsage
	}
	nics := strings.Split(*addrs, ",")
	if len(nics) != 2 {
		fmt.Fprintln(stderr, "synthetic-rank: -addrs needs two addresses")
		return bench.ExitUsage
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // stop when the launcher goes away
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	switch *role {
	case "slave":
		var listen []string
		for i, a := range nics {
			listen = append(listen, net.JoinHostPort(a, fmt.Sprint(o.Port+i)))
		}
		if err := synthSlave(ctx, *index, listen, secret, nil); err != nil {
			fmt.Fprintln(stderr, "synthetic-rank:", err)
			return bench.ExitError
		}
		return bench.ExitOK
	case "master":
		var ps [][]string
		for _, p := range strings.Split(*peers, ";") {
			ps = append(ps, strings.Split(p, ","))
		}
		o.Slaves = len(ps)
		res, err := synthMaster(ctx, &o, nics, ps, secret, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "synthetic-rank:", err)
			return bench.ExitError
		}
		b, _ := json.Marshal(res)
		w := bufio.NewWriter(stdout)
		fmt.Fprintf(w, "SYNTHETIC %s\n", b)
		if err := w.Flush(); err != nil {
			return bench.ExitError
		}
		return bench.ExitOK
	}
	fmt.Fprintln(stderr, "synthetic-rank: -role must be master or slave")
	return bench.ExitUsage
}

// ---------------------------------------------------------------- report

// report prints the Figure 12 table and writes the files.
func (r *synthResult) report(o *synthOptions, w io.Writer) error {
	fmt.Fprintf(w, "# synthetic benchmark (Kim and Lilja, Table 3 / Figure 12), %s mode, N = %d, %d run(s), %d slave(s)\n",
		r.Mode, r.N, r.Runs, r.Slaves)
	for nic, c := range r.Costs {
		fmt.Fprintf(w, "# %s rail: T = %.1f us, B = %.2f MB/s (probed; emulated: rate %.2f MB/s, delay %v)\n", synthRail(nic),
			1e6*c.Latency, c.Bandwidth/1e6, r.Shapes[nic].Rate/1e6, r.Shapes[nic].Delay)
	}
	fmt.Fprintf(w, "# mux: fast rail from %d B; muxagg: split from %d B; agg: parts of at least %d B\n\n", r.MuxAt, r.SplitAt, o.MinChunk)
	fig := &bench.Table{Name: "figure12", Columns: append([]string{"type"}, o.Configs...)}
	long := &bench.Table{Name: "synthetic", Columns: []string{"type", "b", "l1", "l2", "config", "median_s", "min_s", "max_s",
		"normalized", "predicted_s", "predicted_normalized"}}
	fmt.Fprintf(w, "time normalised to the slow rail alone (median of %d runs; model prediction in brackets)\n\n", r.Runs)
	fmt.Fprintf(w, "| type |")
	for _, c := range o.Configs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, " best |\n|---|")
	for range o.Configs {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|\n")
	var series []bench.Series
	for _, c := range o.Configs {
		series = append(series, bench.Series{Name: c})
	}
	for ti, t := range o.Types {
		secs := r.Seconds[t.Name]
		base := collective.Median(secs["slow"])
		pbase := r.Predicted[t.Name]["slow"]
		if _, ok := secs["slow"]; !ok { // no slow rail run: normalise to the first option
			base, pbase = collective.Median(secs[o.Configs[0]]), r.Predicted[t.Name][o.Configs[0]]
		}
		row := []any{t.Name}
		fmt.Fprintf(w, "| %s |", t.Name)
		best, bestV := "", math.Inf(1)
		for ci, c := range o.Configs {
			med := collective.Median(secs[c])
			norm := med / base
			pred := r.Predicted[t.Name][c]
			row = append(row, norm)
			fmt.Fprintf(w, " %.3f (%.3f) |", norm, pred/pbase)
			long.Add(t.Name, t.Small, t.L1, t.L2, c, med, slices.Min(secs[c]), slices.Max(secs[c]), norm, pred, pred/pbase)
			series[ci].X = append(series[ci].X, float64(ti+1))
			series[ci].Y = append(series[ci].Y, norm)
			if norm < bestV {
				best, bestV = c, norm
			}
		}
		fig.Add(row...)
		fmt.Fprintf(w, " %s |\n", best)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "seconds (median of runs):")
	for _, t := range o.Types {
		fmt.Fprintf(w, "  %s:", t.Name)
		for _, c := range o.Configs {
			fmt.Fprintf(w, " %s %.3f", c, collective.Median(r.Seconds[t.Name][c]))
		}
		fmt.Fprintln(w)
	}
	if len(r.RailBytes) > 0 {
		fmt.Fprintln(w, "bytes per rail (slow/fast), all runs:")
		names := make([]string, 0, len(r.RailBytes))
		for c := range r.RailBytes {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			b := r.RailBytes[c]
			fmt.Fprintf(w, "  %-6s %d / %d (%.1f%% on the slow rail)\n", c, b[0], b[1], 100*float64(b[0])/math.Max(1, float64(b[0]+b[1])))
		}
	}
	if o.Out == "" {
		return nil
	}
	if err := fig.Save(o.Out); err != nil {
		return err
	}
	if err := long.Save(o.Out); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Out, "synthetic-raw.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	lp := &bench.LinePlot{Title: fmt.Sprintf("Synthetic benchmark (%s, N = %d): time / slow rail alone", r.Mode, r.N),
		XLabel: "type (1 = A ... 6 = F)", YLabel: "normalised time", Series: series}
	if err := lp.SavePNG(filepath.Join(o.Out, "figure12.png")); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s/{figure12,synthetic}.{csv,json}, synthetic-raw.json and figure12.png\n", o.Out)
	return nil
}
