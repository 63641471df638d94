package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// Config says how Connect builds the mesh. The zero value is usable.
type Config struct {
	// Transport configures every link. Connect sets its JobID, Rank and
	// Secret from the Bootstrap, and its Identity on tls and quic. Alloc,
	// when set, is where received payloads land; with several rails a
	// RailRouter wraps it.
	Transport transport.Config
	// RailCosts gives the costs that the RailSet of a pair with several
	// rails starts with (peer is the other rank, rails their number).
	// Needed only when ranks have several rails.
	RailCosts func(peer, rails int) []transport.RailCost
	// RailPolicy and OnRailDown configure the RailSets.
	RailPolicy transport.RailPolicy
	OnRailDown func(transport.RailEvent)
	// RailUserTimeout is the links' UserTimeout when there are several
	// rails and Transport.UserTimeout is zero: a rail whose path goes
	// silent must fail, and hand its traffic to the others, well before
	// the peer is declared silent as a whole. 0 leaves it alone.
	RailUserTimeout time.Duration
	// Logger receives warnings (unexpected links, bad hellos); nil
	// discards them.
	Logger *slog.Logger
}

// Mesh is a rank's connections to every other rank.
type Mesh struct {
	Kind transport.Kind
	Dir  *Directory
	// Links holds one link per peer, by rank (nil for this rank): a
	// *transport.RailSet where the pair has several rails.
	Links []transport.Link
	// RailSets holds the pairs' RailSets by rank; nil when no pair has
	// several rails.
	RailSets []*transport.RailSet
	// Listeners must stay open as long as the links: a quic or udp link
	// shares its listener's socket.
	Listeners []transport.Listener
}

// Close closes every link and listener.
func (m *Mesh) Close() {
	for _, l := range m.Links {
		if l != nil {
			l.Close()
		}
	}
	for _, l := range m.Listeners {
		l.Close()
	}
}

// Connect joins rank b.Rank to its world: it listens on every rail, meets
// the other ranks at the coordinator (rank 0, at b.Coord), and connects
// every pair of ranks once per rail the two have in common. netw is the
// network of the links; nil means the socket network b.Transport names
// (the mem transport needs its *transport.MemNetwork). The coordinator
// speaks tcp on every socket transport. It fails after b.Timeout, naming
// a missing rank with a *PeerError, and closes what it opened.
func Connect(ctx context.Context, b *Bootstrap, netw transport.Network, cfg Config) (*Mesh, error) {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	netw, err := network(b, netw)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &connector{b: b, cfg: cfg, netw: netw, kind: netw.Kind(),
		mesh: &Mesh{Kind: netw.Kind(), Links: make([]transport.Link, b.Size)}}
	if err := c.connect(ctx); err != nil {
		c.mesh.Close()
		return nil, err
	}
	return c.mesh, nil
}

// network returns the network named by the bootstrap, unless one is given.
func network(b *Bootstrap, netw transport.Network) (transport.Network, error) {
	if netw != nil {
		return netw, nil
	}
	k, err := transport.ParseKind(b.Transport)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if k == transport.KindMem {
		return nil, errors.New("bootstrap: the mem transport needs its network (a *transport.MemNetwork)")
	}
	return transport.NetworkFor(k)
}

// connector builds one rank's mesh.
type connector struct {
	b      *Bootstrap
	cfg    Config
	netw   transport.Network
	kind   transport.Kind
	tcfg   transport.Config      // the links' configuration
	router *transport.RailRouter // with several rails: places their parts
	mesh   *Mesh
	// found is the network of each rail found by itself (the first: "");
	// nil when the rails were given or none was found.
	found []string
	// lateUserTimeout is set on every rail link in assemble (rails found
	// by themselves; see keepRails).
	lateUserTimeout time.Duration
}

func (c *connector) connect(ctx context.Context) error {
	me, err := c.listen()
	if err != nil {
		return err
	}
	me.Host, _ = os.Hostname()
	me.PID = os.Getpid()
	coordNet := c.netw
	if c.kind != transport.KindMem {
		coordNet, _ = transport.NetworkFor(transport.KindTCP)
	}
	coordCfg := c.tcfg
	coordCfg.Alloc = nil
	rv := &rendezvous{b: c.b, netw: coordNet, cfg: coordCfg, log: c.cfg.Logger}
	me.Nets = c.found
	dir, err := rv.meet(ctx, me)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(dir.Peers, func(p Peer) bool { return len(p.Nets) > 0 }) {
		c.keepRails(chooseRails(dir)[c.b.Rank])
	}
	c.mesh.Dir = dir
	return c.dialAndAccept(ctx)
}

// keepRails keeps this rank's listeners of the rails chosen (indices
// into its hello, see chooseRails), in that order, and closes the others.
func (c *connector) keepRails(kept []int) {
	ls := c.mesh.Listeners
	var out []transport.Listener
	for _, i := range kept {
		out = append(out, ls[i])
	}
	for i, l := range ls {
		if !slices.Contains(kept, i) {
			_ = l.Close()
		}
	}
	c.mesh.Listeners = out
	if len(c.found) > 0 {
		var rails []string
		for _, i := range kept {
			rails = append(rails, c.b.Rails[i])
		}
		c.b.Rails = rails
		// Several rails after all: dialed rails get RailUserTimeout now,
		// accepted ones in assemble (their listeners had none, so that a
		// single rail keeps the plain links' behaviour).
		if len(kept) > 1 && c.tcfg.UserTimeout == 0 {
			c.tcfg.UserTimeout = c.cfg.RailUserTimeout
			c.lateUserTimeout = c.cfg.RailUserTimeout
		}
	}
}

// listen configures the links and listens on every rail before telling
// anyone where: it returns this rank's hello.
func (c *connector) listen() (Peer, error) {
	me := Peer{Rank: c.b.Rank}
	t := c.cfg.Transport
	t.JobID, t.Rank, t.Secret = JobID(c.b.Job), c.b.Rank, linkSecret(c.b.Secret)
	if c.kind == transport.KindQUIC || c.kind == transport.KindTLS {
		id, err := transport.NewIdentity(t.JobID, c.b.Rank)
		if err != nil {
			return me, fmt.Errorf("bootstrap: %w", err)
		}
		t.Identity = id
		me.Fingerprint = id.Fingerprint.String()
	}
	addrs, err := c.listenAddrs()
	if err != nil {
		return me, err
	}
	if len(addrs) > 1 {
		if c.cfg.RailCosts == nil {
			return me, errors.New("bootstrap: several rails, but Config.RailCosts gives no costs for them")
		}
		c.router = transport.NewRailRouter(t.Alloc)
		t.Alloc = c.router.Alloc
		if t.UserTimeout == 0 && c.found == nil {
			t.UserTimeout = c.cfg.RailUserTimeout
		}
	}
	if err := t.Validate(); err != nil {
		return me, fmt.Errorf("bootstrap: %w", err)
	}
	c.tcfg = t
	for i, addr := range addrs {
		l, err := c.netw.Listen(addr, t)
		if err != nil {
			return me, fmt.Errorf("bootstrap: listening on %s: %w", addr, err)
		}
		c.mesh.Listeners = append(c.mesh.Listeners, l)
		me.Addrs = append(me.Addrs, advertise(l.Addr(), c.railHost(i)))
	}
	return me, nil
}

// listenAddrs returns where each rail listens, after resolving rails
// given as networks to this host's address in them.
func (c *connector) listenAddrs() ([]string, error) {
	if c.kind == transport.KindMem {
		addrs := make([]string, max(1, len(c.b.Rails)))
		for i := range addrs {
			addrs[i] = fmt.Sprintf("%s/rank%d/rail%d", c.b.Job, c.b.Rank, i)
		}
		return addrs, nil
	}
	if len(c.b.Rails) == 0 {
		host := c.localHost()
		addrs := []string{net.JoinHostPort(host, "0")}
		limit, on, err := parseRailsAuto(c.b.RailsAuto)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: %s: %w", EnvRailsAuto, err)
		}
		if !on || c.cfg.RailCosts == nil {
			return addrs, nil
		}
		cands, err := discoverRails(host, limit, upInterfaceAddrs)
		if err != nil {
			return nil, err
		}
		c.found = append(c.found, "")
		for _, cd := range cands {
			addrs = append(addrs, net.JoinHostPort(cd.ip, "0"))
			c.b.Rails = append(c.b.Rails, cd.ip)
			c.found = append(c.found, cd.net.String())
		}
		if len(cands) > 0 {
			c.b.Rails = append([]string{host}, c.b.Rails...)
		} else {
			c.found = nil
		}
		return addrs, nil
	}
	rails, err := resolveRails(c.b.Rails, net.InterfaceAddrs)
	if err != nil {
		return nil, err
	}
	c.b.Rails = rails
	addrs := make([]string, len(rails))
	for i, r := range rails {
		addrs[i] = net.JoinHostPort(hostOf(r), "0")
	}
	return addrs, nil
}

// resolveRails replaces every rail given as a network (CIDR, such as
// 10.77.2.0/24) with this host's address in it, so that one
// HETCOMM_RAILS serves every host of a job.
func resolveRails(rails []string, local func() ([]net.Addr, error)) ([]string, error) {
	out := make([]string, len(rails))
	for i, r := range rails {
		_, network, err := net.ParseCIDR(r)
		if err != nil {
			out[i] = r // an address
			continue
		}
		addrs, err := local()
		if err != nil {
			return nil, fmt.Errorf("bootstrap: rail %d (%s): listing this host's addresses: %w", i, r, err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && network.Contains(ipn.IP) {
				out[i] = ipn.IP.String()
				break
			}
		}
		if out[i] == "" {
			return nil, fmt.Errorf("bootstrap: rail %d (%s): this host has no address in that network", i, r)
		}
	}
	return out, nil
}

// hostOf returns the host part of a host:port address (addr itself when
// it has no port).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// railHost is the host rail i advertises.
func (c *connector) railHost(i int) string {
	if len(c.b.Rails) > i {
		return hostOf(c.b.Rails[i])
	}
	return c.localHost()
}

// localHost is the address other ranks reach this one at: HETCOMM_HOST,
// or the local end of the route to the coordinator.
func (c *connector) localHost() string {
	if c.b.Host != "" {
		return c.b.Host
	}
	host, _, err := net.SplitHostPort(c.b.Coord)
	if err != nil {
		return "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return "127.0.0.1"
	}
	// A UDP "connection" sends nothing; it only asks the kernel for a route.
	conn, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

// advertise replaces an unspecified listening host by host.
func advertise(a net.Addr, host string) string {
	s := a.String()
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return s
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host, p)
	}
	return s
}

// isAuthError reports a handshake that failed for good: the peer proved
// another secret, job, protocol version, rank or certificate. A handshake
// cut short (closed, timed out, garbled) is not one: the listener may be
// busy or flooded, and the dial is retried until the start-up timeout.
func isAuthError(err error) bool {
	var ae *transport.AuthError
	if !errors.As(err, &ae) {
		return false
	}
	for _, e := range []error{transport.ErrBadSecret, transport.ErrJobMismatch, transport.ErrVersion, transport.ErrFingerprint, transport.ErrRankMismatch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
