package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
