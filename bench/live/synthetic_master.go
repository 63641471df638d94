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
