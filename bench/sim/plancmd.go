package sim

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
)

// PlanCommand implements `hetbench plan`. It returns the exit status.
func PlanCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "-", "problem JSON file (- for standard input)")
	algo := fs.String("algo", "auto", "planner: a name, auto, or all (a comparison table)")
	out := fs.String("out", "", "write the plan JSON here (- for standard output)")
	seed := fs.Int64("seed", 1, "seed for the randomised planners (rrs, rrsp)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: hetbench plan -in problem.json -algo NAME [-out plan.json]

Plans one collective from a problem file (format: docs/plan-format.md) and
prints the predicted completion time and the lower bound.

Algorithms:
  alltoall:     caterpillar maxmatch minmatch greedy openshop
  multicast:    fef ecf wr eaf rr rrs ecfp wrp eafp rrp rrsp
  redistribute: bruteforce ggp oggp
  any kind:     auto (lowest predicted completion), all (compare every planner)

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := bench.ParseFlags(fs, "plan", args, false, stderr); !ok {
		return code
	}
	var r io.Reader = os.Stdin
	if *in == "-" {
		// Waiting for a problem typed on a terminal helps nobody.
		if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(stderr, "hetbench plan: no -in, and standard input is a terminal or a device, not a problem file: give -in problem.json or pipe one in")
			return bench.ExitUsage
		}
	} else {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintf(stderr, "hetbench plan: %v\n", err)
			return bench.ExitUsage
		}
		defer f.Close()
		r = f
	}
	pr, err := collective.DecodeProblem(r)
	if err != nil {
		fmt.Fprintf(stderr, "hetbench plan: %s: %v\n", *in, err)
		return bench.ExitUsage
	}
	opt := collective.Options{Seed: *seed}
	if *algo == "all" {
		t, best, err := CompareAll(pr, opt)
		if err != nil {
			fmt.Fprintf(stderr, "hetbench plan: %v\n", err)
			return bench.ExitError
		}
		fmt.Fprintf(stdout, "# %s, %d ranks: every planner (predicted completion, lower bound, ratio, planning time)\n", pr.Kind, planRanks(pr))
		if err := t.WriteMarkdown(stdout); err != nil {
			return bench.ExitError
		}
		return writePlan(*out, best, stdout, stderr)
	}
	a := collective.Algorithm(*algo)
	if k := collective.KindOf(a); a != collective.Auto && k != pr.Kind {
		if k == "" {
			fmt.Fprintf(stderr, "hetbench plan: unknown algorithm %q for %s (want one of %v, auto or all)\n", a, pr.Kind, collective.Algorithms(pr.Kind))
		} else {
			fmt.Fprintf(stderr, "hetbench plan: algorithm %q plans %s problems, this one is %s\n", a, k, pr.Kind)
		}
		return bench.ExitUsage
	}
	plan, err := collective.Solve(pr, a, opt)
	if err != nil {
		fmt.Fprintf(stderr, "hetbench plan: %v\n", err)
		return bench.ExitError
	}
	if err := collective.ValidatePlan(pr, plan); err != nil {
		fmt.Fprintf(stderr, "hetbench plan: internal error: %s produced an invalid plan: %v\n", plan.Algorithm, err)
		return bench.ExitError
	}
	fmt.Fprintf(stdout, "algorithm %s: predicted completion %.6g s, lower bound %.6g s, ratio %.4f\n",
		plan.Algorithm, plan.Predicted, plan.LowerBound, ratio(plan.Predicted, plan.LowerBound))
	return writePlan(*out, plan, stdout, stderr)
}

func planRanks(pr *collective.Problem) int {
	if pr.Kind == collective.KindRedistribute {
		return pr.Senders + pr.Receivers
	}
	return pr.Ranks
}

func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return 0
	}
	return a / b
}

// CompareAll plans pr with every planner of its kind and returns the
// comparison table and the best plan.
func CompareAll(pr *collective.Problem, opt collective.Options) (*bench.Table, *collective.Plan, error) {
	t := &bench.Table{Name: "plan", Columns: []string{"algorithm", "predicted_s", "lower_bound_s", "ratio", "plan_ms"}}
	var best *collective.Plan
	for _, a := range collective.Algorithms(pr.Kind) {
		start := time.Now()
		p, err := collective.Solve(pr, a, opt)
		el := time.Since(start)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a, err)
		}
		if err := collective.ValidatePlan(pr, p); err != nil {
			return nil, nil, fmt.Errorf("internal error: %s produced an invalid plan: %w", a, err)
		}
		t.Add(string(a), p.Predicted, p.LowerBound, ratio(p.Predicted, p.LowerBound), float64(el.Microseconds())/1000)
		if best == nil || p.Predicted < best.Predicted {
			best = p
		}
	}
	return t, best, nil
}

func writePlan(path string, p *collective.Plan, stdout, stderr io.Writer) int {
	if path == "" {
		return bench.ExitOK
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "hetbench plan: %v\n", err)
		return bench.ExitError
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
	} else {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hetbench plan: %v\n", err)
		return bench.ExitError
	}
	return bench.ExitOK
}
