package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Table is a result table: named columns and rows of values (numbers or
// strings). It writes itself as CSV, JSON (one object per row) and
// Markdown.
type Table struct {
	Name    string
	Columns []string
	Rows    [][]any
}

// Add appends a row; it must have one value per column.
func (t *Table) Add(vals ...any) {
	if len(vals) != len(t.Columns) {
		panic(fmt.Sprintf("bench: table %s: row has %d values, want %d", t.Name, len(vals), len(t.Columns)))
	}
	t.Rows = append(t.Rows, vals)
}

func cell(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', 6, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', 6, 32)
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// WriteCSV writes the table as CSV with a header row.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return err
	}
	rec := make([]string, len(t.Columns))
	for _, r := range t.Rows {
		for i, v := range r {
			rec[i] = cell(v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the table as a JSON array of objects keyed by column.
func (t *Table) WriteJSON(w io.Writer) error {
	out := make([]map[string]any, len(t.Rows))
	for i, r := range t.Rows {
		obj := make(map[string]any, len(r))
		for j, v := range r {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				v = nil
			}
			obj[t.Columns[j]] = v
		}
		out[i] = obj
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteMarkdown writes the table as a Markdown table.
func (t *Table) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Columns, " | ") + " |\n|")
	for range t.Columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		s := make([]string, len(r))
		for i, v := range r {
			if f, ok := v.(float64); ok {
				s[i] = strconv.FormatFloat(f, 'f', 3, 64)
			} else {
				s[i] = cell(v)
			}
		}
		b.WriteString("| " + strings.Join(s, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Save writes dir/NAME.csv and dir/NAME.json.
func (t *Table) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for ext, write := range map[string]func(io.Writer) error{".csv": t.WriteCSV, ".json": t.WriteJSON} {
		f, err := os.Create(filepath.Join(dir, t.Name+ext))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Series is one named line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// LinePlot is a line chart with one line per series.
type LinePlot struct {
	Title, XLabel, YLabel string
	Series                []Series
	// LogY draws the Y axis on a log scale.
	LogY bool
}

// SavePNG draws the plot into file (a .png path).
func (lp *LinePlot) SavePNG(file string) error {
	p := plot.New()
	p.Title.Text = lp.Title
	p.X.Label.Text = lp.XLabel
	p.Y.Label.Text = lp.YLabel
	if lp.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	var args []any
	for _, s := range lp.Series {
		pts := make(plotter.XYs, len(s.X))
		for i := range s.X {
			pts[i].X, pts[i].Y = s.X[i], s.Y[i]
		}
		args = append(args, s.Name, pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}

// Stats summarises a sample.
type Stats struct {
	N                           int
	Mean, Min, Max, Median, P99 float64
}

// Summarize computes the statistics of xs (which it sorts a copy of).
func Summarize(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Stats{N: len(s), Mean: sum / float64(len(s)), Min: s[0], Max: s[len(s)-1],
		Median: quantile(s, 0.5), P99: quantile(s, 0.99)}
}

// quantile returns the q-quantile of sorted s by linear interpolation.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}
