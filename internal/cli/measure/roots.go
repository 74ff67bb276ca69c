package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pkie/pkie/internal/chart"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/roots"
)

func Roots(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "roots", "[flags] SCANFILE... (JSON lines from pkie scan; - for stdin)")
	store := fs.String("roots", "mozilla", "trust store: mozilla (x509roots/fallback), system, or a PEM FILE")
	coverage := fs.Float64("coverage", 0.8, "target share of valid sites for the minimal root set")
	top := fs.Int("top", 9, "rows in the ranking tables (the thesis shows 9)")
	export := fs.String("export", "", "write the minimal root set to FILE.pem (a trust store for pkie check --roots)")
	plot := fs.String("plot", "", "write the coverage curves to PREFIX-coverage.svg and .png (thesis Figures 17, 18)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return command.UsageError("name at least one scan file")
	}
	if *coverage <= 0 || *coverage > 1 {
		return command.UsageError("--coverage must be in (0, 1], got %v", *coverage)
	}
	if *top < 1 {
		return command.UsageError("--top must be at least 1")
	}
	if err := command.CheckOutput("--export", *export); err != nil {
		return err
	}
	if err := command.CheckOutput("--plot", *plot); err != nil {
		return err
	}
	var st *roots.Store
	switch *store {
	case "mozilla":
		st, err = roots.Mozilla()
	case "system":
		st, err = roots.System(env.Getenv)
	default:
		st, err = roots.LoadPEM(*store)
	}
	if err != nil {
		return command.UsageError("--roots: %v", err)
	}
	var inputs []roots.Input
	for _, p := range pos {
		if p == "-" {
			inputs = append(inputs, roots.Input{Name: "stdin", R: env.Stdin})
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return command.UsageError("%v", err)
		}
		defer f.Close()
		inputs = append(inputs, roots.Input{Name: p, R: f})
	}
	lo := roots.LoadOptions{Store: st}
	if !*quiet {
		lo.Progress = command.PrefixWriter{Env: env, Prefix: "pkie "}
	}
	d, err := roots.Load(ctx, inputs, lo)
	if err != nil {
		return err
	}
	for _, p := range d.Stats.Problems {
		fmt.Fprintf(env.Stderr, "pkie roots: skipped %s\n", p)
	}
	if d.Stats.Records == 0 {
		return command.UsageError("no scan record loaded from %s (%d lines malformed): these are not pkie scan files (JSON lines from pkie scan)", strings.Join(pos, ", "), d.Stats.Malformed)
	}
	rep := d.Analyze(*coverage)
	// The results are printed even if an output fails: the run is not
	// thrown away for a file that could not be written.
	var outErr error
	if *export != "" {
		outErr = exportRoots(*export, rep, st, *coverage)
		if outErr != nil {
			*export = ""
		}
	}
	if *plot != "" {
		if err := plotCoverage(*plot, rep); err != nil {
			outErr = errors.Join(outErr, fmt.Errorf("--plot: %w", err))
			*plot = ""
		}
	}
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printRoots(env.Stdout, rep, *top, *export, *plot)
	}
	return outErr
}

func exportRoots(path string, rep *roots.Report, st *roots.Store, coverage float64) error {
	if rep.SitesValid == 0 {
		return fmt.Errorf("--export: no site validates against %s: nothing to export", st.Name)
	}
	if rep.Minimal == nil || !rep.Minimal.Reachable {
		return fmt.Errorf("--export: no root set reaches %.0f%% coverage", 100*coverage)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("--export: %w", err)
	}
	err = roots.WritePEM(f, rep.Minimal.Certificates())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--export: %w", err)
	}
	return nil
}

func plotCoverage(prefix string, rep *roots.Report) error {
	curve := func(name string, pts []roots.CoveragePoint) chart.Series {
		s := chart.Series{Name: name, X: []float64{0}, Y: []float64{0}}
		for _, p := range pts {
			s.X = append(s.X, float64(p.K))
			s.Y = append(s.Y, 100*p.Share)
		}
		return s
	}
	series := []chart.Series{curve(fmt.Sprintf("all sites (%d valid)", rep.SitesValid), rep.Coverage)}
	if rep.Companies != nil {
		series = append(series, curve(fmt.Sprintf("one site per company (%d valid)", rep.Companies.SitesValid), rep.Companies.Coverage))
	}
	lo, hi := 0.0, 100.0
	p := &chart.Plot{
		Title:  "Sites that validate when trusting only the k most used roots",
		XLabel: "root CAs trusted (k, most used first)",
		YLabel: "% of valid sites",
		Series: series,
		YMin:   &lo, YMax: &hi,
	}
	if err := p.SaveAll(prefix+"-coverage.svg", prefix+"-coverage.png"); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func printRoots(w io.Writer, rep *roots.Report, top int, export, plot string) {
	l := rep.Load
	fmt.Fprintf(w, "trust store  %s (%d roots)\n", rep.TrustStore, rep.TrustStoreRoots)
	fmt.Fprintf(w, "records      %d loaded, %d malformed lines skipped", l.Records, l.Malformed)
	if len(l.Truncated) > 0 {
		fmt.Fprintf(w, ", %d file(s) ending mid-record", len(l.Truncated))
	}
	fmt.Fprintf(w, "; %d distinct chains: %d verified in full, %d by their leaf against cached paths\n",
		l.DistinctChain, l.Verifications, l.LeafChecks)
	printView(w, "", &rep.View, top, "Table 3", "Figure 17")
	if c := rep.Companies; c != nil {
		fmt.Fprintf(w, "\n== One site per company (thesis Table 5): %d sites removed as another site of a company already counted\n", c.Removed)
		printView(w, "  ", &c.View, top, "Table 5", "Figure 18")
	}
	if len(rep.Vantages) > 0 {
		fmt.Fprintf(w, "\n== Vantages (thesis Table 4)\n")
		for _, v := range rep.Vantages {
			fmt.Fprintf(w, "\n  vantage %q\n", v.Vantage)
			printView(w, "  ", &v.View, top, "", "")
		}
		if a := rep.Agreement; a != nil {
			fmt.Fprintf(w, "\n  %d sites answered at two or more vantages: %d got the same chain everywhere, %d the same anchors\n",
				a.Sites, a.SameChain, a.SameAnchors)
			for _, e := range a.Examples {
				fmt.Fprintf(w, "    differs: %s\n", e)
			}
		}
	}
	if export != "" {
		fmt.Fprintf(w, "\nexported the minimal set to %s\n", export)
	}
	if plot != "" {
		fmt.Fprintf(w, "plots: %s-coverage.svg, %s-coverage.png\n", plot, plot)
	}
}

func printView(w io.Writer, ind string, v *roots.View, top int, table, figure string) {
	var inv []string
	for _, k := range []string{"expired", "unknown_authority", "unparseable", "invalid"} {
		if n := v.Invalid[k]; n > 0 {
			inv = append(inv, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(w, "%ssites        %d total, %d answered, %d valid", ind, v.SitesTotal, v.SitesAnswered, v.SitesValid)
	if len(inv) > 0 {
		fmt.Fprintf(w, " (not valid: %s)", strings.Join(inv, ", "))
	}
	fmt.Fprintln(w)
	title := "root CAs by sites anchored"
	if table != "" {
		title += " (thesis " + table + ")"
	}
	fmt.Fprintf(w, "\n%sTop %d %s\n", ind, min(top, len(v.Ranking)), title)
	fmt.Fprintf(w, "%s  %3s  %-56s %8s %7s\n", ind, "#", "root", "sites", "share")
	for i, r := range v.Ranking[:min(top, len(v.Ranking))] {
		fmt.Fprintf(w, "%s  %3d  %-56s %8d %7s\n", ind, i+1, cut(r.Subject, 56), r.Sites, pct(r.Share))
	}
	fmt.Fprintf(w, "\n%sTop %d CA organisations\n", ind, min(top, len(v.Organisations)))
	for i, o := range v.Organisations[:min(top, len(v.Organisations))] {
		plural := "s"
		if o.Roots == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "%s  %3d  %-56s %8d %7s  (%d root%s)\n", ind, i+1, cut(o.Organisation, 56), o.Sites, pct(o.Share), o.Roots, plural)
	}
	if len(v.Coverage) > 0 {
		title := "Coverage when trusting only the top k roots"
		if figure != "" {
			title += " (thesis " + figure + ")"
		}
		fmt.Fprintf(w, "\n%s%s\n%s ", ind, title, ind)
		for _, p := range v.Coverage {
			if p.K <= 10 || p.K%5 == 0 || p.K == len(v.Coverage) {
				fmt.Fprintf(w, " k=%d %s", p.K, pct(p.Share))
			}
		}
		fmt.Fprintln(w)
	}
	if m := v.Minimal; m != nil {
		fmt.Fprintf(w, "\n%sSmallest root set for %s of valid sites (%d sites):", ind, pct(m.Target), m.Needed)
		if !m.Reachable {
			fmt.Fprintf(w, " not reachable\n")
			return
		}
		fmt.Fprintf(w, " %d roots covering %d (%s)\n", len(m.Roots), m.Covered, pct(m.Share))
		opt := "not proven optimal"
		if m.Optimal {
			opt = "optimal"
		}
		fmt.Fprintf(w, "%s  %s: %s; lower bound %d; the top-k prefix needs k=%d\n", ind, opt, m.Method, m.LowerBound, m.TopK)
		for _, r := range m.Roots {
			fmt.Fprintf(w, "%s    + %-56s %8d more\n", ind, cut(r.Subject, 56), r.Sites)
		}
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
