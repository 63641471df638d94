// Command netlab builds and runs the network-namespace testbed of
// internal/netlab (as root).
//
//	netlab up [--name NAME] [--recreate] [--dry-run] [-v] TOPOLOGY.json
//	netlab down [-v] (TOPOLOGY.json | NAME | --all)
//	netlab status [NAME]
//	netlab exec [--lab NAME] HOST COMMAND [ARG...]
//	netlab agent [--lab NAME] HOST COMMAND...
//
// See docs/netlab.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"reflect"
	"strings"
	"syscall"

	"github.com/hetcomm/hetcomm/internal/netlab"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: netlab COMMAND [flags] [args]

Builds network-namespace labs of shaped hosts (as root). Commands:
  up TOPOLOGY.json          build a lab (one namespace per host, shaped veth NICs)
  down TOPOLOGY.json|NAME   remove a lab, also after a crash (--all: every lab)
  status [NAME]             list labs, their hosts, addresses and agents
  exec HOST COMMAND...      run a command inside a host's namespace
  agent HOST COMMAND...     ssh-like agent: run one shell command line on HOST

"netlab COMMAND --help" describes each. The topology format is in
docs/netlab.md; bench/topologies holds examples.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "up":
		return cmdUp(ctx, rest, stdout, stderr)
	case "down":
		return cmdDown(ctx, rest, stdout, stderr)
	case "status":
		return cmdStatus(rest, stdout, stderr)
	case "exec":
		return cmdExec(rest, stderr, false)
	case "agent":
		return cmdExec(rest, stderr, true)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "netlab: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

func newFlags(name, synopsis, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("netlab "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: netlab %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(help))
		has := false
		fs.VisitAll(func(*flag.Flag) { has = true })
		if has {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags; done reports that the caller should return code.
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	return 0, false
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, err)
	return 1
}

func cmdUp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("up", "[flags] TOPOLOGY.json", `
Builds the lab: a switch namespace with the bridges and backbones, and one
namespace per host with its shaped NICs. If the lab is already up with the
same topology, says so and exits 0; if it is up with another topology,
fails unless --recreate. On any error, removes what it created.
Prints the hosts, their addresses and the agent script for hetrun --rsh.`, stderr)
	name := fs.String("name", "", "lab name (default: the topology's name); lets one topology run twice")
	recreate := fs.Bool("recreate", false, "take an existing lab of that name down first")
	dry := fs.Bool("dry-run", false, "print the commands instead of running them (no root needed)")
	verbose := fs.Bool("v", false, "print every command as it runs")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	t, err := netlab.Load(fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	cfg := netlab.Config{Name: *name, Recreate: *recreate}
	if *verbose {
		cfg.Log = stderr
	}
	labName := t.Name
	if *name != "" {
		labName = *name
	}
	if *dry {
		cmds, err := t.UpCommands(netlab.Prefix(labName))
		if err != nil {
			return fail(stderr, err)
		}
		for _, c := range cmds {
			fmt.Fprintln(stdout, c)
		}
		return 0
	}
	if !*recreate {
		if old, err := netlab.Open(labName, netlab.Config{}); err == nil {
			want := *t
			want.Name = labName
			if reflect.DeepEqual(normalise(old.Topology), normalise(&want)) && complete(old) {
				fmt.Fprintf(stdout, "lab %s is already up\n", labName)
				printLab(stdout, old)
				return 0
			}
		}
	}
	l, err := netlab.Up(ctx, t, cfg)
	if err != nil {
		if errors.Is(err, netlab.ErrExists) {
			fmt.Fprintf(stderr, "%v\n(use --recreate to rebuild it, or netlab down %s)\n", err, labName)
			return 1
		}
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "lab %s is up\n", l.Name)
	printLab(stdout, l)
	return 0
}

// normalise makes two decoded topologies comparable (nil and empty maps).
func normalise(t *netlab.Topology) *netlab.Topology {
	c := *t
	c.Hosts = append([]netlab.Host(nil), t.Hosts...)
	for i := range c.Hosts {
		if len(c.Hosts[i].Labels) == 0 {
			c.Hosts[i].Labels = nil
		}
	}
	return &c
}

// complete reports whether every namespace of the lab exists.
func complete(l *netlab.Lab) bool {
	labs, err := netlab.List(netlab.Config{})
	if err != nil {
		return false
	}
	for _, li := range labs {
		if li.Prefix == l.Prefix {
			return len(li.Namespaces) == len(l.Topology.Hosts)+1
		}
	}
	return false
}

func printLab(w io.Writer, l *netlab.Lab) {
	fmt.Fprintf(w, "  switch namespace: %s\n", l.SwitchNamespace())
	for _, h := range l.Topology.Hosts {
		ns, _ := l.Namespace(h.Name)
		var addrs []string
		for n := range h.NICs {
			a, _ := l.Addr(h.Name, n)
			addrs = append(addrs, fmt.Sprintf("eth%d %s (%s, out %g in %g Mbit/s)", n, a, h.NICs[n].Bridge, h.NICs[n].RateOut, h.NICs[n].RateIn))
		}
		fmt.Fprintf(w, "  %-10s %-24s %s\n", h.Name, ns, strings.Join(addrs, "; "))
	}
	if s := l.Topology.RateScale; s != 0 && s != 1 {
		fmt.Fprintf(w, "  (rates above are before rate_scale %g)\n", s)
	}
	fmt.Fprintf(w, "  agent: %s\n", l.AgentPath())
	fmt.Fprintf(w, "  hetrun: go run ./cmd/hetrun -n %d --hosts %s --rsh %s PROGRAM\n",
		len(l.Topology.Hosts), strings.Join(l.Addrs(), ","), l.AgentPath())
}

func cmdDown(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("down", "[flags] (TOPOLOGY.json | NAME | --all)", `
Removes a lab: kills the processes still running in its namespaces,
deletes the namespaces (with their veths, bridges, qdiscs and nftables
tables) and its state. Works after a crash and when the lab is already
gone. --all removes every netlab lab (namespaces named nl-*).`, stderr)
	all := fs.Bool("all", false, "remove every netlab lab on this machine")
	verbose := fs.Bool("v", false, "print every command as it runs")
	if code, done := parse(fs, args); done {
		return code
	}
	cfg := netlab.Config{}
	if *verbose {
		cfg.Log = stderr
	}
	if *all {
		if fs.NArg() != 0 {
			fs.Usage()
			return 2
		}
		if err := netlab.DownAll(ctx, cfg); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintln(stdout, "every netlab lab is down")
		return 0
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	name := fs.Arg(0)
	if strings.HasSuffix(name, ".json") || strings.Contains(name, "/") {
		t, err := netlab.Load(name)
		if err != nil {
			return fail(stderr, err)
		}
		name = t.Name
	}
	if err := netlab.Down(ctx, name, cfg); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "lab %s is down\n", name)
	return 0
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", "[NAME]", `
Lists the netlab labs on this machine (or one lab): namespaces, processes
running in them, hosts with addresses, and the agent for hetrun --rsh.`, stderr)
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	labs, err := netlab.List(netlab.Config{})
	if err != nil {
		return fail(stderr, err)
	}
	found := false
	for _, li := range labs {
		if fs.NArg() == 1 && li.Name() != fs.Arg(0) {
			continue
		}
		found = true
		state := ""
		if !li.State {
			state = " (no state: a leftover; netlab down " + li.Name() + " removes it)"
		}
		fmt.Fprintf(stdout, "lab %s: %d namespaces, %d processes%s\n", li.Name(), len(li.Namespaces), len(li.Pids), state)
		if l, err := netlab.Open(li.Name(), netlab.Config{}); err == nil {
			printLab(stdout, l)
		}
	}
	if !found {
		if fs.NArg() == 1 {
			fmt.Fprintf(stdout, "no lab %s\n", fs.Arg(0))
			return 1
		}
		fmt.Fprintln(stdout, "no netlab labs")
	}
	return 0
}

// findLab returns the lab holding host: the one named, or the only one
// that has it.
func findLab(name, host string) (*netlab.Lab, error) {
	if name != "" {
		return netlab.Open(name, netlab.Config{})
	}
	labs, err := netlab.List(netlab.Config{})
	if err != nil {
		return nil, err
	}
	var hits []*netlab.Lab
	var names []string
	for _, li := range labs {
		l, err := netlab.Open(li.Name(), netlab.Config{})
		if err != nil {
			continue
		}
		if _, err := l.Namespace(host); err == nil {
			hits = append(hits, l)
			names = append(names, l.Name)
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("netlab: no lab has a host or address %q", host)
	case 1:
		return hits[0], nil
	default:
		return nil, fmt.Errorf("netlab: host %q is in several labs (%s): choose one with --lab", host, strings.Join(names, ", "))
	}
}

func cmdExec(args []string, stderr io.Writer, agent bool) int {
	var fs *flag.FlagSet
	if agent {
		fs = newFlags("agent", "[--lab NAME] HOST COMMAND...", `
An ssh-like agent: joins COMMAND's words with spaces and runs the result
with sh -c inside HOST's namespace (HOST: a host name or address,
optionally user@HOST), with HOST's name as hostname. hetrun calls its
--rsh agent with one program path, so for hetrun use the generated script
that netlab up prints (it does the same without this binary).`, stderr)
	} else {
		fs = newFlags("exec", "[--lab NAME] HOST COMMAND [ARG...]", `
Runs COMMAND with its arguments (not through a shell) inside HOST's
namespace (HOST: a host name or address), with HOST's name as hostname,
and exits with its status.`, stderr)
	}
	labName := fs.String("lab", "", "the lab (default: the only lab with that host)")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() < 2 {
		fs.Usage()
		return 2
	}
	host := fs.Arg(0)
	l, err := findLab(*labName, host)
	if err != nil {
		return fail(stderr, err)
	}
	argv := fs.Args()[1:]
	if agent {
		argv = []string{"sh", "-c", strings.Join(argv, " ")}
	}
	full, err := l.ExecArgs(host, argv...)
	if err != nil {
		return fail(stderr, err)
	}
	path, err := exec.LookPath(full[0])
	if err != nil {
		return fail(stderr, fmt.Errorf("netlab: %w", err))
	}
	env, err := l.Env(host, os.Getenv)
	if err != nil {
		return fail(stderr, err)
	}
	err = syscall.Exec(path, full, append(os.Environ(), env...))
	return fail(stderr, fmt.Errorf("netlab: exec %s: %w", path, err))
}
