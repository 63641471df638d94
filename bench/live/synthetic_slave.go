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
	rt := synthSlaveRouter()
	cfg := synthConfig(synthSlave0+index, secret, rt.Alloc)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lns, bound, err := synthListen(listen, cfg)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(bound)
	}
	sv := &synthServer{ctx: ctx, quit: cancel, nics: len(listen), rt: rt, pending: map[int][]transport.Link{}}
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sv.accept(ln, &wg)
		}()
	}
	<-ctx.Done()
	for _, ln := range lns {
		_ = ln.Close()
	}
	sv.closeAll()
	wg.Wait()
	return nil
}

// synthSlaveRouter is a slave's rail router. It receives large eager
// messages into one buffer per session (master rank), reused from message
// to message: a session's messages are consumed one at a time.
func synthSlaveRouter() *transport.RailRouter {
	var bufMu sync.Mutex
	bufs := map[uint32][]byte{} // per session (master rank)
	return transport.NewRailRouter(func(h transport.Header) []byte {
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
}

// synthListen listens on every address of listen with cfg and returns the
// listeners and the addresses they are bound to. On an error it closes
// the listeners it opened.
func synthListen(listen []string, cfg transport.Config) ([]transport.Listener, []string, error) {
	var lns []transport.Listener
	var bound []string
	for _, a := range listen {
		ln, err := transport.Listen(transport.KindTCP, a, cfg)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, nil, err
		}
		lns = append(lns, ln)
		bound = append(bound, ln.Addr().String())
	}
	return lns, bound, nil
}

// synthServer is a slave's side of the sessions: it reads each link's
// setup, echoes on plain links at once and on rail sets once all their
// links have arrived, and stops on a quit session.
type synthServer struct {
	ctx  context.Context
	quit func() // ends ctx: the slave stops
	nics int    // the slave's NICs (listen addresses)
	rt   *transport.RailRouter

	mu      sync.Mutex
	pending map[int][]transport.Link // per session: the rail links that have arrived so far
	links   []transport.Link         // every session's link or rail set, closed at the end
}

// accept serves every link ln accepts, each on a goroutine counted in wg,
// until ln fails (it is closed when the slave stops).
func (sv *synthServer) accept(ln transport.Listener, wg *sync.WaitGroup) {
	for {
		l, err := ln.Accept(sv.ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sv.serve(l)
		}()
	}
}

// serve reads the setup that opens l and serves its session until the
// session or the slave ends.
func (sv *synthServer) serve(l transport.Link) {
	s, shape, ok := sv.readSetup(l)
	if !ok {
		_ = l.Close()
		return
	}
	switch s.Mode {
	case "quit":
		_ = l.Close()
		sv.quit()
		return
	case "raw", "rails":
	default:
		_ = l.Close()
		return
	}
	sl, err := shapeLink(l, shape)
	if err != nil {
		_ = l.Close()
		return
	}
	if s.Mode == "raw" {
		sv.track(sl)
		synthEcho(sv.ctx, sl)
		return
	}
	if ls, full := sv.join(s, sl); full {
		sv.serveRails(s, ls)
	}
}

// readSetup reads the session setup, the first message on l, and returns
// it with the shaping of l's NIC; false when it cannot be read or names
// no NIC of this slave.
func (sv *synthServer) readSetup(l transport.Link) (synthSetup, transport.ShapeConfig, bool) {
	var s synthSetup
	var shape transport.ShapeConfig
	m, err := l.Recv(sv.ctx)
	if err != nil {
		return s, shape, false
	}
	if err := json.Unmarshal(m.Payload, &s); err != nil || s.Index >= len(s.NICs) || s.NICs[s.Index] >= sv.nics {
		return s, shape, false
	}
	if s.NICs[s.Index] < len(s.Shapes) {
		shape = s.Shapes[s.NICs[s.Index]]
	}
	return s, shape, true
}

// join adds l, link s.Index of a rail session, to the session's pending
// links. Once every link of the session has arrived it returns them, no
// longer pending, and true.
func (sv *synthServer) join(s synthSetup, l transport.Link) ([]transport.Link, bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	ls := sv.pending[s.Session]
	if ls == nil {
		ls = make([]transport.Link, len(s.NICs))
		sv.pending[s.Session] = ls
	}
	ls[s.Index] = l
	if slices.Contains(ls, nil) {
		return nil, false
	}
	delete(sv.pending, s.Session)
	return ls, true
}

// serveRails joins a session's links into the rail set its setup s
// describes and echoes on it.
func (sv *synthServer) serveRails(s synthSetup, ls []transport.Link) {
	policy, err := transport.ParseRailPolicy(s.Policy)
	if err != nil {
		closeLinks(ls)
		return
	}
	rs, err := transport.NewRailSet(ls, transport.RailConfig{
		RailModel: transport.RailModel{Costs: s.Costs, Policy: policy, MinChunk: s.Chunk, SplitAt: s.SplitAt},
		Router:    sv.rt, MaxMessage: 64 << 20})
	if err != nil {
		closeLinks(ls)
		return
	}
	sv.track(rs)
	synthEcho(sv.ctx, rs)
}

// track records a session's link, to be closed when the slave stops.
func (sv *synthServer) track(l transport.Link) {
	sv.mu.Lock()
	sv.links = append(sv.links, l)
	sv.mu.Unlock()
}

// closeAll closes every session's link and the pending rail links.
func (sv *synthServer) closeAll() {
	sv.mu.Lock()
	closeLinks(sv.links)
	for _, ls := range sv.pending {
		closeLinks(ls)
	}
	sv.mu.Unlock()
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
