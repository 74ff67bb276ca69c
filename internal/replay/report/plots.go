package report

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pkie/pkie/internal/chart"
)

// Figure file names in the directory WritePlots writes, each as .svg and
// .png.
const (
	Fig2 = "fig2-requests-per-second"
	Fig3 = "fig3-notary-outcomes"
	Fig4 = "fig4-cache-per-minute"
	Fig5 = "fig5-delay-per-minute"
)

// WritePlots draws Figures 2–5 of the run into dir as SVG and PNG and
// returns the files written. X is trace time in seconds (Figures 2–3) or
// minutes (4–5) from the schedule's start.
func WritePlots(dir string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var sx []float64
	col := func(f func(*SecondSeries) int64) []float64 {
		v := make([]float64, len(rep.Seconds))
		for i := range rep.Seconds {
			v[i] = float64(f(&rep.Seconds[i]))
		}
		return v
	}
	sx = col(func(s *SecondSeries) int64 { return s.Second })
	sched := col(func(s *SecondSeries) int64 { return s.Scheduled })
	nNotaries := max(1, len(rep.Notaries))
	sent := make([]float64, len(rep.Seconds))
	for i := range rep.Seconds {
		// One request goes to every notary; per request, not per result.
		sent[i] = float64(rep.Seconds[i].Sent) / float64(nNotaries)
	}
	zero := 0.0
	plots := map[string]*chart.Plot{
		Fig2: {
			Title: "Figure 2: notary requests per second", XLabel: "trace time (s)", YLabel: "requests per second", YMin: &zero,
			Series: []chart.Series{{Name: "schedule", X: sx, Y: sched}, {Name: "sent (by when they left)", X: sx, Y: sent}},
		},
		Fig3: {
			Title: "Figure 3: notary outcomes per second against the workload", XLabel: "trace time (s)", YLabel: "results per second", YMin: &zero,
			Series: []chart.Series{
				{Name: "workload (schedule × notaries)", X: sx, Y: scale(sched, float64(nNotaries))},
				{Name: "ok", X: sx, Y: col(func(s *SecondSeries) int64 { return s.OK + s.Conflict })},
				{Name: "unavailable (503)", X: sx, Y: col(func(s *SecondSeries) int64 { return s.Unavailable })},
				{Name: "connection error", X: sx, Y: col(func(s *SecondSeries) int64 { return s.ConnError })},
				{Name: "client timeout", X: sx, Y: col(func(s *SecondSeries) int64 { return s.Timeout })},
				{Name: "not sent", X: sx, Y: col(func(s *SecondSeries) int64 { return s.NotSent })},
			},
		},
	}
	mx := make([]float64, len(rep.Minutes))
	var client, hits, misses []float64
	var hitD, missD, allD chart.Series
	hitD.Name, missD.Name, allD.Name = "notary cache hit", "cache miss", "all successful"
	for i, m := range rep.Minutes {
		mx[i] = float64(m.Minute)
		client = append(client, float64(m.ClientHits))
		// Each request has one result per notary: the notaries' hits
		// and misses are averaged, so that they stand beside the client
		// hits, which count requests.
		hits = append(hits, float64(m.Hits)/float64(nNotaries))
		misses = append(misses, float64(m.Misses)/float64(nNotaries))
		for _, p := range []struct {
			s *chart.Series
			v *float64
		}{{&hitD, m.MeanHitMS}, {&missD, m.MeanMissMS}, {&allD, m.MeanSuccessfulMS}} {
			if p.v != nil {
				p.s.X = append(p.s.X, float64(m.Minute))
				p.s.Y = append(p.s.Y, *p.v)
			}
		}
	}
	per := ""
	if nNotaries > 1 {
		per = fmt.Sprintf(" (mean of %d notaries)", nNotaries)
	}
	plots[Fig4] = &chart.Plot{
		Title: "Figure 4: client cache hits, notary cache hits and misses per minute", XLabel: "trace time (min)", YLabel: "per minute", YMin: &zero,
		Series: []chart.Series{{Name: "client cache hit", X: mx, Y: client}, {Name: "notary cache hit" + per, X: mx, Y: hits}, {Name: "cache miss" + per, X: mx, Y: misses}},
	}
	plots[Fig5] = &chart.Plot{
		Title: "Figure 5: mean delay per minute by cache condition", XLabel: "trace time (min)", YLabel: "mean delay (ms)", YMin: &zero,
		Series: []chart.Series{hitD, missD, allD},
	}
	for _, pl := range plots {
		for i := range pl.Series {
			// A line of one point draws nothing: a short run's
			// minutes are shown as markers.
			pl.Series[i].Points = len(pl.Series[i].X) < 3
		}
	}
	var files []string
	for _, name := range []string{Fig2, Fig3, Fig4, Fig5} {
		svg, png := filepath.Join(dir, name+".svg"), filepath.Join(dir, name+".png")
		if err := plots[name].SaveAll(svg, png); err != nil {
			return files, fmt.Errorf("report: %w", err)
		}
		files = append(files, svg, png)
	}
	return files, nil
}

func scale(v []float64, k float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * k
	}
	return out
}
