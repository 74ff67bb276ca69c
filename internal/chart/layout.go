package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The size every chart is drawn at.
const (
	width  = 8 * vg.Inch
	height = 5 * vg.Inch
)

// legendGap separates the legend column from the plot beside it.
const legendGap = vg.Length(8)

// frame is where a chart was drawn, in canvas coordinates: the data area
// (inside the axes) and the legend's box (empty without a legend).
type frame struct {
	data, legend vg.Rectangle
}

// render draws pl on c with its legend in a column to the right of the
// axes, never inside the data area: a legend drawn over the data hides
// whatever curve runs through its corner, and no corner is free for
// every chart (a CDF fills the top left, a latency series the bottom).
// names are the legend's entries, in the order they were added to
// pl.Legend; bottom aligns the column with the data area's bottom
// instead of its top.
func render(pl *plot.Plot, names []string, bottom bool, c draw.Canvas) frame {
	leg := pl.Legend
	// pl.Draw would put its legend inside the data area; it gets an empty
	// one and the real legend is drawn beside it.
	pl.Legend = plot.NewLegend()
	defer func() { pl.Legend = leg }()
	if len(names) == 0 {
		pl.Draw(c)
		return frame{data: pl.DataCanvas(c).Rectangle}
	}
	sty := leg.TextStyle
	em := sty.Rectangle(" ").Max.X
	var textW, entryH vg.Length
	for _, n := range names {
		r := sty.Rectangle(n)
		textW = max(textW, r.Max.X)
		entryH = max(entryH, r.Max.Y)
	}
	legW := leg.ThumbnailWidth + em + textW
	// A legend wider than a third of the chart would squeeze the plot
	// to nothing; its names are cut at the canvas edge instead.
	legW = min(legW, (c.Max.X-c.Min.X)/3)
	plotC := draw.Crop(c, 0, -(legW + legendGap), 0, 0)
	pl.Draw(plotC)
	data := pl.DataCanvas(plotC).Rectangle

	descent := sty.FontExtents().Descent
	legH := vg.Length(len(names))*(entryH+leg.Padding) - leg.Padding + descent
	box := vg.Rectangle{Min: vg.Point{X: c.Max.X - legW, Y: data.Max.Y - legH}, Max: vg.Point{X: c.Max.X, Y: data.Max.Y}}
	if bottom {
		box.Min.Y, box.Max.Y = data.Min.Y, data.Min.Y+legH
	}
	leg.Left, leg.Top = true, true
	leg.XOffs, leg.YOffs = 0, 0
	leg.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: box})
	return frame{data: data, legend: box}
}

// save draws pl at the standard size into path, the extension picking the
// format.
func save(pl *plot.Plot, names []string, bottom bool, path string) error {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch ext {
	case "svg", "png", "pdf":
	default:
		return fmt.Errorf("chart: %s: unsupported image format %q (use .svg, .png or .pdf)", path, ext)
	}
	cw, err := draw.NewFormattedCanvas(width, height, ext)
	if err != nil {
		return fmt.Errorf("chart: %s: %w", path, err)
	}
	render(pl, names, bottom, draw.New(cw))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chart: writing %s: %w", path, err)
	}
	if _, err := cw.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("chart: writing %s: %w", path, err)
	}
	return nil
}
