package chaos

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hetcomm/hetcomm/bench"
)

// suite is one run of the chaos command.
type suite struct {
	exe       string
	trials    int
	limit     time.Duration // detection limit
	startLim  time.Duration // flood: the largest start delay
	hang      time.Duration // deadline after the fault (kill, stop, loss)
	sendMiB   int
	datagrams int
	conns     int
	lossPct   int
	lossIters int
	netns     map[string]string
}

// shortHang is the deadline of the scenarios whose ranks should answer
// at once (spoof, concurrent, mismatch).
func (s *suite) shortHang() time.Duration { return min(s.hang, 20*time.Second) }

// Row is one line of the table: a scenario on a transport.
type Row struct {
	Scenario  string `json:"scenario"`
	Transport string `json:"transport"`
	Trials    int    `json:"trials"`
	Expected  int    `json:"expected"`
	Late      int    `json:"late"`
	Hangs     int    `json:"hangs"`
	Wrong     int    `json:"wrong_data"`
	Blame     int    `json:"wrong_blame"`
	NoStart   int    `json:"no_start"`
	Other     int    `json:"other"`
	// NilFirst counts the trials in which a rank's mismatched call
	// returned nil and its next collective failed with the mismatch.
	NilFirst int             `json:"nil_first,omitempty"`
	Skipped  string          `json:"skipped,omitempty"`
	TimeName string          `json:"time_name,omitempty"`
	Times    []time.Duration `json:"times_ns,omitempty"`
	Notes    []string        `json:"notes,omitempty"`
}

func (r *Row) add(o outcome, trial int) {
	if o.skipped != "" {
		r.Skipped = o.skipped
		return
	}
	r.Trials++
	count := func(b bool, n *int) {
		if b {
			*n++
		}
	}
	count(o.expected, &r.Expected)
	count(o.late, &r.Late)
	count(o.hang, &r.Hangs)
	count(o.wrong, &r.Wrong)
	count(o.blame, &r.Blame)
	count(o.nostart, &r.NoStart)
	count(o.other, &r.Other)
	count(o.nilFirst > 0, &r.NilFirst)
	if o.hasTime {
		r.Times = append(r.Times, o.time)
	}
	if !o.expected || len(o.notes) > 0 && (o.late || o.hang || o.wrong || o.blame || o.other || o.nostart) {
		for _, n := range o.notes {
			r.Notes = append(r.Notes, fmt.Sprintf("trial %d: %s", trial, n))
		}
	}
}

func (r *Row) median() time.Duration {
	if len(r.Times) == 0 {
		return -1
	}
	t := slices.Clone(r.Times)
	slices.Sort(t)
	if len(t)%2 == 1 {
		return t[len(t)/2]
	}
	return (t[len(t)/2-1] + t[len(t)/2]) / 2
}

func (r *Row) max() time.Duration {
	if len(r.Times) == 0 {
		return -1
	}
	return slices.Max(r.Times)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// Command is "hetbench chaos": it runs every scenario as a bounded loop of
// trials and prints a table.
func Command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	trials := fs.Int("trials", 20, "trials per scenario and transport")
	short := fs.Bool("short", false, "one trial of every scenario, each on one transport, with a 64 MiB Send (for CI)")
	only := fs.String("scenarios", "", "comma-separated scenarios, or prefixes such as kill or mismatch (default: all)")
	trs := fs.String("transports", strings.Join(allTransports, ","), "comma-separated transports")
	limit := fs.Duration("limit", 6*time.Second, "detection limit: a survivor that fails later counts as late")
	startLimit := fs.Duration("start-limit", 2*time.Second, "flood: the largest delay of the start that counts as expected")
	hang := fs.Duration("hang", time.Minute, "a rank still running this long after the fault is a hang (and is killed)")
	parallel := fs.Int("parallel", 1, "trials run at once (scenarios that load the machine, flood and loss, always run alone)")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock); printed with the table")
	sendMiB := fs.Int("send-mib", 256, "size of the Send of the send scenarios, MiB")
	conns := fs.Int("conns", 1000, "flood: idle connections on each port")
	datagrams := fs.Int("datagrams", 10000, "spoof: random and spoofed datagrams")
	lossPct := fs.Int("loss", 20, "loss: percentage of packets dropped")
	jsonOut := fs.String("json", "", "also write the rows as JSON to this file")
	verbose := fs.Bool("v", false, "print every trial on stderr")
	if code, ok := bench.ParseFlags(fs, "chaos", args, false, stderr); !ok {
		return code
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "hetbench chaos:", err)
		return bench.ExitError
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	s := &suite{exe: exe, trials: *trials, limit: *limit, startLim: *startLimit, hang: *hang, sendMiB: *sendMiB, datagrams: *datagrams,
		conns: *conns, lossPct: *lossPct, lossIters: 10, netns: map[string]string{}}
	if *short {
		s.trials = 1
		if !flagSet(fs, "send-mib") {
			s.sendMiB = 64
		}
		s.lossIters = 3
	}
	wantTr := strings.Split(*trs, ",")
	var prefixes []string
	if *only != "" {
		prefixes = strings.Split(*only, ",")
	}
	type task struct {
		sc  scenario
		tr  string
		row *Row
	}
	var rows []*Row
	var tasks []task
	for _, sc := range scenarios() {
		if prefixes != nil && !slices.ContainsFunc(prefixes, func(p string) bool {
			return sc.name == p || strings.HasPrefix(sc.name, p+"/") || strings.HasPrefix(sc.name, p)
		}) {
			continue
		}
		for _, tr := range sc.transports {
			if !slices.Contains(wantTr, tr) || *short && shortTransport[sc.name] != tr {
				continue
			}
			row := &Row{Scenario: sc.name, Transport: tr, TimeName: sc.timeName}
			rows = append(rows, row)
			tasks = append(tasks, task{sc, tr, row})
		}
	}
	if len(tasks) == 0 {
		fmt.Fprintln(stderr, "hetbench chaos: no scenario selected")
		return bench.ExitUsage
	}
	load := loadavg()
	start := time.Now()
	var mu sync.Mutex
	runTrial := func(t task, i int) {
		r := rand.New(rand.NewPCG(*seed, uint64(i)<<32^hash(t.sc.name+"/"+t.tr)))
		began := time.Now()
		o := t.sc.run(s, t.tr, r)
		mu.Lock()
		defer mu.Unlock()
		t.row.add(o, i)
		if *verbose || !o.expected && o.skipped == "" {
			verdict := "ok"
			for _, v := range []struct {
				b    bool
				name string
			}{{o.late, "late"}, {o.hang, "HANG"}, {o.wrong, "WRONG DATA"}, {o.blame, "wrong blame"}, {o.nostart, "no start"}, {o.other, "other"}} {
				if v.b {
					verdict = v.name
				}
			}
			tm := "-"
			if o.hasTime {
				tm = fmtDur(o.time)
			}
			fmt.Fprintf(stderr, "chaos: %s %s trial %d: %s, %s %s (%.1f s)\n", t.sc.name, t.tr, i, verdict, t.sc.timeName, tm, time.Since(began).Seconds())
			if !o.expected {
				for _, n := range o.notes {
					fmt.Fprintf(stderr, "    %s\n", n)
				}
			}
		}
	}
	// Scenarios that load the machine or measure time run alone, one
	// trial at a time; the others share a pool of -parallel workers.
	var pooled []task
	for _, t := range tasks {
		if t.sc.exclusive || t.sc.setup != nil {
			continue
		}
		pooled = append(pooled, t)
	}
	work := make(chan func())
	var wg sync.WaitGroup
	for range max(1, *parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f()
			}
		}()
	}
	for _, t := range pooled {
		for i := range s.trials {
			work <- func() { runTrial(t, i) }
		}
	}
	close(work)
	wg.Wait()
	for _, t := range tasks {
		if !t.sc.exclusive && t.sc.setup == nil {
			continue
		}
		if t.sc.setup != nil {
			teardown, skip := t.sc.setup(s, t.tr)
			if skip != "" {
				t.row.Skipped = skip
				fmt.Fprintf(stderr, "chaos: %s %s: skipped: %s\n", t.sc.name, t.tr, skip)
				continue
			}
			for i := range s.trials {
				runTrial(t, i)
			}
			teardown()
			continue
		}
		for i := range s.trials {
			runTrial(t, i)
		}
	}
	took := time.Since(start)
	printTable(stdout, rows, s, *seed, load, loadavg(), took, *parallel)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(stderr, "hetbench chaos:", err)
			return bench.ExitError
		}
	}
	for _, r := range rows {
		if r.Hangs > 0 || r.Wrong > 0 || r.Blame > 0 || r.NoStart > 0 || r.Other > 0 || r.Late > 0 {
			return bench.ExitError
		}
	}
	return bench.ExitOK
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printTable prints the rows (Markdown), what the time column means, and
// the notes of the trials that went otherwise than expected.
func printTable(w io.Writer, rows []*Row, s *suite, seed uint64, load0, load1 string, took time.Duration, parallel int) {
	fmt.Fprintf(w, "chaos suite: %s, %d trial(s) per row, detection limit %v, hang deadline %v, seed %d, %d at once\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), s.trials, s.limit, s.hang, seed, max(1, parallel))
	fmt.Fprintf(w, "load average before: %s, after: %s; took %v\n\n", load0, load1, took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| scenario\t transport\t trials\t as expected\t late\t hangs\t wrong data\t wrong blame\t other\t no start\t time\t median\t max\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---\t---:\t---:\t")
	for _, r := range rows {
		if r.Skipped != "" && r.Trials == 0 {
			fmt.Fprintf(tw, "| %s\t %s\t skipped: %s\t\t\t\t\t\t\t\t\t\t\t\n", r.Scenario, r.Transport, r.Skipped)
			continue
		}
		tn := r.TimeName
		if tn == "" {
			tn = "-"
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %d\t %d\t %d\t %d\t %d\t %d\t %d\t %s\t %s\t %s\t\n", r.Scenario, r.Transport, r.Trials, r.Expected, r.Late,
			r.Hangs, r.Wrong, r.Blame, r.Other, r.NoStart, tn, fmtDur(r.median()), fmtDur(r.max()))
	}
	tw.Flush()
	for _, r := range rows {
		if r.NilFirst > 0 {
			fmt.Fprintf(w, "\n%s on %s: in %d of %d trials a rank's mismatched call returned nil (its part needed nothing back) and its next collective failed with the mismatch, as comm.ErrMismatch documents; counted as expected.\n", r.Scenario, r.Transport, r.NilFirst, r.Trials)
		}
	}
	var notes []string
	for _, r := range rows {
		for i, n := range r.Notes {
			if i == 12 {
				notes = append(notes, fmt.Sprintf("- %s %s: ... %d notes in all", r.Scenario, r.Transport, len(r.Notes)))
				break
			}
			notes = append(notes, fmt.Sprintf("- %s %s %s", r.Scenario, r.Transport, n))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nTrials that went otherwise than expected:\n%s\n", strings.Join(notes, "\n"))
	}
}
