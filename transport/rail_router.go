package transport

import (
	"fmt"
	"sync"
)

// RailRouter lets the parts of messages sent over RailSets land in place.
// Its Alloc method is the Config.Alloc hook to give the links (dialed and
// listening) that will become rails: it hands each MsgRailData frame the
// slice of the reassembly buffer at the part's offset, in the RailSet of
// the frame's source rank, and passes every other frame to the upper
// layer's alloc. A process needs one router; the RailSets built with it
// (RailConfig.Router) call the upper layer's alloc once per message, with
// the header the peer's upper layer sent.
type RailRouter struct {
	alloc func(Header) []byte

	mu   sync.Mutex
	sets map[int]*RailSet
}

// NewRailRouter returns a router whose upper-layer hook is alloc (nil:
// always allocate), with Config.Alloc's semantics.
func NewRailRouter(alloc func(Header) []byte) *RailRouter {
	return &RailRouter{alloc: alloc, sets: map[int]*RailSet{}}
}

// Alloc is the hook to install as Config.Alloc on the rails' links.
func (rt *RailRouter) Alloc(h Header) []byte {
	switch h.Type {
	case MsgRailData:
		rt.mu.Lock()
		rs := rt.sets[int(h.Src)]
		rt.mu.Unlock()
		if rs == nil {
			return nil
		}
		return rs.allocPart(h)
	case MsgRail:
		return nil
	}
	if rt.alloc != nil {
		return rt.alloc(h)
	}
	return nil
}

func (rt *RailRouter) register(peer int, rs *RailSet) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if old := rt.sets[peer]; old != nil {
		return fmt.Errorf("%w: rails: the router already has a rail set for rank %d (close it first)", ErrBadConfig, peer)
	}
	rt.sets[peer] = rs
	return nil
}

func (rt *RailRouter) unregister(peer int, rs *RailSet) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sets[peer] == rs {
		delete(rt.sets, peer)
	}
}
