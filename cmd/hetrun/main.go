// Command hetrun launches the ranks of a hetcomm program.
//
//	hetrun -n N [--transport tcp|tls|quic|udp] [--hosts h1,h2,... | --hostfile F] [--rsh AGENT] PROGRAM_OR_PACKAGE [args...]
//
// A Go package (./examples/heat) is built once and started N times. Each
// output line is prefixed with its rank; Ctrl-C and SIGTERM reach every
// rank; when one rank fails, the others are stopped and hetrun exits
// non-zero naming it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/internal/launch"
	hettransport "github.com/hetcomm/hetcomm/transport"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	spec, prog, buildDir, code := parseArgs(args)
	if code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog, cleanup, code := resolveProgram(ctx, prog, buildDir, len(spec.Hosts) > 0)
	defer cleanup()
	if code >= 0 {
		return code
	}
	spec.Program = prog
	return exitCode(launch.Run(ctx, spec))
}

// parseArgs reads hetrun's flags into a launch spec, the program to run
// and the build directory; code is the exit status when hetrun must stop
// now (help, bad usage), -1 otherwise.
func parseArgs(args []string) (spec launch.Spec, prog, buildDir string, code int) {
	fs := flag.NewFlagSet("hetrun", flag.ContinueOnError)
	n := fs.Int("n", 1, "number of ranks")
	fs.IntVar(n, "np", 1, "the same as -n (mpirun's name)")
	transport := fs.String("transport", "tcp", "transport between ranks: tcp, quic, udp or tls")
	hosts := fs.String("hosts", "", "comma-separated hosts; ranks are placed round-robin (default: all local)")
	hostfile := fs.String("hostfile", "", "file with one host per line, optionally `host slots=N`")
	rsh := fs.String("rsh", "ssh", "agent that runs a command on a host, called as AGENT HOST COMMAND")
	timeout := fs.Duration("timeout", 0, "start-up timeout of the ranks: joining, connecting and probing (default 60s; HETCOMM_TIMEOUT)")
	opTimeout := fs.Duration("op-timeout", 0, "bound on every blocking operation of the ranks, e.g. 5m: a collective some rank never joins fails on the others (default none; HETCOMM_OP_TIMEOUT)")
	buildDirFlag := fs.String("build-dir", "", "where a Go package is built (default: a temporary directory; use a shared path for remote hosts)")
	coord := fs.String("coord", "", "coordinator host:port (default: a free port on rank 0's host)")
	grace := fs.Duration("grace", 3*time.Second, "time ranks get between SIGTERM and SIGKILL")
	noPrefix := fs.Bool("no-prefix", false, "do not prefix output lines with the rank")
	rails := fs.String("rails", "", "comma-separated rails (NICs) every rank uses, as networks such as 10.1.0.0/16,10.2.0.0/16 (each rank takes its address in each) or addresses (HETCOMM_RAILS)")
	railsAuto := fs.String("rails-auto", os.Getenv(bootstrap.EnvRailsAuto), "without --rails: on (default: every other network that all ranks have an address in becomes a rail), off, or networks (CIDR) to look in, like Open MPI's btl_tcp_if_include (HETCOMM_RAILS_AUTO)")
	railPolicy := fs.String("rail-policy", "", "how messages use several rails: auto (default), single, mux, agg or muxagg (HETCOMM_RAIL_POLICY)")
	refresh := fs.Duration("refresh", 0, "run the background model refresher at this interval, e.g. 10s: idle links are measured again, a bounded share of the time (HETCOMM_REFRESH)")
	var env multiFlag
	fs.Var(&env, "x", "`KEY=VALUE` to set in every rank's environment, or KEY to pass hetrun's own value on (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: hetrun -n N [flags] PROGRAM_OR_PACKAGE [args...]

Starts N ranks of a hetcomm program and waits for them. PROGRAM_OR_PACKAGE
is an executable or a Go package (./examples/heat), which is built once.
Exit status: 0 when every rank exits 0; otherwise the failing rank's status
(the others are stopped first); 130 when interrupted; 2 for bad usage.

Examples:
  hetrun -n 4 ./examples/alltoallv -seed 1
  hetrun -n 8 --transport quic --hosts a,b,c,d ./cmd/myprog
  hetrun -n 4 --hostfile hosts.txt --rsh ./agent.sh /shared/bin/myprog
  hetrun -n 4 --hosts a,b,c,d --rails 10.1.0.0/16,10.2.0.0/16 ./cmd/myprog

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return spec, "", "", 0
		}
		return spec, "", "", 2
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "hetrun: no program given")
		fs.Usage()
		return spec, "", "", 2
	}
	if *n < 1 {
		fmt.Fprintf(os.Stderr, "hetrun: -n %d: need at least one rank\n", *n)
		return spec, "", "", 2
	}
	*transport = strings.ToLower(strings.TrimSpace(*transport))
	if k, err := hettransport.ParseKind(*transport); err != nil || k == hettransport.KindMem {
		fmt.Fprintf(os.Stderr, "hetrun: --transport %q: want tcp, tls, quic or udp\n", *transport)
		return spec, "", "", 2
	}
	for i, kv := range env {
		if strings.Contains(kv, "=") {
			continue
		}
		v, ok := os.LookupEnv(kv)
		if !ok || kv == "" {
			fmt.Fprintf(os.Stderr, "hetrun: -x %q: want KEY=VALUE, or KEY set in hetrun's environment\n", kv)
			return spec, "", "", 2
		}
		env[i] = kv + "=" + v
	}
	spec = launch.Spec{N: *n, Args: fs.Args()[1:], Rsh: *rsh, Transport: *transport, Timeout: *timeout,
		Coord: *coord, Env: env, Grace: *grace, NoPrefix: *noPrefix, Stdin: os.Stdin}
	if *rails != "" {
		spec.Env = append(spec.Env, bootstrap.EnvRails+"="+*rails)
	}
	if *railsAuto != "" {
		if err := bootstrap.CheckRailsAuto(*railsAuto); err != nil {
			fmt.Fprintf(os.Stderr, "hetrun: --rails-auto: %v (want on, off or networks such as 10.1.0.0/16)\n", err)
			return spec, "", "", 2
		}
		spec.Env = append(spec.Env, bootstrap.EnvRailsAuto+"="+*railsAuto)
	}
	if *railPolicy != "" {
		if _, err := hettransport.ParseRailPolicy(*railPolicy); err != nil {
			fmt.Fprintf(os.Stderr, "hetrun: --rail-policy %q: want auto, single, mux, agg or muxagg\n", *railPolicy)
			return spec, "", "", 2
		}
		spec.Env = append(spec.Env, bootstrap.EnvRailPolicy+"="+*railPolicy)
	}
	if *refresh < 0 {
		fmt.Fprintf(os.Stderr, "hetrun: --refresh %v: want a positive interval\n", *refresh)
		return spec, "", "", 2
	}
	if *refresh > 0 {
		spec.Env = append(spec.Env, bootstrap.EnvRefresh+"="+refresh.String())
	}
	if *opTimeout < 0 {
		fmt.Fprintf(os.Stderr, "hetrun: --op-timeout %v: want a positive duration\n", *opTimeout)
		return spec, "", "", 2
	}
	if *opTimeout > 0 {
		spec.Env = append(spec.Env, bootstrap.EnvOpTimeout+"="+opTimeout.String())
	}
	switch {
	case *hosts != "" && *hostfile != "":
		fmt.Fprintln(os.Stderr, "hetrun: give --hosts or --hostfile, not both")
		return spec, "", "", 2
	case *hosts != "":
		for _, h := range strings.Split(*hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				spec.Hosts = append(spec.Hosts, h)
			}
		}
	case *hostfile != "":
		data, err := os.ReadFile(*hostfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hetrun: %v\n", err)
			return spec, "", "", 2
		}
		if spec.Hosts, err = launch.ParseHostfile(string(data)); err != nil {
			fmt.Fprintf(os.Stderr, "hetrun: %s: %v\n", *hostfile, err)
			return spec, "", "", 2
		}
	}

	return spec, fs.Arg(0), *buildDirFlag, -1
}

// resolveProgram builds prog when it is a Go package (in buildDir, or a
// temporary directory that cleanup removes) and otherwise finds it in the
// PATH unless it runs on remote hosts; code is the exit status when
// hetrun must stop, -1 otherwise.
func resolveProgram(ctx context.Context, prog, buildDir string, remote bool) (exe string, cleanup func(), code int) {
	cleanup = func() {}
	if launch.IsGoPackage(prog) {
		dir := buildDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "hetrun-")
			if err != nil {
				fmt.Fprintf(os.Stderr, "hetrun: %v\n", err)
				return "", cleanup, 1
			}
			cleanup = func() { os.RemoveAll(tmp) }
			dir = tmp
		}
		// The first build of a package and its dependencies can take a
		// while: say so, and how long it took.
		fmt.Fprintf(os.Stderr, "hetrun: building %s ...\n", prog)
		start := time.Now()
		exe, err := launch.BuildPackage(ctx, prog, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hetrun: %v\n", err)
			return "", cleanup, 1
		}
		fmt.Fprintf(os.Stderr, "hetrun: built %s in %s\n", prog, time.Since(start).Round(100*time.Millisecond))
		return exe, cleanup, -1
	}
	if remote {
		return prog, cleanup, -1
	}
	exe, err := exec.LookPath(prog)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hetrun: %s: no such program or Go package\n", prog)
		return "", cleanup, 2
	}
	return exe, cleanup, -1
}

// exitCode reports how the job ended and returns hetrun's exit status.
func exitCode(err error) int {
	var re *launch.RankError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &re):
		fmt.Fprintf(os.Stderr, "hetrun: %v; stopped the other ranks\n", re)
		return re.ExitCode()
	case errors.Is(err, launch.ErrInterrupted):
		fmt.Fprintln(os.Stderr, "hetrun: interrupted; stopped every rank")
		return 130
	default:
		fmt.Fprintf(os.Stderr, "hetrun: %v\n", err)
		return 1
	}
}
