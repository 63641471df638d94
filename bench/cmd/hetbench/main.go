// Command hetbench plans collectives from JSON problems, reproduces the
// papers' simulation studies, and runs live benchmarks.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/bench/chaos"
	"github.com/hetcomm/hetcomm/bench/live"
	"github.com/hetcomm/hetcomm/bench/sim"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
)

var commands = []struct {
	name, help string
	run        func(args []string, stdout, stderr io.Writer) int
}{
	{"plan", "plan one collective from a problem JSON file", sim.PlanCommand},
	{"sim", "reproduce a paper's simulation study", sim.SimCommand},
	{"live", "run collectives on live ranks (and the system's MPI) and report timings", live.LiveCommand},
	{"probe", "measure every link of N ranks and print (or write) the cost model", live.ProbeCommand},
	{"synthetic", "the multi-network paper's synthetic benchmark over each rail, mux, agg and muxagg", live.SyntheticCommand},
	{"chaos", "kill, stop, spoof, flood and misuse jobs, trial after trial, and tabulate what happened", chaos.Command},
}

func init() {
	// The scale study's fabric-probe columns (bench/sim stays pure).
	sim.ProbeEstimator = func(m *collective.Model, cuts [][]int) (float64, int, error) {
		est, err := netprobe.SimulateProbe(m, cuts)
		return est.Seconds, est.Steps, err
	}
}

// hidden commands, started by other commands.
var hidden = map[string]func(args []string, stdout, stderr io.Writer) int{
	"live-rank":      live.LiveRankCommand,
	"probe-rank":     live.ProbeRankCommand,
	"synthetic-rank": live.SyntheticRankCommand,
	"chaos-rank":     chaos.RankCommand,
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: hetbench COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.help)
	}
	fmt.Fprintf(w, "\nRun 'hetbench COMMAND -h' for a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(bench.ExitUsage)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return
	}
	if run, ok := hidden[os.Args[1]]; ok {
		os.Exit(run(os.Args[2:], os.Stdout, os.Stderr))
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			os.Exit(c.run(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	fmt.Fprintf(os.Stderr, "hetbench: unknown command %q\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(bench.ExitUsage)
}
