package live

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
)

// report prints the Figure 12 table and writes the files.
func (r *synthResult) report(o *synthOptions, w io.Writer) error {
	fmt.Fprintf(w, "# synthetic benchmark (Kim and Lilja, Table 3 / Figure 12), %s mode, N = %d, %d run(s), %d slave(s)\n",
		r.Mode, r.N, r.Runs, r.Slaves)
	for nic, c := range r.Costs {
		fmt.Fprintf(w, "# %s rail: T = %.1f us, B = %.2f MB/s (probed; emulated: rate %.2f MB/s, delay %v)\n", synthRail(nic),
			1e6*c.Latency, c.Bandwidth/1e6, r.Shapes[nic].Rate/1e6, r.Shapes[nic].Delay)
	}
	fmt.Fprintf(w, "# mux: fast rail from %d B; muxagg: split from %d B; agg: parts of at least %d B\n\n", r.MuxAt, r.SplitAt, o.MinChunk)
	fig := &bench.Table{Name: "figure12", Columns: append([]string{"type"}, o.Configs...)}
	long := &bench.Table{Name: "synthetic", Columns: []string{"type", "b", "l1", "l2", "config", "median_s", "min_s", "max_s",
		"normalized", "predicted_s", "predicted_normalized"}}
	fmt.Fprintf(w, "time normalised to the slow rail alone (median of %d runs; model prediction in brackets)\n\n", r.Runs)
	fmt.Fprintf(w, "| type |")
	for _, c := range o.Configs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, " best |\n|---|")
	for range o.Configs {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|\n")
	var series []bench.Series
	for _, c := range o.Configs {
		series = append(series, bench.Series{Name: c})
	}
	for ti, t := range o.Types {
		secs := r.Seconds[t.Name]
		base := collective.Median(secs["slow"])
		pbase := r.Predicted[t.Name]["slow"]
		if _, ok := secs["slow"]; !ok { // no slow rail run: normalise to the first option
			base, pbase = collective.Median(secs[o.Configs[0]]), r.Predicted[t.Name][o.Configs[0]]
		}
		row := []any{t.Name}
		fmt.Fprintf(w, "| %s |", t.Name)
		best, bestV := "", math.Inf(1)
		for ci, c := range o.Configs {
			med := collective.Median(secs[c])
			norm := med / base
			pred := r.Predicted[t.Name][c]
			row = append(row, norm)
			fmt.Fprintf(w, " %.3f (%.3f) |", norm, pred/pbase)
			long.Add(t.Name, t.Small, t.L1, t.L2, c, med, slices.Min(secs[c]), slices.Max(secs[c]), norm, pred, pred/pbase)
			series[ci].X = append(series[ci].X, float64(ti+1))
			series[ci].Y = append(series[ci].Y, norm)
			if norm < bestV {
				best, bestV = c, norm
			}
		}
		fig.Add(row...)
		fmt.Fprintf(w, " %s |\n", best)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "seconds (median of runs):")
	for _, t := range o.Types {
		fmt.Fprintf(w, "  %s:", t.Name)
		for _, c := range o.Configs {
			fmt.Fprintf(w, " %s %.3f", c, collective.Median(r.Seconds[t.Name][c]))
		}
		fmt.Fprintln(w)
	}
	if len(r.RailBytes) > 0 {
		fmt.Fprintln(w, "bytes per rail (slow/fast), all runs:")
		names := make([]string, 0, len(r.RailBytes))
		for c := range r.RailBytes {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			b := r.RailBytes[c]
			fmt.Fprintf(w, "  %-6s %d / %d (%.1f%% on the slow rail)\n", c, b[0], b[1], 100*float64(b[0])/math.Max(1, float64(b[0]+b[1])))
		}
	}
	if o.Out == "" {
		return nil
	}
	if err := fig.Save(o.Out); err != nil {
		return err
	}
	if err := long.Save(o.Out); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Out, "synthetic-raw.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	lp := &bench.LinePlot{Title: fmt.Sprintf("Synthetic benchmark (%s, N = %d): time / slow rail alone", r.Mode, r.N),
		XLabel: "type (1 = A ... 6 = F)", YLabel: "normalised time", Series: series}
	if err := lp.SavePNG(filepath.Join(o.Out, "figure12.png")); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s/{figure12,synthetic}.{csv,json}, synthetic-raw.json and figure12.png\n", o.Out)
	return nil
}
