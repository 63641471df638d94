package live

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/hetcomm/hetcomm/transport"
)

// The synthetic benchmark's sessions: the job ID and ranks of its links,
// the size of a slave's answer, and where the netlab ranks find the
// job's secret.
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

// synthConfig is the transport configuration of a synthetic rank's links.
func synthConfig(rank int, secret []byte, alloc func(transport.Header) []byte) transport.Config {
	c := transport.DefaultConfig()
	c.JobID, c.Rank, c.Secret, c.MaxMessage = synthJob, rank, secret, 64<<20
	c.Alloc = alloc
	return c
}

// shapeLink wraps l in the emulated shaping s, unless s shapes nothing.
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

// closeLinks closes every link of ls that is set.
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
