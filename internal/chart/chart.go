// Package chart draws the plots pkie's measurement commands produce (CDFs,
// curves, series over time) as SVG or PNG files, chosen by file extension.
package chart

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Series is one named line.
type Series struct {
	Name string
	X, Y []float64
	// Points draws the values as unconnected markers (a scatter plot)
	// instead of a line.
	Points bool
}

// Plot describes a line chart.
type Plot struct {
	Title, XLabel, YLabel string
	Series                []Series
	LogX                  bool
	YMin, YMax            *float64 // fixed Y range when set
	// XMin and XMax fix the X range when set; lines beyond it are cut
	// at the axis (a CDF with a long tail keeps its body readable).
	XMin, XMax *float64
	// LegendBottom aligns the legend, which is always drawn beside the
	// axes rather than over the data, with the bottom of the plot
	// instead of its top.
	LegendBottom bool
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// Save writes p to path; the extension (.svg, .png, .pdf) picks the format.
func (p *Plot) Save(path string) error {
	pl, names, err := p.build()
	if err != nil {
		return err
	}
	return save(pl, names, p.LegendBottom, path)
}

// build turns p into a gonum plot and its legend's entries.
func (p *Plot) build() (*plot.Plot, []string, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	pl.Add(plotter.NewGrid())
	var names []string
	for i, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return nil, nil, fmt.Errorf("chart: series %q has %d x values and %d y values", s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			if p.LogX && s.X[j] <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[j], Y: s.Y[j]})
		}
		if len(pts) == 0 {
			continue
		}
		var thumb plot.Thumbnailer
		if s.Points {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, nil, fmt.Errorf("chart: series %q: %w", s.Name, err)
			}
			sc.GlyphStyle.Color = palette[i%len(palette)]
			sc.GlyphStyle.Radius = vg.Points(2.5)
			pl.Add(sc)
			thumb = sc
		} else {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, nil, fmt.Errorf("chart: series %q: %w", s.Name, err)
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.5)
			pl.Add(l)
			thumb = l
		}
		if s.Name != "" {
			pl.Legend.Add(s.Name, thumb)
			names = append(names, s.Name)
		}
	}
	if p.XMin != nil {
		pl.X.Min = *p.XMin
	}
	if p.XMax != nil {
		pl.X.Max = *p.XMax
	}
	if p.YMin != nil {
		pl.Y.Min = *p.YMin
	}
	if p.YMax != nil {
		pl.Y.Max = *p.YMax
	}
	return pl, names, nil
}

// SaveAll writes p once per path (e.g. the same chart as SVG and PNG).
func (p *Plot) SaveAll(paths ...string) error {
	for _, path := range paths {
		if err := p.Save(path); err != nil {
			return err
		}
	}
	return nil
}

// CDF returns the empirical cumulative distribution of values as a series:
// X sorted ascending, Y the fraction of values at or below X.
func CDF(name string, values []float64) Series {
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	s := Series{Name: name, X: make([]float64, len(v)), Y: make([]float64, len(v))}
	for i, x := range v {
		s.X[i] = x
		s.Y[i] = float64(i+1) / float64(len(v))
	}
	return s
}
