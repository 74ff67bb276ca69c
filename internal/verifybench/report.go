package verifybench

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkie/pkie/internal/chart"
	"github.com/pkie/pkie/internal/termtext"
)

// cell renders a summary as "mean / p50 / p99" in milliseconds.
func cell(s Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", msStr(s.Mean), msStr(s.P50), msStr(s.P99))
}

// msStr prints d in ms with four significant digits below 10 ms, as the
// experiment's table does to the microsecond.
func msStr(d time.Duration) string {
	v := ms(d)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

func verdict(m Method) string {
	v := string(m.Code)
	if m.Disagreed > 0 {
		v += fmt.Sprintf(" (changed %d×)", m.Disagreed)
	}
	if m.Errors > 0 {
		v += fmt.Sprintf(" (%d errors: %s)", m.Errors, termtext.Escape(m.Error))
	}
	return v
}

// WriteText prints r as tables, times in ms as mean / p50 / p99.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pkie bench verify: %s, GOMAXPROCS %d, load average %.2f at the start, %.2f at the end, %.0f s\n",
		r.GoVersion, r.GOMAXPROCS, r.LoadStart, r.LoadEnd, r.Seconds)
	fmt.Fprintf(w, "trust store: %d roots (%s, the testbed's added); n=%d verifications", r.RootCount, r.RootSource, r.N)
	if len(r.Sites) > 0 {
		fmt.Fprintf(w, "; %d connections per site and method, TLS %s, RTT %v", r.Conns, r.TLS, r.RTT)
	}
	fmt.Fprintln(w)
	for _, b := range r.Backends {
		fmt.Fprintf(w, "  %-12s %s\n", b.Name, termtext.Escape(b.Library))
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "  %-12s MISSING: %s\n", m.Name, termtext.Escape(m.Why))
	}
	if len(r.Sites) > 0 {
		fmt.Fprintln(w, "\nSites (ms, mean / p50 / p99; connection: TCP + TLS handshake over the proxy, the back end verifying inside it;")
		fmt.Fprintln(w, "Servo experiment: the method this back end stands in for, its roots creation / verify call / total verification /")
		fmt.Fprintln(w, "total connection, means in ms, on the Internet of 2017: compare ratios between methods, not absolute times)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "site\tmethod\troots\tchain\tverify\thostname\ttotal\tround trip\tconnection\tServo experiment\tverdict")
		for _, s := range r.Sites {
			fmt.Fprintf(tw, "%s\tnone (ceiling)\t\t\t\t\t\t\t%s\t\t%d sent: %s\n", s.Site, cell(s.Connect), s.Sent, s.Shape)
			for _, m := range s.Methods {
				verifyCell := cell(m.Phases.Verify)
				if m.Phases.Parallel != nil {
					verifyCell = cell(*m.Phases.Parallel) + " ∥ + " + verifyCell
				}
				conn := "–"
				if m.Connect != nil {
					conn = cell(*m.Connect)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Site, m.Backend, cell(m.Phases.Roots), cell(m.Phases.Chain),
					verifyCell, cell(m.Phases.Hostname), cell(m.Phases.Total), cell(m.Phases.RoundTrip), conn, servoCell(m.Paper), verdict(m))
			}
		}
		tw.Flush()
		if r.Comparison != nil {
			r.Comparison.writeText(w, len(r.Sites))
		}
	}
	if len(r.Shapes) > 0 {
		fmt.Fprintln(w, "\nShapes (ms, mean / p50 / p99): one verification per back end (total of its phases), and the path's bare signature checks in Go")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "shape\tpath\tlinks\tmethod\troots\tverify\ttotal\tround trip\tverdict")
		for _, s := range r.Shapes {
			for _, m := range s.Methods {
				verifyCell := cell(m.Phases.Verify)
				if m.Phases.Parallel != nil {
					verifyCell = cell(*m.Phases.Parallel) + " ∥ + " + verifyCell
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Shape.Name, s.Path, s.Links, m.Backend,
					cell(m.Phases.Roots), verifyCell, cell(m.Phases.Total), cell(m.Phases.RoundTrip), verdict(m))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\tsignatures, serial\t\t\t%s\t\t\n", s.Shape.Name, s.Path, s.Links, cell(s.SignaturesSerial))
			fmt.Fprintf(tw, "%s\t%s\t%d\tsignatures, parallel\t\t\t%s\t\tserial/parallel p50 %.2f\n", s.Shape.Name, s.Path, s.Links,
				cell(s.SignaturesParallel), ratio(s.SignaturesSerial.P50, s.SignaturesParallel.P50))
		}
		tw.Flush()
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// SavePlots draws r into dir as verify-sites (the verify call per site
// and back end), verify-connect (connection time per site and method) and
// verify-shapes (one verification per shape and back end beside the
// signature ceilings), each as .svg and .png. It returns the files.
func (r *Report) SavePlots(dir string) ([]string, error) {
	var files []string
	save := func(name string, b *chart.Bars) error {
		paths := []string{filepath.Join(dir, name+".svg"), filepath.Join(dir, name+".png")}
		if err := b.SaveAll(paths...); err != nil {
			return err
		}
		files = append(files, paths...)
		return nil
	}
	if len(r.Sites) > 0 {
		var labels []string
		for _, s := range r.Sites {
			labels = append(labels, shortName(s.Site))
		}
		// Medians: on a shared machine one descheduled sample moves a
		// mean of 200 more than the back ends differ.
		verifyBars := &chart.Bars{Title: "Verify call per site (p50; go-parallel: parallel signatures + crypto/x509)", XLabel: "site", YLabel: "ms", Labels: labels}
		totalBars := &chart.Bars{Title: "Whole verification per site (p50 of all phases, trust store included)", XLabel: "site", YLabel: "ms", Labels: labels}
		connBars := &chart.Bars{Title: fmt.Sprintf("Connection time per site, %v RTT, TLS %s (p50)", r.RTT, r.TLS), XLabel: "site", YLabel: "ms", Labels: labels}
		none := barGroup("none", len(r.Sites))
		for i, s := range r.Sites {
			none.Values[i] = ms(s.Connect.P50)
		}
		connBars.Groups = append(connBars.Groups, none)
		for _, b := range r.Backends {
			v, t, c := barGroup(b.Name, len(r.Sites)), barGroup(b.Name, len(r.Sites)), barGroup(b.Name, len(r.Sites))
			for i, s := range r.Sites {
				for _, m := range s.Methods {
					if m.Backend != b.Name {
						continue
					}
					v.Values[i] = ms(m.Phases.Verify.P50)
					if m.Phases.Parallel != nil {
						v.Values[i] += ms(m.Phases.Parallel.P50)
					}
					t.Values[i] = ms(m.Phases.Total.P50)
					if m.Connect != nil {
						c.Values[i] = ms(m.Connect.P50)
					}
				}
			}
			verifyBars.Groups = append(verifyBars.Groups, v)
			totalBars.Groups = append(totalBars.Groups, t)
			connBars.Groups = append(connBars.Groups, c)
		}
		for _, p := range []struct {
			name string
			b    *chart.Bars
		}{{"verify-sites", verifyBars}, {"verify-sites-total", totalBars}, {"verify-connect", connBars}} {
			if err := save(p.name, p.b); err != nil {
				return files, err
			}
		}
	}
	if len(r.Shapes) > 0 {
		var labels []string
		for _, s := range r.Shapes {
			labels = append(labels, s.Shape.Name)
		}
		b := &chart.Bars{Title: "One verification per chain shape (p50, trust store excluded) and the bare signatures", XLabel: "shape", YLabel: "ms", Labels: labels}
		for _, be := range r.Backends {
			g := barGroup(be.Name, len(r.Shapes))
			for i, s := range r.Shapes {
				for _, m := range s.Methods {
					if m.Backend == be.Name {
						g.Values[i] = ms(m.Phases.Total.P50 - m.Phases.Roots.P50)
					}
				}
			}
			b.Groups = append(b.Groups, g)
		}
		ser, par := barGroup("signatures serial", len(r.Shapes)), barGroup("signatures parallel", len(r.Shapes))
		for i, s := range r.Shapes {
			ser.Values[i], par.Values[i] = ms(s.SignaturesSerial.P50), ms(s.SignaturesParallel.P50)
		}
		b.Groups = append(b.Groups, ser, par)
		if err := save("verify-shapes", b); err != nil {
			return files, err
		}
	}
	return files, nil
}

// barGroup is an all-zero bar group of n values.
func barGroup(name string, n int) chart.BarGroup {
	return chart.BarGroup{Name: strings.TrimSpace(name), Values: make([]float64, n)}
}

// shortName is a site's label in plots, short enough for thirteen to fit
// side by side (the experiment's own table shortens some: wapo, rust).
func shortName(site string) string {
	switch site {
	case "arstechnica":
		return "ars"
	case "duckduckgo":
		return "ddg"
	case "hackernews":
		return "hn"
	case "rust-lang":
		return "rust"
	case "stackoverflow":
		return "so"
	case "washingtonpost":
		return "wapo"
	case "wikipedia":
		return "wiki"
	}
	return site
}

// ms renders d in milliseconds for tables and plots.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
