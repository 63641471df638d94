package bootstrap

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The environment contract between a launcher and comm.Init. hetrun sets
// these; under other launchers FromEnv derives what it can from theirs.
const (
	EnvRank       = "HETCOMM_RANK"        // this rank, 0 <= rank < size
	EnvSize       = "HETCOMM_SIZE"        // number of ranks
	EnvLocalRank  = "HETCOMM_LOCAL_RANK"  // rank among those on this host (optional)
	EnvCoord      = "HETCOMM_COORD"       // host:port where rank 0 runs the coordinator
	EnvSecret     = "HETCOMM_SECRET"      // per-job secret (any string)
	EnvSecretFile = "HETCOMM_SECRET_FILE" // or a file holding it (must not be world-readable)
	EnvTransport  = "HETCOMM_TRANSPORT"   // tcp (default), tls, quic or udp
	EnvTimeout    = "HETCOMM_TIMEOUT"     // Go duration: start-up timeout (joining, connecting, probing)
	EnvOpTimeout  = "HETCOMM_OP_TIMEOUT"  // Go duration: bound on every blocking operation without a deadline of its own (optional)
	EnvJob        = "HETCOMM_JOB"         // job id (optional; derived from the launcher)
	EnvHost       = "HETCOMM_HOST"        // address other ranks use to reach this one (optional)
	EnvRails      = "HETCOMM_RAILS"       // comma-separated rails: local addresses, or networks (CIDR) resolved to this host's address in them (optional)
	EnvRailPolicy = "HETCOMM_RAIL_POLICY" // auto (default), single, mux, agg or muxagg (optional)
	EnvRailsAuto  = "HETCOMM_RAILS_AUTO"  // without HETCOMM_RAILS: on (default: every other network all ranks share becomes a rail), off, or networks (CIDR) to limit it to
	EnvModel      = "HETCOMM_MODEL"       // cost-model JSON file (optional)
	EnvProbe      = "HETCOMM_PROBE"       // link probing at start-up: full, cached (default), off, or pairwise (every ordered pair measured, uncached)
	EnvEmulate    = "HETCOMM_EMULATE"     // a model JSON or netlab topology whose rates and latencies the links emulate (optional)
	EnvRefresh    = "HETCOMM_REFRESH"     // Go duration: run the background model refresher at this interval (optional)
	EnvWatch      = "HETCOMM_WATCH"       // host:port of the launcher: the rank exits when that connection ends (set by hetrun)
)

// DefaultTimeout is the start-up and operation timeout when none is set.
const DefaultTimeout = 60 * time.Second

// Bootstrap is what one rank needs to join its world. comm.Init reads it
// from the environment (see [FromEnv]) unless its Config provides one.
type Bootstrap struct {
	Rank      int
	Size      int
	LocalRank int
	// Coord is host:port of the coordinator, which rank 0 runs.
	Coord string
	// Secret authenticates every connection of the job.
	Secret []byte
	// Job identifies the job; connections from another job are refused.
	Job string
	// Transport is tcp, tls, quic, udp, or mem (in-process worlds, which
	// need a network given to Connect).
	Transport string
	// Timeout bounds start-up: joining the coordinator, connecting and
	// probing.
	Timeout time.Duration
	// OpTimeout bounds every blocking operation whose context has no
	// deadline of its own, when comm's Config.OpTimeout is zero; 0 means
	// no bound.
	OpTimeout time.Duration
	// Host is the address this rank advertises; empty means: the local
	// address of the route to the coordinator.
	Host string
	// Rails lists local addresses to listen on, one per rail, or networks
	// in CIDR form (10.77.2.0/24), each meaning this host's address in it;
	// empty means one rail on Host.
	Rails []string
	// RailsAuto, when Rails is empty, chooses the rails found by
	// themselves: "" or "on" adds one rail per other network that every
	// rank has an address in, "off" none, and networks in CIDR form limit
	// the search to them (see HETCOMM_RAILS_AUTO).
	RailsAuto string
	// RailPolicy names the rail policy (transport.ParseRailPolicy) used
	// when comm's Config.RailPolicy is left at its zero value; "" means
	// auto.
	RailPolicy string
	// Model is a cost-model JSON file to use instead of probing; optional.
	Model string
	// Probe is the probing mode at start-up: "full", "cached", "off" or
	// "pairwise" (the tournament of every ordered pair, netprobe
	// ModePairwise); "" means cached (or off when Model is set).
	Probe string
	// Emulate is a model JSON file (latency and bandwidth matrices) or a
	// netlab topology (comm.LoadEmulation turns it into one): each
	// rank shapes what it sends to rank j in user space to the rate and
	// one-way delay of row i, column j, so a heterogeneous network, with
	// latencies, can be reproduced on one machine without root.
	Emulate string
	// Refresh is the background refresher's interval used when comm's
	// Config.Refresh is zero; 0 means off.
	Refresh time.Duration
	// Watch is host:port where the launcher (hetrun) listens: a rank
	// holds a connection to it and exits when it ends, so that no rank
	// outlives its launcher, also on remote hosts. "" means none.
	Watch string
	// Launcher says where the values came from.
	Launcher Launcher
}

// WithDefaults returns a copy of b with a zero Timeout, Transport and Job
// set to DefaultTimeout, tcp and "hetcomm-job", validated.
func (b Bootstrap) WithDefaults() (*Bootstrap, error) {
	if b.Timeout == 0 {
		b.Timeout = DefaultTimeout
	}
	if b.Transport == "" {
		b.Transport = "tcp"
	}
	if b.Job == "" {
		b.Job = "hetcomm-job"
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Validate checks the bootstrap for consistency.
func (b *Bootstrap) Validate() error {
	switch {
	case b.Size < 1:
		return &EnvError{Var: EnvSize, Msg: fmt.Sprintf("size %d: must be at least 1", b.Size)}
	case b.Rank < 0 || b.Rank >= b.Size:
		return &EnvError{Var: EnvRank, Msg: fmt.Sprintf("rank %d out of range [0,%d)", b.Rank, b.Size)}
	case b.Timeout <= 0:
		return &EnvError{Var: EnvTimeout, Msg: fmt.Sprintf("%v: must be positive", b.Timeout)}
	}
	switch b.Probe {
	case "", "full", "cached", "off", "pairwise":
	default:
		return &EnvError{Var: EnvProbe, Msg: fmt.Sprintf("unknown probing mode %q (want full, cached, off or pairwise)", b.Probe)}
	}
	switch b.Transport {
	case "tcp", "quic", "udp", "tls", "mem":
	default:
		return &EnvError{Var: EnvTransport, Msg: fmt.Sprintf("unknown transport %q (want tcp, tls, quic or udp)", b.Transport)}
	}
	if b.Size > 1 {
		if len(b.Secret) == 0 {
			return &EnvError{Msg: "no job secret: set HETCOMM_SECRET or HETCOMM_SECRET_FILE (hetrun does this for you)"}
		}
		if b.Coord == "" {
			return &EnvError{Var: EnvCoord, Msg: fmt.Sprintf("not set: under %s, set it to host:port where rank 0 can listen", b.Launcher)}
		}
		if _, _, err := net.SplitHostPort(b.Coord); err != nil && b.Transport != "mem" {
			return &EnvError{Var: EnvCoord, Msg: fmt.Sprintf("%q is not host:port", b.Coord)}
		}
	}
	return nil
}

// Env returns the HETCOMM_* variables that reproduce b, as KEY=VALUE
// strings for a child process.
func (b *Bootstrap) Env() []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(b.Rank),
		EnvSize + "=" + strconv.Itoa(b.Size),
		EnvLocalRank + "=" + strconv.Itoa(b.LocalRank),
		EnvCoord + "=" + b.Coord,
		EnvSecret + "=" + string(b.Secret),
		EnvTransport + "=" + b.Transport,
		EnvTimeout + "=" + b.Timeout.String(),
		EnvJob + "=" + b.Job,
	}
	optional := []struct{ name, value string }{
		{EnvHost, b.Host},
		{EnvRails, strings.Join(b.Rails, ",")},
		{EnvRailPolicy, b.RailPolicy},
		{EnvRailsAuto, b.RailsAuto},
		{EnvModel, b.Model},
		{EnvProbe, b.Probe},
		{EnvEmulate, b.Emulate},
		{EnvWatch, b.Watch},
	}
	if b.Refresh > 0 {
		optional = append(optional, struct{ name, value string }{EnvRefresh, b.Refresh.String()})
	}
	if b.OpTimeout > 0 {
		optional = append(optional, struct{ name, value string }{EnvOpTimeout, b.OpTimeout.String()})
	}
	for _, o := range optional {
		if o.value != "" {
			env = append(env, o.name+"="+o.value)
		}
	}
	return env
}
