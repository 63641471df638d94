package transport

import (
	"context"
	"net"
)

type quicNetwork struct{}

func (quicNetwork) Kind() Kind { return KindQUIC }
func (quicNetwork) Listen(addr string, cfg Config) (Listener, error) { return nil, ErrUDPNotBuilt }
func (quicNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	return nil, ErrUDPNotBuilt
}

var _ = net.ErrClosed
