package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func TestCDF(t *testing.T) {
	s := CDF("x", []float64{3, 1, 2, 2})
	wantX := []float64{1, 2, 2, 3}
	wantY := []float64{0.25, 0.5, 0.75, 1}
	for i := range wantX {
		if s.X[i] != wantX[i] || s.Y[i] != wantY[i] {
			t.Fatalf("point %d = (%v,%v), want (%v,%v)", i, s.X[i], s.Y[i], wantX[i], wantY[i])
		}
	}
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	p := &Plot{Title: "t", XLabel: "x", YLabel: "y", Series: []Series{CDF("a", []float64{1, 2, 3})}}
	tests := []struct {
		file  string
		magic []byte
		err   bool
	}{
		{"a.svg", []byte("<?xml"), false},
		{"a.png", []byte("\x89PNG"), false},
		{"a.gif", nil, true},
	}
	for _, tc := range tests {
		path := filepath.Join(dir, tc.file)
		err := p.Save(path)
		if (err != nil) != tc.err {
			t.Fatalf("%s: err = %v, want error %v", tc.file, err, tc.err)
		}
		if tc.err {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, tc.magic) {
			t.Errorf("%s starts %q, want %q", tc.file, b[:8], tc.magic)
		}
	}
	bad := &Plot{Series: []Series{{Name: "bad", X: []float64{1}, Y: nil}}}
	if err := bad.Save(filepath.Join(dir, "b.svg")); err == nil {
		t.Error("mismatched series saved without error")
	}
}

// TestXRange: a fixed X range cuts a long tail off the axis.
func TestXRange(t *testing.T) {
	dir := t.TempDir()
	values := []float64{1, 2, 3, 5, 8, 1000}
	save := func(name string, xmax *float64) string {
		p := &Plot{Series: []Series{CDF("a", values)}, XMax: xmax, LegendBottom: true}
		path := filepath.Join(dir, name)
		if err := p.Save(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ten := 10.0
	full, cut := save("full.svg", nil), save("cut.svg", &ten)
	if !bytes.Contains([]byte(full), []byte(">1000<")) {
		t.Fatalf("the full plot has no 1000 tick")
	}
	if bytes.Contains([]byte(cut), []byte(">1000<")) || !bytes.Contains([]byte(cut), []byte(">10<")) {
		t.Errorf("the plot cut at 10 still reaches 1000, or does not reach 10")
	}
}

func TestBarsSave(t *testing.T) {
	dir := t.TempDir()
	one := &Bars{Title: "memory", YLabel: "MB", Labels: []string{"none", "rsa-2048"}, Format: "%.1f",
		Groups: []BarGroup{{Values: []float64{12.5, 14.25}}}}
	if err := one.SaveAll(filepath.Join(dir, "m.svg"), filepath.Join(dir, "m.png")); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "m.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// The value labels are drawn as text.
	for _, want := range []string{"12.5", "14.2", "rsa-2048"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	two := &Bars{Labels: []string{"a", "b"}, Groups: []BarGroup{{"x", []float64{1, 2}}, {"y", []float64{3, 4}}}}
	if err := two.Save(filepath.Join(dir, "g.png")); err != nil {
		t.Fatal(err)
	}
	bad := &Bars{Labels: []string{"a", "b"}, Groups: []BarGroup{{"x", []float64{1}}}}
	if err := bad.Save(filepath.Join(dir, "b.svg")); err == nil {
		t.Error("a group with too few values was drawn")
	}
	if err := (&Bars{}).Save(filepath.Join(dir, "e.svg")); err == nil {
		t.Error("an empty chart was drawn")
	}
}

// TestLegendClearOfData draws representative charts (a CDF of several
// latency series whose curves reach the top right, where gonum puts its
// legend, a latency series over time and grouped bars) and checks, from
// the geometry Save draws with, that the legend's box covers no plotted
// point and lies beside the data area, within the canvas.
func TestLegendClearOfData(t *testing.T) {
	var near, far, lossy []float64
	for i := range 200 {
		near = append(near, 2+float64(i%17))
		far = append(far, 150+float64(i%41))
		lossy = append(lossy, 150+float64(i*i%997))
	}
	var ts, lat []float64
	for i := range 300 {
		ts = append(ts, float64(i))
		lat = append(lat, 20+float64(i*7%50))
	}
	tests := []struct {
		name string
		p    interface {
			build() (*plot.Plot, []string, error)
		}
		bottom bool
	}{
		{"cdf, legend top", &Plot{Title: "notary round trip", XLabel: "ms", YLabel: "CDF", LogX: true,
			Series: []Series{CDF("notary-near", near), CDF("notary-global", far), CDF("notary-global, 2% loss", lossy)}}, false},
		{"cdf, legend bottom", &Plot{XLabel: "ms", YLabel: "CDF",
			Series: []Series{CDF("near", near), CDF("far", far)}}, true},
		{"series over time", &Plot{XLabel: "s", YLabel: "ms",
			Series: []Series{{Name: "p50", X: ts, Y: lat}, {Name: "requests", X: ts, Y: lat, Points: true}}}, false},
		{"grouped bars", &Bars{Labels: []string{"rsa-2048", "ecdsa-p256", "ed25519"},
			Groups: []BarGroup{{"go", []float64{3, 1, 0.5}}, {"openssl", []float64{2.9, 1.1, 0.4}}, {"webpki", []float64{2.5, 0.9, 0.6}}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl, names, err := tc.p.build()
			if err != nil {
				t.Fatal(err)
			}
			if len(names) == 0 {
				t.Fatal("the chart has no legend to place")
			}
			c := draw.New(vgimg.New(width, height))
			f := render(pl, names, tc.bottom, c)
			if f.legend.Size().X <= 0 || f.legend.Size().Y <= 0 {
				t.Fatalf("empty legend box %+v", f.legend)
			}
			if !within(f.legend, c.Rectangle) {
				t.Errorf("legend %+v leaves the canvas %+v", f.legend, c.Rectangle)
			}
			if overlaps(f.legend, f.data) {
				t.Errorf("legend %+v overlaps the data area %+v", f.legend, f.data)
			}
			dc := draw.Canvas{Canvas: c.Canvas, Rectangle: f.data}
			x, y := pl.Transforms(&dc)
			n := 0
			for _, pt := range points(tc.p) {
				if pt.X < pl.X.Min || pt.X > pl.X.Max || pt.Y < pl.Y.Min || pt.Y > pl.Y.Max {
					continue
				}
				n++
				at := vg.Point{X: x(pt.X), Y: y(pt.Y)}
				if inside(at, f.legend) {
					t.Fatalf("point (%v, %v), drawn at %v, is under the legend %+v", pt.X, pt.Y, at, f.legend)
				}
			}
			if n == 0 {
				t.Fatal("no point checked")
			}
		})
	}
}

// points are the data values a chart draws: every series' points, and
// for bars each bar's top, its base and every tenth of its height.
func points(p any) []plotter.XY {
	var out []plotter.XY
	switch p := p.(type) {
	case *Plot:
		for _, s := range p.Series {
			for i := range s.X {
				out = append(out, plotter.XY{X: s.X[i], Y: s.Y[i]})
			}
		}
	case *Bars:
		for _, g := range p.Groups {
			for i, v := range g.Values {
				for k := range 11 {
					out = append(out, plotter.XY{X: float64(i), Y: v * float64(k) / 10})
				}
			}
		}
	}
	return out
}

func inside(p vg.Point, r vg.Rectangle) bool {
	return p.X >= r.Min.X && p.X <= r.Max.X && p.Y >= r.Min.Y && p.Y <= r.Max.Y
}

func within(in, out vg.Rectangle) bool {
	return in.Min.X >= out.Min.X && in.Max.X <= out.Max.X && in.Min.Y >= out.Min.Y && in.Max.Y <= out.Max.Y
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}
