package comm

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// Naive is the Alltoallv "algorithm" that posts every message at once and
// lets the network sort it out, as Gloo does. It is there for comparison.
const Naive = collective.Naive

// Config configures Init. The zero value works: every field documents what
// its zero value means. DefaultConfig returns the defaults explicitly.
type Config struct {
	// Bootstrap says who this rank is and where its world meets. nil means
	// bootstrap.FromEnv(nil): the HETCOMM_* variables or a known launcher.
	Bootstrap *bootstrap.Bootstrap
	// Network carries the links. nil means the socket transport named by
	// Bootstrap.Transport. Set a *transport.MemNetwork (and Bootstrap
	// Transport "mem") to run a whole world inside one process.
	Network transport.Network
	// Transport tunes the links (message size limit, socket buffers,
	// QUIC windows, a logger). JobID, Rank, Secret, Alloc and Identity are
	// set by comm and bootstrap.Connect. The zero value means
	// transport.DefaultConfig().
	Transport transport.Config

	// Alltoallv is the default planner of Alltoallv: one of
	// collective.Algorithms(collective.KindAlltoall), collective.Auto,
	// Naive or collective.Paced. "" means collective.Auto.
	Alltoallv collective.Algorithm
	// Allreduce forces how Allreduce combines: collective.AllreduceTree
	// or collective.AllreduceRSAG. "" (or collective.Auto) chooses per
	// call, by the model's predictions (collective.PlanAllreduce).
	Allreduce collective.Algorithm
	// Bcast forces how Bcast sends: collective.BcastBinomial or
	// collective.BcastPipeline. "" (or collective.Auto) chooses per call,
	// by the model's predictions (collective.PlanBcast).
	Bcast collective.Algorithm
	// Allgather forces how Allgather and Allgatherv pass the blocks:
	// collective.AllgatherRing or collective.AllgatherMesh. "" (or
	// collective.Auto) chooses per call (collective.PlanAllgather).
	Allgather collective.Algorithm
	// EagerLimit is the largest message sent eagerly; larger messages wait
	// for the receiver's grant (rendezvous). 0 means 64 KiB; negative means
	// every message is eager.
	EagerLimit int
	// Model is the cost model collectives are planned with. nil means the
	// file named by Bootstrap.Model, or else the probed model (see Probe),
	// or else, with probing off, a uniform model.
	Model *collective.Model
	// Probe is the probing mode at start-up (netprobe.ModeFull, ModeCached,
	// ModeOff). "" means Bootstrap.Probe, and then ModeCached.
	Probe netprobe.Mode
	// ProbeConfig tunes the probe; the zero value is netprobe's defaults.
	ProbeConfig netprobe.Config
	// CacheDir holds cached models. "" means netprobe.DefaultCacheDir().
	CacheDir string
	// Drift is the relative difference between the rates observed during
	// Alltoallv and the model's beyond which the model is updated (the
	// next plans use the observed rates). 0 means 0.3; negative disables.
	Drift float64
	// Refresh runs a background refresher (see refresh.go's comment):
	// while the application leaves the network idle, every Refresh one
	// rank measures one of its outgoing links again, its peers in turn,
	// and rates that stay off the model by more than Drift are updated
	// on every rank at the next world Alltoallv. 0 means
	// Bootstrap.Refresh (HETCOMM_REFRESH), and then off; negative is off.
	// It needs drift detection (Drift >= 0).
	Refresh time.Duration
	// RefreshShare bounds the share of its time a rank spends sending the
	// refresher's bulk messages. 0 means DefaultRefreshShare (1%); at
	// most 0.5.
	RefreshShare float64

	// Heartbeat is the interval of liveness probes: a heartbeat on every
	// link idle for this long, and four pulses (authenticated datagrams
	// on a socket of their own, which no payload delays) to every peer
	// per Heartbeat. 0 means 1 s; negative disables heartbeats, pulses
	// and silence detection.
	Heartbeat time.Duration
	// FailAfter declares a peer failed when nothing of its own arrived
	// from it for this long: no message, heartbeat or pulse, no byte of a
	// message under way. A stopped or hung peer is so failed, on every
	// transport and whatever its links were doing, at most FailAfter +
	// Heartbeat/2 after it stopped (5.5 s by default), plus the time the
	// network takes to deliver what its sockets still held: a live
	// peer is still heard through its pulses while its messages wait on
	// a congested link. Where no pulse ever arrived from a peer (UDP
	// filtered between them), a message under way from it may go without
	// a byte for 4 times FailAfter; a peer not heard from at all since
	// this rank started (still connecting) gets the start-up timeout. 0
	// means 5 s. See docs/liveness.md.
	FailAfter time.Duration
	// OpTimeout bounds every blocking operation whose context has no
	// deadline of its own: a collective that some rank never joins fails
	// after it with an error wrapping context.DeadlineExceeded that names
	// the rank this one waited for. 0 means Bootstrap.OpTimeout
	// (HETCOMM_OP_TIMEOUT, hetrun --op-timeout), and then no bound: a dead
	// peer is detected by its closed links and by heartbeats instead.
	OpTimeout time.Duration
	// Logger receives warnings (broken links, failed ranks). nil discards.
	Logger *slog.Logger

	// RailPolicy is how messages to a peer reachable over several rails
	// (Bootstrap.Rails) use them: transport.RailAuto (the zero value:
	// multiplex small messages, split large ones across rails), RailSingle,
	// RailMux, RailAgg or RailMuxAgg. See docs/rails.md.
	RailPolicy transport.RailPolicy

	// CPUs is this process's GOMAXPROCS once the world has formed. 0
	// means: divide the host's CPUs evenly among the world's processes
	// that run on it (at least one each), as MPI launchers bind ranks to
	// cores, unless the GOMAXPROCS environment variable is set. Go's
	// schedulers in several processes on too few cores otherwise spin
	// against each other: with 4 ranks on 2 cores, a 64 KiB Alltoallv
	// took 1.6x as long. Negative leaves GOMAXPROCS alone.
	CPUs int

	// noCallNotices turns off the notices of calls that wait long
	// (stall.go), for tests of what the messages alone reveal.
	noCallNotices bool
}

// Defaults of Config.
const (
	DefaultEagerLimit = 64 << 10
	DefaultHeartbeat  = time.Second
	DefaultFailAfter  = 5 * time.Second
)

// DefaultConfig returns a Config with every default spelled out.
func DefaultConfig() Config {
	return Config{
		Transport:  transport.DefaultConfig(),
		Alltoallv:  collective.Auto,
		EagerLimit: DefaultEagerLimit,
		Heartbeat:  DefaultHeartbeat,
		FailAfter:  DefaultFailAfter,
	}
}

// normalize fills zero values with defaults and validates.
func (c Config) normalize() (Config, error) {
	if c.Alltoallv == "" {
		c.Alltoallv = collective.Auto
	}
	if !alltoallvAlgorithm(c.Alltoallv) {
		return c, fmt.Errorf("comm: config: unknown Alltoallv algorithm %q (want %v, auto, naive or paced)", c.Alltoallv, collective.Algorithms(collective.KindAlltoall))
	}
	switch c.Allreduce {
	case "", collective.Auto, collective.AllreduceTree, collective.AllreduceRSAG:
	default:
		return c, fmt.Errorf("comm: config: unknown Allreduce algorithm %q (want %s, %s or auto)", c.Allreduce, collective.AllreduceTree, collective.AllreduceRSAG)
	}
	switch c.Bcast {
	case "", collective.Auto, collective.BcastBinomial, collective.BcastPipeline:
	default:
		return c, fmt.Errorf("comm: config: unknown Bcast algorithm %q (want %s, %s or auto)", c.Bcast, collective.BcastBinomial, collective.BcastPipeline)
	}
	switch c.Allgather {
	case "", collective.Auto, collective.AllgatherRing, collective.AllgatherMesh:
	default:
		return c, fmt.Errorf("comm: config: unknown Allgather algorithm %q (want %s, %s or auto)", c.Allgather, collective.AllgatherRing, collective.AllgatherMesh)
	}
	if c.EagerLimit == 0 {
		c.EagerLimit = DefaultEagerLimit
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.FailAfter == 0 {
		c.FailAfter = DefaultFailAfter
	}
	if c.FailAfter < 0 || c.OpTimeout < 0 {
		return c, fmt.Errorf("comm: config: negative FailAfter or OpTimeout")
	}
	if c.Heartbeat > 0 && c.FailAfter <= c.Heartbeat {
		return c, fmt.Errorf("comm: config: FailAfter (%v) must exceed Heartbeat (%v)", c.FailAfter, c.Heartbeat)
	}
	if c.RefreshShare == 0 {
		c.RefreshShare = DefaultRefreshShare
	}
	if !(c.RefreshShare > 0 && c.RefreshShare <= 0.5) {
		return c, fmt.Errorf("comm: config: RefreshShare %v is not in (0, 0.5]", c.RefreshShare)
	}
	if c.Model != nil {
		if err := c.Model.Validate(); err != nil {
			return c, fmt.Errorf("comm: config: model: %w", err)
		}
	}
	return c, nil
}

// algorithmKey is the context key of WithAlgorithm.
type algorithmKey struct{}

// WithAlgorithm returns a context that forces algo on the collectives
// called with it that plan their algorithm: Bcast
// (collective.BcastBinomial or collective.BcastPipeline), Allgather and
// Allgatherv (collective.AllgatherRing or collective.AllgatherMesh) and
// Allreduce (collective.AllreduceTree or collective.AllreduceRSAG). It overrides
// Config for those calls; collective.Auto lets them choose. Every rank
// must force the same algorithm: a rank whose plan differs from its
// peers' fails with ErrMismatch. An algorithm that does not belong to a
// collective is ignored by it.
func WithAlgorithm(ctx context.Context, algo collective.Algorithm) context.Context {
	return context.WithValue(ctx, algorithmKey{}, algo)
}

// algorithmFor returns the algorithm forced on a call: the context's
// (WithAlgorithm) when it is one of the collective's, else dflt.
func algorithmFor(ctx context.Context, dflt collective.Algorithm, valid ...collective.Algorithm) collective.Algorithm {
	if a, ok := ctx.Value(algorithmKey{}).(collective.Algorithm); ok {
		if a == collective.Auto || slices.Contains(valid, a) {
			return a
		}
	}
	return dflt
}
