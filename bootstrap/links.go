package bootstrap

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// The mesh proper: once the directory is known, every rank dials the
// lower ranks and accepts the higher ones, once per rail the two have in
// common (rail i of one to rail i of the other; a dialed link leaves from
// this rank's rail i address). A pair with several rails gets one RailSet
// over them.

// railLinks collects the links of every pair and rail as they connect.
type railLinks struct {
	mu    sync.Mutex
	links [][]transport.Link // by peer, then rail
}

// put records the link of peer's rail i, unless that rail is unknown or
// already connected.
func (r *railLinks) put(peer, i int, l transport.Link) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if peer < 0 || peer >= len(r.links) || i >= len(r.links[peer]) || r.links[peer][i] != nil {
		return false
	}
	r.links[peer][i] = l
	return true
}

func (r *railLinks) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ls := range r.links {
		for _, l := range ls {
			if l != nil {
				l.Close()
			}
		}
	}
}

// dialAndAccept connects this rank to every other, then gathers each
// pair's links into the mesh.
func (c *connector) dialAndAccept(ctx context.Context) error {
	dialCfg, err := c.dialConfig()
	if err != nil {
		return err
	}
	me, size := c.b.Rank, c.b.Size
	rl := &railLinks{links: make([][]transport.Link, size)}
	for p := range rl.links {
		if p != me {
			rl.links[p] = make([]transport.Link, c.mesh.Dir.RailsWith(me, p))
		}
	}
	errs := make(chan error, len(c.mesh.Listeners)+1)
	for i, l := range c.mesh.Listeners {
		go func() { errs <- c.accept(ctx, i, l, rl) }()
	}
	go func() { errs <- c.dial(ctx, dialCfg, rl) }()
	var first error
	for range len(c.mesh.Listeners) + 1 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		rl.closeAll()
		return first
	}
	return c.assemble(rl.links)
}

// dialConfig is the links' configuration for dialing: it pins every
// rank's published certificate fingerprint.
func (c *connector) dialConfig() (transport.Config, error) {
	cfg := c.tcfg
	for r, p := range c.mesh.Dir.Peers {
		if len(p.Addrs) == 0 {
			return cfg, fmt.Errorf("%w: rank %d published no address", ErrProtocol, r)
		}
		if p.Fingerprint == "" {
			continue
		}
		fp, err := transport.ParseFingerprint(p.Fingerprint)
		if err != nil {
			return cfg, fmt.Errorf("%w: rank %d published a bad fingerprint: %v", ErrProtocol, r, err)
		}
		if cfg.Fingerprints == nil {
			cfg.Fingerprints = map[int]transport.Fingerprint{}
		}
		cfg.Fingerprints[r] = fp
	}
	return cfg, nil
}

// accept takes the higher ranks' links on rail i.
func (c *connector) accept(ctx context.Context, i int, l transport.Listener, rl *railLinks) error {
	need := 0
	for p := c.b.Rank + 1; p < c.b.Size; p++ {
		if i < len(rl.links[p]) {
			need++
		}
	}
	for need > 0 {
		link, err := l.Accept(ctx)
		if err != nil {
			return c.acceptErr(ctx, err, rl)
		}
		p := link.Peer()
		if p > c.b.Rank && rl.put(p, i, link) {
			need--
			continue
		}
		c.cfg.Logger.Warn("bootstrap: unexpected link", "peer", p, "rail", i)
		link.Close()
	}
	return nil
}

// acceptErr names the first higher rank that did not connect when the
// time ran out.
func (c *connector) acceptErr(ctx context.Context, err error, rl *railLinks) error {
	if ctx.Err() != nil {
		var missing []int
		rl.mu.Lock()
		for r := c.b.Rank + 1; r < c.b.Size; r++ {
			for _, l := range rl.links[r] {
				if l == nil {
					missing = append(missing, r)
					break
				}
			}
		}
		rl.mu.Unlock()
		if len(missing) > 0 {
			return &PeerError{Rank: missing[0], Msg: fmt.Sprintf("ranks %v did not connect within %v", missing, c.b.Timeout), Err: ctx.Err()}
		}
	}
	return fmt.Errorf("bootstrap: accepting links: %w", err)
}

// dial connects to every lower rank on every rail the two share,
// retrying while the peer is not listening yet.
func (c *connector) dial(ctx context.Context, dialCfg transport.Config, rl *railLinks) error {
	for r := 0; r < c.b.Rank; r++ {
		for i := range rl.links[r] {
			railCfg := dialCfg
			if len(c.b.Rails) > i && c.kind != transport.KindMem {
				railCfg.LocalAddr = c.railHost(i)
			}
			link, err := c.dialOne(ctx, c.mesh.Dir.Peers[r].Addrs[i], r, railCfg)
			if err != nil {
				return &PeerError{Rank: r, Msg: fmt.Sprintf("connecting rail %d", i), Err: err}
			}
			rl.put(r, i, link)
		}
	}
	return nil
}

// dialOne dials one rail of a peer, retrying a failed dial (every 20 ms,
// backing off to 500 ms) until ctx ends, unless authentication failed
// for good (isAuthError).
func (c *connector) dialOne(ctx context.Context, addr string, peer int, cfg transport.Config) (transport.Link, error) {
	backoff := 20 * time.Millisecond
	for {
		link, err := c.netw.Dial(ctx, addr, peer, cfg)
		if err == nil || ctx.Err() != nil || isAuthError(err) {
			return link, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// assemble turns each pair's links into the mesh's link to that peer: the
// link itself on one rail, a RailSet over several.
func (c *connector) assemble(links [][]transport.Link) error {
	for p, ls := range links {
		switch {
		case p == c.b.Rank:
		case len(ls) == 1:
			c.mesh.Links[p] = ls[0]
		default:
			if c.lateUserTimeout > 0 {
				for _, l := range ls {
					transport.SetUserTimeout(l, c.lateUserTimeout)
				}
			}
			rs, err := transport.NewRailSet(ls, transport.RailConfig{
				RailModel:  transport.RailModel{Costs: c.cfg.RailCosts(p, len(ls)), Policy: c.cfg.RailPolicy},
				Router:     c.router,
				MaxMessage: c.tcfg.MaxMessage,
				Logger:     c.cfg.Logger,
				OnRailDown: c.cfg.OnRailDown,
			})
			if err != nil {
				for _, l := range links[p:] {
					for _, x := range l {
						if x != nil {
							x.Close()
						}
					}
				}
				return fmt.Errorf("bootstrap: rails to rank %d: %w", p, err)
			}
			c.mesh.Links[p] = rs
			if c.mesh.RailSets == nil {
				c.mesh.RailSets = make([]*transport.RailSet, c.b.Size)
			}
			c.mesh.RailSets[p] = rs
		}
	}
	return nil
}
