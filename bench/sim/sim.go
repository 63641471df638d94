package sim

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/hetcomm/hetcomm/bench"
)

// SimConfig parameterises a simulation experiment (`hetbench sim`).
type SimConfig struct {
	// Seed makes the experiment reproducible.
	Seed int64
	// Trials is the number of random instances per data point (0 means the
	// experiment's default, the paper's where it gives one).
	Trials int
	// Quick shrinks the experiment (fewer sizes and trials) for tests.
	Quick bool
	// OutDir receives the CSV, JSON and PNG files.
	OutDir string
	// Progress receives progress lines (stderr in hetbench); may be nil.
	Progress io.Writer
}

// SimResult is what an experiment produced.
type SimResult struct {
	Tables []*bench.Table
	Plots  map[string]*bench.LinePlot // file name (without directory) -> plot
	// Summary is a short human-readable conclusion, printed at the end.
	Summary string
}

// Experiment is one `hetbench sim NAME` study.
type Experiment struct {
	Name        string
	Description string
	Run         func(cfg SimConfig) (*SimResult, error)
}

var experiments = map[string]Experiment{}

// Register adds an experiment; it panics on a duplicate name (a
// programming error caught at start-up).
func Register(e Experiment) {
	if _, dup := experiments[e.Name]; dup {
		panic("bench: duplicate experiment " + e.Name)
	}
	experiments[e.Name] = e
}

// Experiments returns the registered experiments sorted by name.
func Experiments() []Experiment {
	out := make([]Experiment, 0, len(experiments))
	for _, e := range experiments {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the named experiment.
func Lookup(name string) (Experiment, bool) {
	e, ok := experiments[name]
	return e, ok
}

// Save writes every table and plot of the result into dir.
func (r *SimResult) Save(dir string) error {
	for _, t := range r.Tables {
		if err := t.Save(dir); err != nil {
			return err
		}
	}
	for name, p := range r.Plots {
		if err := p.SavePNG(dir + "/" + name); err != nil {
			return fmt.Errorf("bench: plot %s: %w", name, err)
		}
	}
	return nil
}

// Progress reports "label: done/total (percent), elapsed, about how long
// is left" lines at most once a second, plus the last one.
type Progress struct {
	w     io.Writer
	label string
	total int
	done  int
	start time.Time
	last  time.Time
}

// NewProgress returns a progress reporter writing to w (nil: silent).
func NewProgress(w io.Writer, label string, total int) *Progress {
	now := time.Now()
	return &Progress{w: w, label: label, total: total, start: now, last: now}
}

// Step records n more units of work done.
func (p *Progress) Step(n int) {
	if p == nil || p.w == nil {
		return
	}
	p.done += n
	now := time.Now()
	if now.Sub(p.last) >= time.Second || p.done >= p.total {
		p.last = now
		el := now.Sub(p.start)
		line := fmt.Sprintf("%s: %d/%d (%.0f%%), %s elapsed", p.label, p.done, p.total, 100*float64(p.done)/float64(max(p.total, 1)), el.Round(time.Millisecond))
		if p.done > 0 && p.done < p.total {
			left := time.Duration(float64(el) * float64(p.total-p.done) / float64(p.done))
			line += fmt.Sprintf(", about %s left", left.Round(time.Second))
		}
		fmt.Fprintln(p.w, line)
	}
}
