package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

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
// ("ip:port"), binding each NIC's links to local[nic] if set: it probes
// both NICs, derives the rail models from the probe, connects every
// option to every slave, times the runs and finally stops the slaves.
func synthMaster(ctx context.Context, o *synthOptions, local []string, peers [][]string, secret []byte, log io.Writer) (*synthResult, error) {
	d := newSynthDialer(ctx, o, local, peers, secret)
	defer d.close()
	res := &synthResult{N: o.N, Runs: o.Runs, Slaves: len(peers), Shapes: d.shapes,
		Seconds: map[string]map[string][]float64{}, Predicted: map[string]map[string]float64{}, RailBytes: map[string][]uint64{}}
	res.Mode = "loopback"
	if o.netlab() {
		res.Mode = "netlab"
	}
	for nic := range 2 {
		c, err := d.probeNIC(nic)
		if err != nil {
			return nil, err
		}
		res.Costs = append(res.Costs, c)
		fmt.Fprintf(log, "# NIC %d (%s): T = %.1f us, B = %.2f MB/s\n", nic, synthRail(nic), 1e6*c.Latency, c.Bandwidth/1e6)
	}
	models := synthModels(o, res.Costs)
	res.MuxAt, res.SplitAt = synthThresholds(o, res.Costs)
	fmt.Fprintf(log, "# mux sends from %d B on the fast rail; muxagg splits from %d B\n", res.MuxAt, res.SplitAt)

	conns, err := d.connect(models, res.Costs)
	if err != nil {
		return nil, err
	}
	for _, c := range o.Configs {
		res.RailBytes[c] = make([]uint64, 2)
		railSetBytes(conns[c], func(rail int, n uint64) { res.RailBytes[c][rail] -= n }) // subtract the probe and warm-up
	}
	if err := d.measure(conns, models, res, log); err != nil {
		return nil, err
	}
	for _, c := range o.Configs {
		railSetBytes(conns[c], func(rail int, n uint64) { res.RailBytes[c][rail] += n })
	}
	for c, b := range res.RailBytes {
		if b[0] == 0 && b[1] == 0 {
			delete(res.RailBytes, c)
		}
	}
	d.stopSlaves()
	return res, nil
}

// synthDialer is the master's side of the sessions: it opens links and
// rail sets to the slaves, numbers the sessions, and closes every link it
// opened.
type synthDialer struct {
	ctx     context.Context
	o       *synthOptions
	local   []string   // the address each NIC's links bind to, if set
	peers   [][]string // peers[slave][nic]: "ip:port"
	secret  []byte
	shapes  []transport.ShapeConfig // per NIC (synthOptions.shapes)
	session int                     // the last session opened
	opened  []transport.Link        // closed by close
	payload []byte                  // what pingpong sends from
}

// newSynthDialer returns a dialer towards peers; nothing is opened yet.
func newSynthDialer(ctx context.Context, o *synthOptions, local []string, peers [][]string, secret []byte) *synthDialer {
	d := &synthDialer{ctx: ctx, o: o, local: local, peers: peers, secret: secret, shapes: o.shapes(), payload: make([]byte, 1<<20)}
	for i := range d.payload {
		d.payload[i] = byte(i)
	}
	return d
}

// close closes every link and rail set the dialer opened.
func (d *synthDialer) close() { closeLinks(d.opened) }

// dial opens a link to a slave's NIC, retrying while the slave may still
// be starting, sends the session's setup s and shapes the link like the
// slave does.
func (d *synthDialer) dial(slave, nic int, s synthSetup, alloc func(transport.Header) []byte) (transport.Link, error) {
	cfg := synthConfig(s.Session, d.secret, alloc)
	if nic < len(d.local) {
		cfg.LocalAddr = d.local[nic]
	}
	var l transport.Link
	var err error
	for try := 0; ; try++ { // the slave may still be starting
		dctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		l, err = transport.Dial(dctx, transport.KindTCP, d.peers[slave][nic], synthSlave0+slave, cfg)
		cancel()
		if err == nil || try == 100 || d.ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(s)
	if err := l.Send(d.ctx, transport.Header{Type: transport.MsgControl}, b); err != nil {
		_ = l.Close()
		return nil, err
	}
	return shapeLink(l, d.shapes[nic])
}

// raw opens a session of one plain link to a slave's NIC.
func (d *synthDialer) raw(slave, nic int) (transport.Link, error) {
	d.session++
	l, err := d.dial(slave, nic, synthSetup{Session: d.session, Mode: "raw", NICs: []int{nic}, Shapes: d.shapes}, nil)
	if err == nil {
		d.opened = append(d.opened, l)
	}
	return l, err
}

// rails opens a session of one link per NIC to a slave and joins them
// in a rail set under policy and costs.
func (d *synthDialer) rails(slave int, policy transport.RailPolicy, costs []transport.RailCost) (*transport.RailSet, error) {
	d.session++
	s := synthSetup{Session: d.session, Mode: "rails", NICs: []int{0, 1}, Policy: policy.String(), Costs: costs,
		Chunk: d.o.MinChunk, SplitAt: d.o.SplitAt, Shapes: d.shapes}
	rt := transport.NewRailRouter(nil)
	var ls []transport.Link
	for i := range s.NICs {
		s.Index = i
		l, err := d.dial(slave, s.NICs[i], s, rt.Alloc)
		if err != nil {
			closeLinks(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	rs, err := transport.NewRailSet(ls, transport.RailConfig{
		RailModel: transport.RailModel{Costs: costs, Policy: policy, MinChunk: d.o.MinChunk, SplitAt: d.o.SplitAt},
		Router:    rt, MaxMessage: 64 << 20})
	if err != nil {
		closeLinks(ls)
		return nil, err
	}
	d.opened = append(d.opened, rs)
	return rs, nil
}

// pingpong sends size bytes on l and waits for the slave's answer; it
// returns the round trip in seconds.
func (d *synthDialer) pingpong(l transport.Link, size int) (float64, error) {
	start := time.Now()
	if err := l.Send(d.ctx, transport.Header{Type: transport.MsgEager}, d.payload[:size]); err != nil {
		return 0, err
	}
	m, err := l.Recv(d.ctx)
	if err != nil {
		return 0, err
	}
	if len(m.Payload) != synthAckSize {
		return 0, fmt.Errorf("an answer of %d bytes", len(m.Payload))
	}
	return time.Since(start).Seconds(), nil
}

// probeNIC measures one NIC towards slave 0 on a plain link: T is half
// the median 8-byte round trip; B comes from back-to-back 256 KiB
// messages (the steady state: tbf's bucket is empty after the first).
func (d *synthDialer) probeNIC(nic int) (transport.RailCost, error) {
	l, err := d.raw(0, nic)
	if err != nil {
		return transport.RailCost{}, fmt.Errorf("probing NIC %d: %w", nic, err)
	}
	var small, big []float64
	for range 200 {
		x, err := d.pingpong(l, 8)
		if err != nil {
			return transport.RailCost{}, err
		}
		small = append(small, x)
	}
	for i := range 8 {
		x, err := d.pingpong(l, 256<<10)
		if err != nil {
			return transport.RailCost{}, err
		}
		if i >= 2 {
			big = append(big, x)
		}
	}
	// The median, not the minimum: an emulated delay rides on Go's
	// timers, whose precision depends on the load.
	rtt := collective.Median(small)
	tb := collective.Median(big)
	return transport.RailCost{Latency: rtt / 2, Bandwidth: float64(256<<10) / math.Max(tb-rtt, 1e-9)}, nil
}

// synthModels returns the rail model of each option that uses both rails
// (mux, agg, muxagg), from the probed costs.
func synthModels(o *synthOptions, costs []transport.RailCost) map[string]transport.RailModel {
	models := map[string]transport.RailModel{}
	for _, c := range o.Configs {
		switch c {
		case "mux":
			models[c] = transport.RailModel{Costs: costs, Policy: transport.RailMux}
		case "agg":
			models[c] = transport.RailModel{Costs: costs, Policy: transport.RailAgg, MinChunk: o.MinChunk}
		case "muxagg":
			models[c] = transport.RailModel{Costs: costs, Policy: transport.RailMuxAgg, MinChunk: o.MinChunk, SplitAt: o.SplitAt}
		}
	}
	return models
}

// synthThresholds returns the smallest message mux sends on the fast rail
// (-1: none up to 1 MiB) and the size muxagg splits from.
func synthThresholds(o *synthOptions, costs []transport.RailCost) (muxAt, splitAt int64) {
	muxAt = -1
	mux := transport.RailModel{Costs: costs, Policy: transport.RailMux}
	for m := int64(0); m <= 1<<20; m++ {
		if mux.Split(m)[0].Rail == 1 {
			muxAt = m
			break
		}
	}
	splitAt = transport.RailModel{Costs: costs, Policy: transport.RailMuxAgg, MinChunk: o.MinChunk, SplitAt: o.SplitAt}.Threshold()
	return muxAt, splitAt
}

// connect opens one connection (a plain link or a rail set) per option
// and slave, and warms each up.
func (d *synthDialer) connect(models map[string]transport.RailModel, costs []transport.RailCost) (map[string][]transport.Link, error) {
	conns := map[string][]transport.Link{}
	for _, c := range d.o.Configs {
		for slave := range d.peers {
			var l transport.Link
			var err error
			switch c {
			case "slow":
				l, err = d.raw(slave, 0)
			case "fast":
				l, err = d.raw(slave, 1)
			default:
				l, err = d.rails(slave, models[c].Policy, costs)
			}
			if err != nil {
				return nil, fmt.Errorf("connecting %s to slave %d: %w", c, slave, err)
			}
			for range 20 { // warm up
				if _, err := d.pingpong(l, 1000); err != nil {
					return nil, err
				}
			}
			conns[c] = append(conns[c], l)
		}
	}
	return conns, nil
}

// railSetBytes calls add with the bytes each rail of each rail set among
// ls has carried so far (plain links have no count).
func railSetBytes(ls []transport.Link, add func(rail int, n uint64)) {
	for _, l := range ls {
		if rs, ok := l.(*transport.RailSet); ok {
			for _, st := range rs.Stats() {
				add(st.Rail, st.Bytes)
			}
		}
	}
}

// synthPredict is the model's time for msgs under option c: each message
// and its answer, one after the other.
func synthPredict(c string, msgs []synthMessage, costs []transport.RailCost, models map[string]transport.RailModel) float64 {
	t := 0.0
	for _, m := range msgs {
		switch c {
		case "slow", "fast":
			r := costs[map[string]int{"slow": 0, "fast": 1}[c]]
			t += r.Time(int64(m.Size)) + r.Time(synthAckSize)
		default:
			t += models[c].Time(int64(m.Size)) + models[c].Time(synthAckSize)
		}
	}
	return t
}

// measure times every run of every type under every option on conns,
// into res.Seconds (and res.Predicted for run 0), logging each timing.
func (d *synthDialer) measure(conns map[string][]transport.Link, models map[string]transport.RailModel, res *synthResult, log io.Writer) error {
	o := d.o
	start := time.Now()
	for run := range o.Runs {
		for ti, typ := range o.Types {
			msgs := synthWorkload(typ, o.N, len(d.peers), o.Seed+uint64(1000*run+ti))
			if res.Seconds[typ.Name] == nil {
				res.Seconds[typ.Name] = map[string][]float64{}
				res.Predicted[typ.Name] = map[string]float64{}
			}
			// The options in a rotating order, on the same messages.
			for ci := range o.Configs {
				c := o.Configs[(ci+run+ti)%len(o.Configs)]
				t0 := time.Now()
				for _, m := range msgs {
					if _, err := d.pingpong(conns[c][m.Dest], m.Size); err != nil {
						return fmt.Errorf("type %s, %s: %w", typ.Name, c, err)
					}
				}
				sec := time.Since(t0).Seconds()
				res.Seconds[typ.Name][c] = append(res.Seconds[typ.Name][c], sec)
				if run == 0 {
					res.Predicted[typ.Name][c] = synthPredict(c, msgs, res.Costs, models)
				}
				fmt.Fprintf(log, "# run %d type %s %-6s %8.3f s (model %.3f s) [%s]\n", run+1, typ.Name, c, sec,
					synthPredict(c, msgs, res.Costs, models), time.Since(start).Round(time.Second))
			}
		}
	}
	return nil
}

// stopSlaves tells every slave to stop, in a quit session of its own.
func (d *synthDialer) stopSlaves() {
	for slave := range d.peers {
		d.session++
		if l, err := d.dial(slave, 0, synthSetup{Session: d.session, Mode: "quit", NICs: []int{0}}, nil); err == nil {
			_ = l.Close()
		}
	}
}

// synthRail names a NIC by its rail: 0 is the slow one, 1 the fast one.
func synthRail(nic int) string { return [...]string{"slow", "fast"}[nic] }
