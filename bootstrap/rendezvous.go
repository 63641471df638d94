package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// The rendezvous: every rank says hello to the coordinator (rank 0), which
// answers with the directory once every rank has joined. The messages are
// msgpack control messages (docs/wire.md, "Start-up").

// Peer is what a rank tells the coordinator about itself: its hello.
type Peer struct {
	Rank int `msgpack:"rank"`
	// Addrs are where its rails listen, one address per rail.
	Addrs []string `msgpack:"addrs"`
	// Fingerprint is its certificate's (tls, quic).
	Fingerprint string `msgpack:"fp,omitempty"`
	Host        string `msgpack:"host,omitempty"`
	PID         int    `msgpack:"pid"`
	// Nets gives, for rails found by themselves (HETCOMM_RAILS_AUTO), the
	// network (CIDR) of each address after the first; they are resolved
	// into the directory's rails (chooseRails) and then cleared.
	Nets []string `msgpack:"nets,omitempty"`
}

// RailHosts returns the host of each of the peer's rails.
func (p Peer) RailHosts() []string {
	hosts := make([]string, len(p.Addrs))
	for i, a := range p.Addrs {
		hosts[i] = hostOf(a)
	}
	return hosts
}

// Directory is every rank's hello, by rank.
type Directory struct {
	Peers []Peer `msgpack:"peers"`
}

// RailsWith returns how many rails ranks a and b have in common.
func (d *Directory) RailsWith(a, b int) int {
	return min(len(d.Peers[a].Addrs), len(d.Peers[b].Addrs))
}

// Rails is the most rails any pair of ranks has in common (at least 1).
func (d *Directory) Rails() int {
	most := 1
	for a := range d.Peers {
		for b := a + 1; b < len(d.Peers); b++ {
			most = max(most, d.RailsWith(a, b))
		}
	}
	return most
}

// LocalProcesses counts the processes on rank me's host (the same host
// name; ranks of one process count once).
func (d *Directory) LocalProcesses(me int) int {
	host := d.Peers[me].Host
	pids := map[int]bool{d.Peers[me].PID: true}
	for _, p := range d.Peers {
		if host != "" && p.Host == host {
			pids[p.PID] = true
		}
	}
	return len(pids)
}

// rendezvous is one rank's side of the meeting at the coordinator.
type rendezvous struct {
	b    *Bootstrap
	netw transport.Network // the coordinator's network
	cfg  transport.Config
	log  *slog.Logger
}

// meet runs the coordinator on rank 0 and joins it elsewhere.
func (r *rendezvous) meet(ctx context.Context, me Peer) (*Directory, error) {
	if r.b.Rank == 0 {
		return r.coordinate(ctx, me)
	}
	return r.join(ctx, me)
}

// coordinate runs the coordinator on rank 0: it waits until every rank has
// joined, then sends everyone the directory.
func (r *rendezvous) coordinate(ctx context.Context, me Peer) (*Directory, error) {
	l, err := r.netw.Listen(bindAddr(r.b.Coord), r.cfg)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: coordinator cannot listen on %s: %w", r.b.Coord, err)
	}
	defer l.Close()
	size := r.b.Size
	dir := &Directory{Peers: make([]Peer, size)}
	dir.Peers[0] = me
	joined := make([]transport.Link, size)
	defer func() {
		for _, j := range joined {
			if j != nil {
				j.Close()
			}
		}
	}()
	arrivals, acceptErr := r.hellos(ctx, l)
	for n := 1; n < size; {
		select {
		case a := <-arrivals:
			rank := a.hello.Rank
			if rank <= 0 || rank >= size || joined[rank] != nil {
				r.log.Warn("bootstrap: coordinator: duplicate or invalid rank", "rank", rank)
				a.link.Close()
				continue
			}
			joined[rank], dir.Peers[rank] = a.link, a.hello
			n++
		case <-ctx.Done():
			var missing []int
			for rank := 1; rank < size; rank++ {
				if joined[rank] == nil {
					missing = append(missing, rank)
				}
			}
			return nil, &PeerError{Rank: missing[0], Err: ctx.Err(),
				Msg: fmt.Sprintf("did not join the coordinator at %s within %v (missing ranks %v)", r.b.Coord, r.b.Timeout, missing)}
		case err := <-acceptErr:
			return nil, fmt.Errorf("bootstrap: coordinator: %w", err)
		}
	}
	for rank := 1; rank < size; rank++ {
		if err := transport.SendControl(ctx, joined[rank], transport.Header{}, dir); err != nil {
			return nil, &PeerError{Rank: rank, Msg: "sending the directory", Err: err}
		}
	}
	// Wait for every rank to hang up, so the directory is not lost.
	for rank := 1; rank < size; rank++ {
		joined[rank].Recv(ctx)
	}
	return dir, nil
}

// arrival is a rank's link to the coordinator and its hello.
type arrival struct {
	link  transport.Link
	hello Peer
}

// hellos accepts ranks at the coordinator until ctx ends and delivers
// each authenticated link with its hello; a link whose hello is bad or
// claims another rank than it authenticated as is dropped.
func (r *rendezvous) hellos(ctx context.Context, l transport.Listener) (<-chan arrival, <-chan error) {
	arrivals := make(chan arrival)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			link, err := l.Accept(ctx)
			if err != nil {
				acceptErr <- err
				return
			}
			go func() {
				var h Peer
				if err := transport.RecvControl(ctx, link, &h); err != nil || h.Rank != link.Peer() {
					r.log.Warn("bootstrap: coordinator: bad hello", "peer", link.Peer(), "err", err)
					link.Close()
					return
				}
				select {
				case arrivals <- arrival{link, h}:
				case <-ctx.Done():
					link.Close()
				}
			}()
		}
	}()
	return arrivals, acceptErr
}

// bindAddr turns the coordinator address into a listening address: its
// host when that is an IP address, every interface otherwise.
func bindAddr(coord string) string {
	h, p, err := net.SplitHostPort(coord)
	if err != nil {
		return coord
	}
	if net.ParseIP(h) != nil {
		return coord
	}
	if h == "localhost" {
		return net.JoinHostPort("127.0.0.1", p)
	}
	return net.JoinHostPort("", p)
}

// join dials the coordinator (retrying until it is up), says hello and
// waits for the directory.
func (r *rendezvous) join(ctx context.Context, me Peer) (*Directory, error) {
	var link transport.Link
	backoff := 20 * time.Millisecond
	for {
		var err error
		link, err = r.netw.Dial(ctx, r.b.Coord, 0, r.cfg)
		if err == nil {
			break
		}
		if isAuthError(err) {
			why := ""
			if errors.Is(err, transport.ErrBadSecret) || errors.Is(err, transport.ErrJobMismatch) {
				why = " (wrong secret or job?)"
			}
			return nil, fmt.Errorf("bootstrap: authentication with the coordinator (rank 0 at %s) failed%s: %w", r.b.Coord, why, err)
		}
		select {
		case <-ctx.Done():
			return nil, &PeerError{Rank: 0, Msg: fmt.Sprintf("cannot reach the coordinator at %s within %v", r.b.Coord, r.b.Timeout), Err: err}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	defer link.Close()
	if err := transport.SendControl(ctx, link, transport.Header{}, me); err != nil {
		return nil, &PeerError{Rank: 0, Msg: "sending hello", Err: err}
	}
	var dir Directory
	if err := transport.RecvControl(ctx, link, &dir); err != nil {
		return nil, &PeerError{Rank: 0, Msg: "waiting for the directory (some rank did not join?)", Err: err}
	}
	if len(dir.Peers) != r.b.Size {
		return nil, fmt.Errorf("%w: directory lists %d ranks, expected %d", ErrProtocol, len(dir.Peers), r.b.Size)
	}
	return &dir, nil
}
