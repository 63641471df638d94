package live

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/bootstrap"
)

// launchFlags are the flags of the subcommands that start ranks of this
// executable (live, probe): how many, where, over what.
type launchFlags struct {
	n                     *int
	transport, hosts, rsh *string
	emulate               *string
	rails, railPolicy     *string
	railsAuto             *string
}

// register adds the flags to fs; railsHelp and policyHelp end the help of
// -rails and -rail-policy.
func (l *launchFlags) register(fs *flag.FlagSet, railsHelp, policyHelp string) {
	l.n = fs.Int("n", 4, "number of ranks")
	l.transport = fs.String("transport", "tcp", "hetcomm transport: tcp, quic, udp or tls")
	l.hosts = fs.String("hosts", "", "comma-separated hosts for the ranks (default: all local)")
	l.rsh = fs.String("rsh", "ssh", "agent for --hosts, called as AGENT HOST COMMAND")
	l.emulate = fs.String("emulate", "", "emulate a network in user space: a model JSON or a netlab topology (rates and latencies per pair)")
	l.rails = fs.String("rails", "", "rails (NICs) of every rank, as networks such as 10.77.1.0/24,10.77.2.0/24 or addresses (HETCOMM_RAILS)"+railsHelp)
	l.railPolicy = fs.String("rail-policy", "", policyHelp)
	l.railsAuto = fs.String("rails-auto", os.Getenv(bootstrap.EnvRailsAuto), "without -rails: on (every other network all ranks have an address in becomes a rail), off, or networks (CIDR) to look in (HETCOMM_RAILS_AUTO)")
}

// env is the ranks' environment for the rails and, with -emulate, the
// emulation; it also returns the path of the emulated network's model, a
// file written in tmp. A bad
// -emulate is a usage error, reported on stderr as command's.
func (l *launchFlags) env(command, tmp string, stderr io.Writer) (env []string, emulated string, code int, ok bool) {
	if l.rails != nil && *l.rails != "" {
		env = append(env, bootstrap.EnvRails+"="+*l.rails)
	}
	if l.railPolicy != nil && *l.railPolicy != "" {
		env = append(env, bootstrap.EnvRailPolicy+"="+*l.railPolicy)
	}
	if l.railsAuto != nil && *l.railsAuto != "" {
		env = append(env, bootstrap.EnvRailsAuto+"="+*l.railsAuto)
	}
	if *l.emulate == "" {
		return env, "", bench.ExitOK, true
	}
	path, size, model, err := emulationFile(*l.emulate, tmp)
	if err != nil {
		fmt.Fprintf(stderr, "hetbench %s: -emulate: %v\n", command, err)
		return nil, "", bench.ExitUsage, false
	}
	if size != *l.n {
		fmt.Fprintf(stderr, "hetbench %s: -emulate %s describes %d ranks, -n is %d\n", command, *l.emulate, size, *l.n)
		return nil, "", bench.ExitUsage, false
	}
	return append(env, bootstrap.EnvEmulate+"="+path), model, bench.ExitOK, true
}

// launch starts the ranks with env and args (launchSelf).
func (l *launchFlags) launch(ctx context.Context, env, args []string, stdout, stderr io.Writer) error {
	return launchSelf(ctx, *l.n, *l.transport, *l.hosts, *l.rsh, env, args, stdout, stderr)
}

// interruptContext ends on SIGINT or SIGTERM, so that the ranks a command
// started are stopped with it.
func interruptContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
