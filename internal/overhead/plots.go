package overhead

import (
	"fmt"

	"github.com/pkie/pkie/internal/chart"
)

// NamedPlot is a chart and the name it is saved under (a suffix for the
// caller's file prefix).
type NamedPlot struct {
	Name   string
	Figure string // the thesis figures it corresponds to
	Plot   *chart.Plot
}

// Plots returns the thesis's overhead charts drawn from rep: CDFs of the
// overhead per run and per site, in ms and in % (Figures 2, 3 and 6–15),
// the overhead against the HTTP download time (Figures 4 and 5) and the
// download time against the page size (Figure 16).
func Plots(rep *Report) []NamedPlot {
	var runMS, runPct, siteMS, sitePct, vsMS, vsPct []chart.Series
	for _, mode := range rep.Modes {
		var rms, rpct, sms, spct, nms, npct, hx []float64
		for _, s := range rep.Sites {
			sa, ms, pct, ok := aggregateSite(s, mode)
			if !ok {
				continue
			}
			rms = append(rms, ms...)
			rpct = append(rpct, pct...)
			sms = append(sms, sa.MeanOverheadMS)
			spct = append(spct, sa.MeanOverheadPct)
			hx = append(hx, sa.HTTPMS.Mean)
			if !sa.Redirected {
				nms = append(nms, sa.MeanOverheadMS)
				npct = append(npct, sa.MeanOverheadPct)
			}
		}
		if len(rms) == 0 {
			continue
		}
		name := string(mode)
		runMS = append(runMS, chart.CDF(name, rms))
		runPct = append(runPct, chart.CDF(name, rpct))
		siteMS = append(siteMS, chart.CDF(name, sms), chart.CDF(name+", without redirects", nms))
		sitePct = append(sitePct, chart.CDF(name, spct), chart.CDF(name+", without redirects", npct))
		vsMS = append(vsMS, chart.Series{Name: name, X: hx, Y: sms, Points: true})
		vsPct = append(vsPct, chart.Series{Name: name, X: hx, Y: spct, Points: true})
	}
	title := func(s string) string {
		return fmt.Sprintf("%s (%d runs per site and scheme)", s, rep.Runs)
	}
	cdfY := "fraction"
	plots := []NamedPlot{
		{"run-overhead-ms", "2, 8, 11", &chart.Plot{Title: title("HTTPS overhead per run"), XLabel: "HTTPS − HTTP download time (ms)", YLabel: cdfY, Series: runMS}},
		{"run-overhead-pct", "3, 9, 12", &chart.Plot{Title: title("HTTPS overhead per run"), XLabel: "HTTPS overhead (% of HTTP download time)", YLabel: cdfY, Series: runPct}},
		{"site-overhead-ms", "6, 10, 13, 14, 15", &chart.Plot{Title: title("Average HTTPS overhead per site"), XLabel: "mean HTTPS − mean HTTP download time (ms)", YLabel: cdfY, Series: siteMS}},
		{"site-overhead-pct", "7", &chart.Plot{Title: title("Average HTTPS overhead per site"), XLabel: "HTTPS overhead (% of mean HTTP download time)", YLabel: cdfY, Series: sitePct}},
		{"overhead-vs-http-pct", "4", &chart.Plot{Title: "HTTPS overhead against HTTP download time", XLabel: "mean HTTP download time (ms)", YLabel: "HTTPS overhead (%)", Series: vsPct}},
		{"overhead-vs-http-ms", "5", &chart.Plot{Title: "HTTPS overhead against HTTP download time", XLabel: "mean HTTP download time (ms)", YLabel: "HTTPS overhead (ms)", Series: vsMS}},
	}
	if st := sizeTime(rep); st != nil {
		plots = append(plots, NamedPlot{"size-time", "16", st})
	}
	return plots
}

// sizeTime plots each site's mean download time against its mean page
// size, over HTTP and HTTPS, with least-squares trend lines, in the
// non-persistent mode if it was measured (as the thesis's Figure 16).
func sizeTime(rep *Report) *chart.Plot {
	if len(rep.Modes) == 0 {
		return nil
	}
	mode := rep.Modes[0]
	for _, m := range rep.Modes {
		if m == NonPersistent {
			mode = m
		}
	}
	var hx, hy, sx, sy []float64
	for _, s := range rep.Sites {
		sa, _, _, ok := aggregateSite(s, mode)
		if !ok {
			continue
		}
		hx, hy = append(hx, sa.HTTPBytes/1024), append(hy, sa.HTTPMS.Mean)
		sx, sy = append(sx, sa.HTTPSBytes/1024), append(sy, sa.HTTPSMS.Mean)
	}
	if len(hx) == 0 {
		return nil
	}
	p := &chart.Plot{
		Title:  fmt.Sprintf("Page download time against page size (%s)", mode),
		XLabel: "page size (KiB)", YLabel: "mean download time (ms)",
		Series: []chart.Series{
			{Name: "HTTP", X: hx, Y: hy, Points: true},
			{Name: "HTTPS", X: sx, Y: sy, Points: true},
		},
	}
	for _, tr := range []struct {
		name string
		x, y []float64
	}{{"HTTP trend", hx, hy}, {"HTTPS trend", sx, sy}} {
		if a, b, ok := linearFit(tr.x, tr.y); ok {
			lo, hi := minMax(tr.x)
			p.Series = append(p.Series, chart.Series{Name: tr.name, X: []float64{lo, hi}, Y: []float64{a + b*lo, a + b*hi}})
		}
	}
	return p
}

// linearFit returns the least-squares line y = a + b·x, if x varies.
func linearFit(x, y []float64) (a, b float64, ok bool) {
	n := float64(len(x))
	if len(x) < 2 {
		return 0, 0, false
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, 0, false
	}
	b = (n*sxy - sx*sy) / d
	return (sy - b*sx) / n, b, true
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
