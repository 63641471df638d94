package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hetcomm/hetcomm/bench"
)

// SimCommand implements `hetbench sim EXPERIMENT`. It returns the exit
// status.
func SimCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Int64("seed", 1, "random seed (results are reproducible for a seed)")
	trials := fs.Int("trials", 0, "random instances per data point (0: the experiment's default)")
	out := fs.String("out", "bench/results", "directory for the CSV, JSON and PNG files (a subdirectory per experiment; with -quick and no -out, bench/results/quick)")
	quick := fs.Bool("quick", false, "a small, fast version of the experiment")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hetbench sim [flags] EXPERIMENT\n\nReproduces a paper's simulation study. Experiments:\n")
		for _, e := range Experiments() {
			fmt.Fprintf(stderr, "  %-14s %s\n", e.Name, e.Description)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	// Accept flags before or after the experiment name.
	var name string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return bench.ExitOK
			}
			return bench.ExitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fmt.Fprintf(stderr, "hetbench sim: more than one experiment (%q and %q)\n", name, fs.Arg(0))
			return bench.ExitUsage
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if name == "" {
		fs.Usage()
		return bench.ExitUsage
	}
	e, ok := Lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "hetbench sim: unknown experiment %q\n", name)
		fs.Usage()
		return bench.ExitUsage
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if *quick && !outSet {
		// A quick run must not overwrite a full run's results.
		*out = filepath.Join(*out, "quick")
	}
	dir := filepath.Join(*out, e.Name)
	start := time.Now()
	res, err := e.Run(SimConfig{Seed: *seed, Trials: *trials, Quick: *quick, OutDir: dir, Progress: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "hetbench sim %s: %v\n", e.Name, err)
		return bench.ExitError
	}
	if err := res.Save(dir); err != nil {
		fmt.Fprintf(stderr, "hetbench sim %s: %v\n", e.Name, err)
		return bench.ExitError
	}
	for _, t := range res.Tables {
		fmt.Fprintf(stdout, "## %s\n", t.Name)
		if err := t.WriteMarkdown(stdout); err != nil {
			return bench.ExitError
		}
		fmt.Fprintln(stdout)
	}
	if res.Summary != "" {
		fmt.Fprintln(stdout, res.Summary)
	}
	fmt.Fprintf(stderr, "hetbench sim %s: wrote %s (%s)\n", e.Name, dir, time.Since(start).Round(time.Millisecond))
	return bench.ExitOK
}
