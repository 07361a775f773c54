package backtest

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot writes accuracy.svg and accuracy.png into dir: windowed accuracy (top)
// and cumulative mistakes (bottom) over time, one line per learner, the mean
// over repeats with a shaded 95% band when there is more than one.
func Plot(dir string, res Result) error {
	win := res.Summary.Window
	if win <= 0 {
		win = Options{}.WindowSize()
	}
	top, err := panel(res, fmt.Sprintf("accuracy over the last %d labeled events", win), win, func(p Point) float64 { return p.WindowAccuracy })
	if err != nil {
		return err
	}
	bottom, err := panel(res, "cumulative mistakes", 0, func(p Point) float64 { return float64(p.CumMistakes) })
	if err != nil {
		return err
	}
	top.Title.Text = fmt.Sprintf("%s — %d events, %d repeat(s)", res.Summary.Data, res.Summary.Events, res.Summary.Repeats)
	for _, ext := range []string{"svg", "png"} {
		const w, h = 10 * vg.Inch, 8 * vg.Inch
		c, err := draw.NewFormattedCanvas(w, h, ext)
		if err != nil {
			return err
		}
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
		canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, draw.New(c))
		top.Draw(canvases[0][0])
		bottom.Draw(canvases[1][0])
		if err := save(filepath.Join(dir, "accuracy."+ext), c); err != nil {
			return err
		}
	}
	return nil
}

// timed reports whether every point of every curve has an event time: then
// the curves are drawn over event time rather than event count.
func timed(res Result) bool {
	any := false
	for _, runs := range res.Runs {
		for _, r := range runs {
			for _, pt := range r.Curve {
				if pt.Time.IsZero() {
					return false
				}
				any = true
			}
		}
	}
	return any
}

// okabeIto is the Okabe–Ito palette, told apart with every common colour
// vision deficiency; learners past the eighth get dashed lines.
var okabeIto = []color.Color{
	color.RGBA{0, 0, 0, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{204, 121, 167, 255}, color.RGBA{240, 228, 66, 255},
}

// minWindow is how many labeled outcomes a windowed-accuracy point needs
// before it is drawn (or the whole window, when smaller): the first points,
// over a handful of labels, swing between 0 and 1 and would set the y axis.
const minWindow = 50

// drawn reports whether point pt of a windowed-accuracy curve over win
// labeled events is drawn (curves written before WindowLabeled existed
// carry 0 everywhere, and are drawn whole).
func drawn(pt Point, win int, known bool) bool {
	return !known || pt.WindowLabeled >= min(win, minWindow)
}

// panel plots value over the runs; win > 0 marks a windowed-accuracy panel
// over win labeled events.
func panel(res Result, ylabel string, win int, value func(Point) float64) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "event"
	byTime := timed(res)
	if byTime {
		p.X.Label.Text = "event time (UTC)"
		p.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02\n15:04"}
	}
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = win == 0
	p.Add(plotter.NewGrid())
	for i, ls := range res.Summary.Learners {
		runs := res.Runs[i]
		if len(runs) == 0 || len(runs[0].Curve) == 0 {
			continue
		}
		known := slices.ContainsFunc(runs[0].Curve, func(pt Point) bool { return pt.WindowLabeled > 0 })
		n := len(runs[0].Curve)
		var mean, lo, hi plotter.XYs
		for k := 0; k < n; k++ {
			if win > 0 && !drawn(runs[0].Curve[k], win, known) {
				continue
			}
			vals := make([]float64, 0, len(runs))
			for _, r := range runs {
				if k < len(r.Curve) {
					vals = append(vals, value(r.Curve[k]))
				}
			}
			ci := meanCI(vals)
			x := float64(runs[0].Curve[k].Event)
			if byTime {
				x = float64(runs[0].Curve[k].Time.Unix())
			}
			mean, lo, hi = append(mean, plotter.XY{X: x, Y: ci.Mean}), append(lo, plotter.XY{X: x, Y: ci.Lo}), append(hi, plotter.XY{X: x, Y: ci.Hi})
		}
		if len(mean) == 0 {
			continue
		}
		col := okabeIto[i%len(okabeIto)]
		if len(runs) > 1 {
			band, err := plotter.NewPolygon(append(hi, reverse(lo)...))
			if err != nil {
				return nil, err
			}
			r, g, b, _ := col.RGBA()
			band.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 50}
			band.LineStyle.Width = 0
			p.Add(band)
		}
		line, err := plotter.NewLine(mean)
		if err != nil {
			return nil, err
		}
		line.Color = col
		line.Dashes = plotutil.Dashes(i / len(okabeIto))
		line.Width = vg.Points(1.2)
		p.Add(line)
		p.Legend.Add(ls.Name, line)
		if marks := alertMarks(runs[0], value, byTime); len(marks) > 0 && win > 0 {
			sc, err := plotter.NewScatter(marks)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color = col
			sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(3)
			p.Add(sc)
			p.Legend.Add(ls.Name+": drift alerts (repeat 1)", sc)
		}
	}
	return p, nil
}

// alertMarks places a run's drift alerts (every detector's) on its curve:
// at the alert's event, at the curve's value there.
func alertMarks(run Run, value func(Point) float64, byTime bool) plotter.XYs {
	var out plotter.XYs
	for _, events := range run.Alerts {
		for _, e := range events {
			k, _ := slices.BinarySearchFunc(run.Curve, e+1, func(p Point, ev int) int { return cmp.Compare(p.Event, ev) })
			if k >= len(run.Curve) {
				k = len(run.Curve) - 1
			}
			if k < 0 {
				continue
			}
			x := float64(e + 1)
			if byTime {
				x = float64(run.Curve[k].Time.Unix())
			}
			out = append(out, plotter.XY{X: x, Y: value(run.Curve[k])})
		}
	}
	return out
}

func reverse(xy plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	for i, v := range xy {
		out[len(xy)-1-i] = v
	}
	return out
}

// save writes a formatted canvas to path.
func save(path string, c vg.CanvasWriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
