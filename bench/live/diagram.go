package live

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/hetcomm/hetcomm/collective"
)

// timingBoxes draws a total-exchange plan as the total-exchange paper's
// timing diagrams do: one column per sending rank, time downwards, each
// message a box from its start to its end labelled with its destination.
type timingBoxes struct {
	plan *collective.Plan
}

func (tb timingBoxes) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	fontSize := vg.Points(7)
	font := plot.DefaultFont
	font.Size = fontSize
	sty := draw.TextStyle{Color: color.Black, Font: font, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YCenter}
	for _, t := range tb.plan.Transfers {
		x0, x1 := trX(float64(t.Src)-0.4), trX(float64(t.Src)+0.4)
		y0, y1 := trY(-t.Start), trY(-t.End)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(boxColor(t.Dst), c.ClipPolygonXY(pts))
		c.StrokeLines(draw.LineStyle{Color: color.Black, Width: vg.Points(0.3)}, c.ClipLinesXY(append(pts, pts[0]))...)
		if vg.Length(math.Abs(float64(y0-y1))) > fontSize {
			c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, strconv.Itoa(t.Dst))
		}
	}
}

func (tb timingBoxes) DataRange() (xmin, xmax, ymin, ymax float64) {
	end := tb.plan.Predicted
	for _, t := range tb.plan.Transfers {
		end = math.Max(end, t.End)
	}
	return -0.6, float64(tb.plan.Ranks) - 0.4, -end * 1.02, 0
}

func boxColor(dst int) color.Color {
	palette := []color.RGBA{{141, 211, 199, 255}, {255, 255, 179, 255}, {190, 186, 218, 255}, {251, 128, 114, 255},
		{128, 177, 211, 255}, {253, 180, 98, 255}, {179, 222, 105, 255}, {252, 205, 229, 255}, {217, 217, 217, 255}, {188, 128, 189, 255}}
	return palette[dst%len(palette)]
}

// negTicks labels a downward time axis (negative values) with positive
// seconds.
type negTicks struct{}

func (negTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(math.Abs(ts[i].Value), 'g', 4, 64)
		}
	}
	return ts
}

func diagramPlot(p *collective.Plan, title string) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = "sending rank (boxes: receiving rank)"
	pl.Y.Label.Text = "time (s)"
	pl.Y.Tick.Marker = negTicks{}
	var ticks []plot.Tick
	for r := 0; r < p.Ranks; r++ {
		ticks = append(ticks, plot.Tick{Value: float64(r), Label: strconv.Itoa(r)})
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	pl.Add(timingBoxes{p})
	if p.LowerBound > 0 {
		lb, _ := plotter.NewLine(plotter.XYs{{X: -0.6, Y: -p.LowerBound}, {X: float64(p.Ranks) - 0.4, Y: -p.LowerBound}})
		lb.Color = color.RGBA{200, 0, 0, 255}
		lb.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		pl.Add(lb)
		pl.Legend.Add("lower bound", lb)
		pl.Legend.Top = false
	}
	return pl
}

// TimingDiagram draws the predicted and the measured timelines of a total
// exchange side by side into a PNG file, on the same time scale.
func TimingDiagram(predicted, measured *collective.Plan, file string) error {
	var plans []*collective.Plan
	var titles []string
	if predicted != nil {
		plans, titles = append(plans, predicted), append(titles, fmt.Sprintf("predicted (%s): %.3g s", predicted.Algorithm, predicted.Predicted))
	}
	if measured != nil {
		plans, titles = append(plans, measured), append(titles, fmt.Sprintf("measured: %.3g s", measured.Predicted))
	}
	if len(plans) == 0 {
		return fmt.Errorf("bench: no timeline to draw")
	}
	end := 0.0
	for _, p := range plans {
		_, _, ymin, _ := timingBoxes{p}.DataRange()
		end = math.Min(end, ymin)
	}
	row := make([]*plot.Plot, len(plans))
	for i, p := range plans {
		row[i] = diagramPlot(p, titles[i])
		row[i].Y.Min = end
		row[i].Y.Max = 0
	}
	img := vgimg.New(vg.Length(len(plans))*6*vg.Inch, 7*vg.Inch)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: len(plans), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{row}, t, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
