package soak

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// SavePlot draws every good request's latency against the time it was sent,
// one colour per service and failures in red, with the phases marked, to
// path (.svg, .png or .pdf).
func (r *Report) SavePlot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("pkie soak: good-request latency (%.0f req/s) under attack", r.Rate)
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())

	const floor = 0.1 // ms: the log scale needs positive values
	colours := map[string]color.Color{
		"notary": color.RGBA{0x1f, 0x77, 0xb4, 0xff},
		"log":    color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		"failed": color.RGBA{0xd6, 0x27, 0x28, 0xff},
	}
	series := map[string]plotter.XYs{}
	ymax := 1.0
	for _, s := range r.Samples {
		name := s.Service
		if !s.OK {
			name = "failed"
		}
		y := math.Max(floor, float64(s.Latency)/float64(time.Millisecond))
		ymax = math.Max(ymax, y)
		series[name] = append(series[name], plotter.XY{X: s.At.Seconds(), Y: y})
	}
	for _, name := range []string{"notary", "log", "failed"} {
		pts := series[name]
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("soak: plot: %w", err)
		}
		sc.GlyphStyle.Color = colours[name]
		sc.GlyphStyle.Radius = vg.Points(1.5)
		if name == "failed" {
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Radius = vg.Points(2.5)
		}
		p.Add(sc)
		p.Legend.Add(name, sc)
	}
	top := ymax * 4
	var marks plotter.XYLabels
	for _, ph := range r.Phases {
		if ph.StartS > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: ph.StartS, Y: floor}, {X: ph.StartS, Y: top}})
			if err != nil {
				return fmt.Errorf("soak: plot: %w", err)
			}
			l.Color = color.Gray{0x80}
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(l)
		}
		marks.XYs = append(marks.XYs, plotter.XY{X: ph.StartS, Y: top})
		marks.Labels = append(marks.Labels, " "+ph.Name)
	}
	labels, err := plotter.NewLabels(marks)
	if err != nil {
		return fmt.Errorf("soak: plot: %w", err)
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Rotation = -math.Pi / 2
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	p.Add(labels)
	p.Y.Min, p.Y.Max = floor, top
	p.X.Min, p.X.Max = 0, r.DurationSeconds
	p.Legend.Top = true
	p.Legend.Left = true
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("soak: writing %s: %w", path, err)
	}
	return nil
}
