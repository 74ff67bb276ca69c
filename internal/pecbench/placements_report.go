package pecbench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pkie/pkie/internal/chart"
)

// WriteText prints the study: its set-up, then per footprint, selection and
// TLS version the share of connections under 1% and 2% inflation, measured
// and as the round trips alone predict, beside the paper's.
func (s *Study) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pkie bench pec --placements: %s/%s, %d CPUs, %s; %.1f s\n", s.Machine.OS, s.Machine.Arch, s.Machine.CPUs, s.Machine.GoVersion, s.Seconds)
	codes := make([]string, len(s.Matrix.Regions))
	for i, r := range s.Matrix.Regions {
		codes[i] = r.Code
	}
	fmt.Fprintf(w, "\n%d regions (the EC2 regions of 2017): %s\n", len(codes), strings.Join(codes, ", "))
	fmt.Fprintf(w, "RTT = 2 × great-circle distance × %.2f / (2/3 c); round trips divided by %g on loopback (processing weighs %g× more than at real distances)\n",
		s.FibreFactor, s.Scale, s.Scale)
	fmt.Fprintf(w, "large footprint: a point of presence in every client's metro, %.1f ms away; %d measured handshakes per mode, mean used\n", s.PoPRTTms, s.Reps)
	for _, d := range slices.Sorted(mapKeys(s.NotMeasured)) {
		fmt.Fprintf(w, "NOT MEASURED: %s: %s\n", d, s.NotMeasured[d])
	}
	fmt.Fprintf(w, "\nrelative inflation of the time to a usable connection over the plain TLS handshake\n")
	fmt.Fprintf(w, "  %-8s %-8s %-4s %-14s %5s %8s %8s %8s %8s %8s   %8s %8s %8s\n", "cloud", "select", "TLS", "deployment", "n",
		"<1%", "<2%", "mean", "median", "p90", "model<1%", "<2%", "mean")
	for _, x := range s.Summaries {
		fmt.Fprintf(w, "  %-8s %-8s %-4s %-14s %5d %7.0f%% %7.0f%% %7.1f%% %7.1f%% %7.1f%%   %7.0f%% %7.0f%% %7.1f%%\n", x.Footprint, x.Selection, x.TLS, x.Deployment, x.N,
			100*x.Under1, 100*x.Under2, 100*x.Mean, 100*x.Median, 100*x.P90, 100*x.ModelUnder1, 100*x.ModelUnder2, 100*x.ModelMean)
	}
	for _, d := range s.Deployments {
		a, b := s.Summary(FootprintRegions, SelectNearest, "1.2", d), s.Summary(FootprintRegions, SelectNearest, "1.3", d)
		if a != nil && b != nil {
			fmt.Fprintf(w, "  %s, nearest cloud: mean inflation TLS 1.3 %.1f%% vs TLS 1.2 %.1f%% (%+.1f points); model %.1f%% vs %.1f%%\n", d,
				100*b.Mean, 100*a.Mean, 100*(b.Mean-a.Mean), 100*b.ModelMean, 100*a.ModelMean)
		}
	}
	fmt.Fprintf(w, "  paper (§6.2, Figure 5, TLS 1.2, nearest cloud): under 1%% for %.0f%% client-only and %.0f%% client-server; (Appendix A) TLS 1.3: +%.1f%% on average\n",
		100*PaperUnder1ClientOnly, 100*PaperUnder1ClientServer, 100*PaperTLS13MeanInflation)
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// PlotMaxInflation is where the plots' inflation axis stops.
const PlotMaxInflation = 2.0

// SavePlots draws the inflation CDFs, each as PREFIX-NAME.svg and .png: per
// TLS version, the 14 regions with random and nearest cloud (the paper's
// Figure 5), and the nearest cloud on the 14 regions against a point of
// presence next to every client (its Figure 6). It returns the files
// written.
func (s *Study) SavePlots(prefix string) ([]string, error) {
	var written []string
	for _, v := range []string{"1.2", "1.3"} {
		for _, fig := range []struct {
			name, title string
			pick        func(x *StudySummary) (string, bool)
		}{
			{"fig5", "Figure 5: 14 regions, random and nearest cloud", func(x *StudySummary) (string, bool) {
				return x.Selection + " cloud, " + x.Deployment, x.Footprint == FootprintRegions
			}},
			{"fig6", "Figure 6: nearest cloud, 14 regions and a PoP near every client", func(x *StudySummary) (string, bool) {
				name := "14 regions"
				if x.Footprint == FootprintPoP {
					name = "PoP near every client"
				}
				return name + ", " + x.Deployment, x.Selection == SelectNearest
			}},
		} {
			// The axis stops at PlotMaxInflation: the random model's
			// tail runs to several hundred percent over TLS 1.3, which
			// would squeeze the curves that matter against zero.
			lo, hi := -10.0, 100*PlotMaxInflation
			p := &chart.Plot{Title: fmt.Sprintf("PEC latency inflation, TLS %s (%s)", v, fig.title),
				XLabel: fmt.Sprintf("relative inflation of the time to a usable connection (%%; axis cut at %.0f%%)", hi), YLabel: "fraction of placements",
				XMin: &lo, XMax: &hi, LegendBottom: true}
			for i := range s.Summaries {
				x := &s.Summaries[i]
				name, ok := fig.pick(x)
				if !ok || x.TLS != v || len(x.inflation) == 0 {
					continue
				}
				pct := make([]float64, len(x.inflation))
				for j, f := range x.inflation {
					pct[j] = 100 * f
				}
				p.Series = append(p.Series, chart.CDF(name, pct))
			}
			if len(p.Series) == 0 {
				continue
			}
			base := fmt.Sprintf("%s-%s-tls%s", prefix, fig.name, strings.ReplaceAll(v, ".", ""))
			paths := []string{base + ".svg", base + ".png"}
			if err := p.SaveAll(paths...); err != nil {
				return written, err
			}
			written = append(written, paths...)
		}
	}
	return written, nil
}

// LoadStudy reads a study written as JSON (`pkie bench pec --placements
// --json`) and recomputes its summaries from the placements, so that it can
// be printed and plotted again.
func LoadStudy(r io.Reader) (*Study, error) {
	var st Study
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return nil, fmt.Errorf("pecbench: reading a study: %w", err)
	}
	if st.Matrix == nil || len(st.Placements) == 0 {
		return nil, fmt.Errorf("pecbench: not a placements study (no matrix or placements)")
	}
	st.Summaries = summarize(st.Placements)
	return &st, nil
}
