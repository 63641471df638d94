package transport

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// railTestNet is a Network whose links are RailSets: one underlying link
// per rail network, rail i of the dialer connected to rail i of the
// listener. It lets the whole conformance suite run over rails.
type railTestNet struct {
	rails []Network
	model RailModel

	mu      sync.Mutex
	routers map[int]*RailRouter // per rank, shared by its listener and dials
}

func newRailTestNet(model RailModel, rails ...Network) *railTestNet {
	return &railTestNet{rails: rails, model: model, routers: map[int]*RailRouter{}}
}

func (n *railTestNet) router(cfg Config) *RailRouter {
	n.mu.Lock()
	defer n.mu.Unlock()
	rt := n.routers[cfg.Rank]
	if rt == nil {
		rt = NewRailRouter(cfg.Alloc)
		n.routers[cfg.Rank] = rt
	}
	return rt
}

func (n *railTestNet) Kind() Kind { return n.rails[0].Kind() }

func (n *railTestNet) railConfig(cfg Config, rt *RailRouter) RailConfig {
	return RailConfig{RailModel: n.model, Router: rt, MaxMessage: cfg.MaxMessage}
}

func (n *railTestNet) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	addrs := strings.Split(addr, "|")
	if len(addrs) != len(n.rails) {
		return nil, fmt.Errorf("rail test net: address %q: want %d rails", addr, len(n.rails))
	}
	rt := n.router(cfg)
	c := cfg
	c.Alloc = rt.Alloc
	var links []Link
	closeAll := func() {
		for _, l := range links {
			_ = l.Close()
		}
	}
	for i, rn := range n.rails {
		l, err := rn.Dial(ctx, addrs[i], peer, c)
		if err != nil {
			closeAll()
			return nil, err
		}
		links = append(links, l)
	}
	rs, err := NewRailSet(links, n.railConfig(cfg, rt))
	if err != nil {
		closeAll()
		return nil, err
	}
	return rs, nil
}

type railTestAddr string

func (a railTestAddr) Network() string { return "rails" }
func (a railTestAddr) String() string  { return string(a) }

func (n *railTestNet) Listen(addr string, cfg Config) (Listener, error) {
	rt := n.router(cfg)
	c := cfg
	c.Alloc = rt.Alloc
	l := &railTestListener{n: n, rt: rt, cfg: cfg, out: make(chan Link, 16), quit: make(chan struct{}),
		pending: map[int][]Link{}}
	var addrs []string
	for _, rn := range n.rails {
		ln, err := rn.Listen(addr, c)
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		l.lns = append(l.lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	l.addr = railTestAddr(strings.Join(addrs, "|"))
	for i := range l.lns {
		l.wg.Add(1)
		go l.acceptLoop(i)
	}
	return l, nil
}

type railTestListener struct {
	n    *railTestNet
	rt   *RailRouter
	cfg  Config
	lns  []Listener
	addr railTestAddr
	out  chan Link
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu      sync.Mutex
	pending map[int][]Link // peer -> links by rail, until all rails are there
}

func (l *railTestListener) acceptLoop(i int) {
	defer l.wg.Done()
	for {
		link, err := l.lns[i].Accept(context.Background())
		if err != nil {
			return
		}
		l.mu.Lock()
		ls := l.pending[link.Peer()]
		if ls == nil {
			ls = make([]Link, len(l.lns))
			l.pending[link.Peer()] = ls
		}
		ls[i] = link
		complete := true
		for _, x := range ls {
			complete = complete && x != nil
		}
		if complete {
			delete(l.pending, link.Peer())
		}
		l.mu.Unlock()
		if !complete {
			continue
		}
		rs, err := NewRailSet(ls, l.n.railConfig(l.cfg, l.rt))
		if err != nil {
			for _, x := range ls {
				_ = x.Close()
			}
			continue
		}
		select {
		case l.out <- rs:
		case <-l.quit:
			_ = rs.Close()
			return
		}
	}
}

func (l *railTestListener) Accept(ctx context.Context) (Link, error) {
	select {
	case rs := <-l.out:
		return rs, nil
	case <-ctx.Done():
		return nil, &OpError{Op: "accept", Transport: l.n.Kind(), Peer: AnyRank, Addr: l.addr, Err: ctx.Err()}
	case <-l.quit:
		return nil, &OpError{Op: "accept", Transport: l.n.Kind(), Peer: AnyRank, Addr: l.addr, Err: ErrClosed}
	}
}

func (l *railTestListener) Addr() net.Addr { return l.addr }

func (l *railTestListener) Close() error {
	l.once.Do(func() {
		close(l.quit)
		for _, ln := range l.lns {
			_ = ln.Close()
		}
		l.wg.Wait()
		l.mu.Lock()
		for _, ls := range l.pending {
			for _, x := range ls {
				if x != nil {
					_ = x.Close()
				}
			}
		}
		l.pending = nil
		l.mu.Unlock()
		for {
			select {
			case rs := <-l.out:
				_ = rs.Close()
				continue
			default:
			}
			break
		}
	})
	return nil
}

// twoRailCosts: rail 0 has the lower latency, rail 1 the higher
// bandwidth, so that mux uses both (crossover near 6 kB) and agg splits.
var twoRailCosts = []RailCost{{Latency: 100e-6, Bandwidth: 5e6}, {Latency: 1e-3, Bandwidth: 20e6}}

func railFactory(name string, model RailModel, rail func(t testing.TB, i int) Network, addr func(r int) string) netFactory {
	return netFactory{
		name: name,
		newNet: func(t testing.TB) Network {
			var rails []Network
			for i := range model.Costs {
				rails = append(rails, rail(t, i))
			}
			return newRailTestNet(model, rails...)
		},
		addr: addr,
	}
}

func memRail(testing.TB, int) Network { return NewMemNetwork(3) }

func tcpRail(t testing.TB, _ int) Network {
	n, err := NetworkFor(KindTCP)
	require.NoError(t, err)
	return n
}

// kindRail makes rails of transport k (on the loopback).
func kindRail(k Kind) func(t testing.TB, i int) Network {
	return func(t testing.TB, _ int) Network {
		n, err := NetworkFor(k)
		require.NoError(t, err)
		return n
	}
}

func memAddrOf(r int) string { return fmt.Sprintf("rank-%d", r) }
func tcpAddrOf(int) string   { return "127.0.0.1:0" }

func railFactories() []netFactory {
	var fs []netFactory
	for _, p := range []RailPolicy{RailSingle, RailMux, RailAgg, RailMuxAgg, RailAuto} {
		model := RailModel{Costs: twoRailCosts, Policy: p, MinChunk: 4 << 10}
		if p == RailMuxAgg {
			model.SplitAt = 100 << 10
		}
		fs = append(fs, railFactory("mem/"+p.String(), model, memRail, memAddrOf))
	}
	fs = append(fs, railFactory("tcp/auto", RailModel{Costs: twoRailCosts, MinChunk: 16 << 10}, tcpRail, tcpAddrOf))
	// The other socket transports: TLS and reliable UDP rails are lent to
	// the Recv callers (stoppableLink), QUIC rails are not.
	for _, k := range []Kind{KindTLS, KindUDP, KindQUIC} {
		fs = append(fs, railFactory(k.String()+"/mux", RailModel{Costs: twoRailCosts, Policy: RailMux}, kindRail(k), tcpAddrOf))
	}
	fs = append(fs, railFactory("mem-shaped/agg", RailModel{Costs: twoRailCosts, Policy: RailAgg, MinChunk: 4 << 10},
		func(t testing.TB, i int) Network {
			n := NewMemNetwork(uint64(5 + i))
			s := ShapeConfig{Rate: 400e6, Delay: 100 * time.Microsecond}
			if i == 1 {
				s = ShapeConfig{Rate: 1600e6, Delay: time.Millisecond}
			}
			require.NoError(t, n.SetDefaultShape(s))
			return n
		}, memAddrOf))
	return fs
}

// TestRailConformance runs the transport conformance suite over RailSets
// of two rails, under every policy, over mem and tcp, and under mux over
// tls, udp and quic.
func TestRailConformance(t *testing.T) {
	for _, f := range railFactories() {
		t.Run(f.name, func(t *testing.T) { runConformance(t, f) })
	}
}
