package live

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/transport"
)

// The synthetic benchmark of the multi-network paper (Kim and Lilja,
// section 4.2, Table 3, Figure 12): a master sends N messages, each to a
// slave drawn uniformly, whose size follows, with probability b, a Poisson
// law of mean l1 (8 bytes), otherwise one of mean l2 (2 kB or 20 kB); the
// slave answers each complete message with 4 bytes and the master sends
// the next one when the answer arrives. It runs over each rail alone, mux,
// agg and muxagg, and reports times normalised to the slow rail alone.
//
// Two modes: on netlab hosts through an agent (-rsh, -hosts: each host's
// NICs are the rails, as the agent's NETLAB_ADDRS lists them, eth0 = slow,
// eth1 = fast), or in one process over loopback TCP with the transport's
// emulated shaping (transport.Shape) for machines without root.

// SyntheticType is one parameter set of the paper's Table 3.
type SyntheticType struct {
	Name  string
	Small float64 // b: the probability of a message of mean L1
	L1    float64 // mean size of small messages (bytes)
	L2    float64 // mean size of large messages (bytes)
}

// SyntheticTypes are Table 3's types A to F (K = 1024).
var SyntheticTypes = []SyntheticType{
	{"A", 0.5, 8, 2 << 10}, {"B", 0.1, 8, 2 << 10}, {"C", 0.9, 8, 2 << 10},
	{"D", 0.5, 8, 20 << 10}, {"E", 0.1, 8, 20 << 10}, {"F", 0.9, 8, 20 << 10},
}

// syntheticConfigs are the network options of Figure 12, in its order.
var syntheticConfigs = []string{"slow", "fast", "mux", "agg", "muxagg"}

// synthOptions are SyntheticCommand's settings.
type synthOptions struct {
	N         int
	Types     []SyntheticType
	Configs   []string
	Runs      int
	Seed      uint64
	Slaves    int
	Hosts     []string // netlab mode: master first, then the slaves
	Rsh       string
	Port      int
	SlowRate  float64 // loopback: Mbit/s
	FastRate  float64
	SlowDelay time.Duration // emulated one-way delay added to a rail
	FastDelay time.Duration
	MinChunk  int64
	SplitAt   int64
	Out       string
	Timeout   time.Duration

	rankPrefix []string // the command line that starts a rank (tests); default: this executable
}

func (o *synthOptions) netlab() bool { return o.Rsh != "" }

// shapes returns the emulated shaping of the two rails: rates only in
// loopback mode (on netlab the kernel shapes), delays in both.
func (o *synthOptions) shapes() []transport.ShapeConfig {
	s := []transport.ShapeConfig{{Delay: o.SlowDelay}, {Delay: o.FastDelay}}
	if !o.netlab() {
		s[0].Rate = o.SlowRate * 1e6 / 8
		s[1].Rate = o.FastRate * 1e6 / 8
	}
	return s
}

// SyntheticCommand implements `hetbench synthetic`. Its rank side is the
// hidden command `synthetic-rank` (SyntheticRankCommand), which the
// netlab mode starts on every host through the agent.
func SyntheticCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synthetic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := synthOptions{}
	fs.IntVar(&o.N, "n", 0, "messages per run (the paper: 10000; 0: 10000 on netlab, 500 in loopback)")
	types := fs.String("types", "ABCDEF", "Table 3 types to run")
	configs := fs.String("configs", strings.Join(syntheticConfigs, ","), "network options: slow, fast, mux, agg, muxagg")
	fs.IntVar(&o.Runs, "runs", 3, "runs (seeds) per type and option; the table shows medians")
	seed := fs.Uint64("seed", 1, "random seed")
	fs.IntVar(&o.Slaves, "slaves", 1, "slaves (p - 1); netlab: the hosts after the first")
	hosts := fs.String("hosts", "", "netlab mode: comma-separated hosts (names or addresses), the master first")
	fs.StringVar(&o.Rsh, "rsh", "", "netlab mode: the lab's agent, called as AGENT HOST COMMAND (e.g. /run/netlab/nl-dualnic4/agent)")
	fs.IntVar(&o.Port, "port", 47400, "netlab mode: first port; rail r of a slave listens on port+r")
	fs.Float64Var(&o.SlowRate, "slow-rate", 50, "loopback mode: the slow rail's rate in Mbit/s")
	fs.Float64Var(&o.FastRate, "fast-rate", 200, "loopback mode: the fast rail's rate in Mbit/s")
	slowDelay := fs.Duration("slow-delay", 0, "one-way delay emulated in user space on the slow rail")
	fastDelay := fs.Duration("fast-delay", -1, "one-way delay emulated in user space on the fast rail (-1: 0 on netlab, 2ms in loopback)")
	fs.Int64Var(&o.MinChunk, "min-chunk", 1024, "agg: smallest part on a rail, in bytes (the paper splits from 900 B)")
	fs.Int64Var(&o.SplitAt, "split-at", 0, "muxagg: split messages from this size on (0: derived from the probed costs)")
	fs.StringVar(&o.Out, "out", "bench/results/synthetic", "directory for the CSV, JSON and PNG files")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: hetbench synthetic [flags]

The multi-network paper's synthetic benchmark (Kim and Lilja, Table 3 and
Figure 12): a master sends N messages of Poisson sizes to random slaves,
each answered with 4 bytes, over the slow rail alone, the fast rail alone,
mux, agg and muxagg; times are normalised to the slow rail alone.

On netlab (as root):
  netlab up bench/topologies/dualnic4.json
  hetbench synthetic -rsh /run/netlab/nl-dualnic4/agent -hosts n1,n2
Without root, over loopback with emulated rates and delays:
  hetbench synthetic -n 500

Note: Go's timers sleep at least about 1 ms when the process is idle. An
emulated delay (-fast-delay) spins through its last millisecond, so it is
precise to a few microseconds; in loopback mode, the pacing of a message
shorter than 1 ms still costs about 1 ms.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := bench.ParseFlags(fs, "synthetic", args, false, stderr); !ok {
		return code
	}
	o.Seed = *seed
	o.SlowDelay = *slowDelay
	o.FastDelay = *fastDelay
	if *hosts != "" {
		o.Hosts = strings.Split(*hosts, ",")
	}
	if err := o.finish(*types, *configs); err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	res, err := runSynthetic(ctx, &o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitError
	}
	if err := res.report(&o, stdout); err != nil {
		fmt.Fprintln(stderr, "hetbench synthetic:", err)
		return bench.ExitError
	}
	return bench.ExitOK
}

// finish validates the options and fills in the mode defaults.
func (o *synthOptions) finish(types, configs string) error {
	if (o.Rsh == "") != (len(o.Hosts) == 0) {
		return errors.New("-rsh and -hosts go together (netlab mode)")
	}
	if o.netlab() {
		if len(o.Hosts) < 2 {
			return errors.New("-hosts needs the master and at least one slave")
		}
		o.Slaves = len(o.Hosts) - 1
	}
	if o.N == 0 {
		o.N = 10000
		if !o.netlab() {
			o.N = 500
		}
	}
	if o.FastDelay < 0 {
		o.FastDelay = 0
		if !o.netlab() {
			o.FastDelay = 2 * time.Millisecond
		}
	}
	switch {
	case o.N < 1 || o.Runs < 1 || o.Slaves < 1:
		return errors.New("-n, -runs and -slaves must be at least 1")
	case o.SlowRate <= 0 || o.FastRate <= 0:
		return errors.New("rates must be positive")
	case o.SlowDelay < 0 || o.FastDelay < 0 || o.MinChunk < 1 || o.SplitAt < 0:
		return errors.New("negative delay, -min-chunk or -split-at")
	}
	o.Types = nil
	for _, c := range strings.ToUpper(types) {
		i := slices.IndexFunc(SyntheticTypes, func(t SyntheticType) bool { return t.Name == string(c) })
		if i < 0 {
			return fmt.Errorf("unknown type %q (want A to F)", c)
		}
		o.Types = append(o.Types, SyntheticTypes[i])
	}
	o.Configs = nil
	for _, c := range strings.Split(configs, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(syntheticConfigs, c) {
			return fmt.Errorf("unknown option %q (want %s)", c, strings.Join(syntheticConfigs, ", "))
		}
		o.Configs = append(o.Configs, c)
	}
	if len(o.Types) == 0 || len(o.Configs) == 0 {
		return errors.New("no type or no option to run")
	}
	return nil
}
