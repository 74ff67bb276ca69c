package chart

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Bars describes a bar chart: one bar per label and group, the groups side
// by side within each label (a histogram per case, a figure per resource).
type Bars struct {
	Title, XLabel, YLabel string
	// Labels name the categories along the X axis.
	Labels []string
	Groups []BarGroup
	// Format, when set and there is one group, prints each bar's value
	// above it (as the figures of many papers do), e.g. "%.2f".
	Format     string
	YMin, YMax *float64
}

// BarGroup is one named set of bars, a value per label.
type BarGroup struct {
	Name   string
	Values []float64
}

// Save writes b to path; the extension (.svg, .png, .pdf) picks the format.
func (b *Bars) Save(path string) error {
	pl, names, err := b.build()
	if err != nil {
		return fmt.Errorf("chart: %s: %w", path, err)
	}
	return save(pl, names, false, path)
}

// build turns b into a gonum plot and its legend's entries.
func (b *Bars) build() (*plot.Plot, []string, error) {
	if len(b.Groups) == 0 || len(b.Labels) == 0 {
		return nil, nil, fmt.Errorf("no bars")
	}
	pl := plot.New()
	pl.Title.Text = b.Title
	pl.X.Label.Text = b.XLabel
	pl.Y.Label.Text = b.YLabel
	pl.Add(plotter.NewGrid())
	// Bars fill 80% of each category's width, split among the groups.
	width := vg.Points(math.Max(4, 320/float64(len(b.Labels)*len(b.Groups))))
	var labels plotter.XYLabels
	var names []string
	top := 0.0
	for i, g := range b.Groups {
		if len(g.Values) != len(b.Labels) {
			return nil, nil, fmt.Errorf("bar group %q has %d values for %d labels", g.Name, len(g.Values), len(b.Labels))
		}
		bc, err := plotter.NewBarChart(plotter.Values(g.Values), width)
		if err != nil {
			return nil, nil, fmt.Errorf("bar group %q: %w", g.Name, err)
		}
		bc.Color = palette[i%len(palette)]
		bc.LineStyle.Width = 0
		off := (float64(i) - float64(len(b.Groups)-1)/2) * float64(width)
		bc.Offset = vg.Length(off)
		pl.Add(bc)
		if g.Name != "" && len(b.Groups) > 1 {
			pl.Legend.Add(g.Name, bc)
			names = append(names, g.Name)
		}
		for j, v := range g.Values {
			top = math.Max(top, v)
			if b.Format != "" && len(b.Groups) == 1 {
				labels.XYs = append(labels.XYs, plotter.XY{X: float64(j), Y: v})
				labels.Labels = append(labels.Labels, fmt.Sprintf(b.Format, v))
			}
		}
	}
	if len(labels.XYs) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, nil, fmt.Errorf("bar labels: %w", err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = -0.5 // centred on the bar
			l.TextStyle[i].YAlign = 0    // above it
		}
		pl.Add(l)
	}
	pl.NominalX(b.Labels...)
	// Half a category of margin each side, so the outer groups' bars
	// are not cut at the axes.
	pl.X.Min, pl.X.Max = -0.5, float64(len(b.Labels))-0.5
	pl.Y.Min = 0
	if top > 0 {
		// Room for the value labels above the bars; the legend is
		// beside the plot, not over it.
		pl.Y.Max = top * 1.12
	}
	if b.YMin != nil {
		pl.Y.Min = *b.YMin
	}
	if b.YMax != nil {
		pl.Y.Max = *b.YMax
	}
	return pl, names, nil
}

// SaveAll writes b once per path (e.g. the same chart as SVG and PNG).
func (b *Bars) SaveAll(paths ...string) error {
	for _, path := range paths {
		if err := b.Save(path); err != nil {
			return err
		}
	}
	return nil
}
