package measure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/overhead"
)

func Overhead(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "overhead", "[flags] URL…\n\nDownloads each page (HTML, images, scripts, stylesheets, and what CSS references:\n"+
		"url() and @import; following redirects; scripts are not run) N times over http:// and\n"+
		"N times over https:// and reports what HTTPS costs.")
	runs := fs.Int("n", overhead.DefaultRuns, "page loads per site, scheme and mode")
	mode := fs.String("mode", "both", "connection mode: persistent, nonpersistent or both")
	plot := fs.String("plot", "", "write plots to PREFIX-*.svg and PREFIX-*.png")
	asJSON := fs.Bool("json", false, "print raw results and aggregates as JSON")
	objects := fs.Bool("objects", false, "with --json, include every request of every load")
	allowPrivate := fs.Bool("allow-private", false, "allow loopback, private and other non-public addresses")
	resolve := command.AddResolveFlags(fs, "a site; the port asked for is the URL's, 80 or 443", false)
	concurrency := fs.Int("concurrency", overhead.DefaultConcurrency, "sites measured at once")
	parallel := fs.Int("parallel", overhead.DefaultParallel, "objects fetched at once within one page load")
	timeout := fs.Duration("timeout", overhead.DefaultPageTimeout, "limit for one whole page load")
	maxObjBytes := fs.Int64("max-object-bytes", overhead.DefaultMaxObjectBytes, "largest response body accepted")
	maxPageBytes := fs.Int64("max-page-bytes", overhead.DefaultMaxPageBytes, "largest page (all objects together) accepted")
	maxObjects := fs.Int("max-objects", overhead.DefaultMaxObjects, "sub-resources fetched per page (CSS-referenced ones included)")
	noCSS := fs.Bool("no-css", false, "fetch only what the HTML's markup references, not what stylesheets, <style> blocks and style attributes reference")
	roots := fs.String("roots", "", "PEM file of root certificates to trust instead of the system's")
	insecure := fs.Bool("insecure", false, "do not validate certificates (still measures the handshake)")
	tlsMax := fs.String("tls-max", "1.3", "highest TLS version to offer: 1.2 or 1.3")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return command.UsageError("want at least one URL")
	}
	switch {
	case *runs < 1 || *runs > 100000:
		return command.UsageError("-n %d: want 1 to 100000 runs", *runs)
	case *concurrency < 1 || *concurrency > 1024:
		return command.UsageError("--concurrency %d: want 1 to 1024", *concurrency)
	case *parallel < 1 || *parallel > 64:
		return command.UsageError("--parallel %d: want 1 to 64", *parallel)
	case *timeout <= 0:
		return command.UsageError("--timeout %v: want a positive duration", *timeout)
	case *maxObjBytes < 1 || *maxPageBytes < 1 || *maxObjects < 1:
		return command.UsageError("--max-object-bytes, --max-page-bytes and --max-objects must be positive")
	}
	modes, err := overhead.ParseMode(*mode)
	if err != nil {
		return command.UsageError("--mode: %v", err)
	}
	opts := overhead.Options{
		Runs: *runs, Modes: modes, Concurrency: *concurrency, Parallel: *parallel, PageTimeout: *timeout,
		MaxObjectBytes: *maxObjBytes, MaxPageBytes: *maxPageBytes, MaxObjects: *maxObjects, IgnoreCSS: *noCSS,
		AllowPrivate: *allowPrivate, InsecureSkipVerify: *insecure, KeepObjects: *objects && *asJSON,
		Progress: env.Stderr,
	}
	switch *tlsMax {
	case "1.2":
		opts.MaxTLSVersion = tls.VersionTLS12
	case "1.3":
		opts.MaxTLSVersion = tls.VersionTLS13
	default:
		return command.UsageError("--tls-max %q: want 1.2 or 1.3", *tlsMax)
	}
	if *roots != "" {
		pem, err := os.ReadFile(*roots)
		if err != nil {
			return command.UsageError("--roots: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return command.UsageError("--roots %s: no PEM certificates found", *roots)
		}
		opts.RootCAs = pool
	}
	if !resolve.Empty() {
		opts.Lookup = resolve.Lookup
	}
	if err := command.CheckOutput("--plot", *plot); err != nil {
		return err
	}
	var sites []overhead.Site
	for _, p := range pos {
		s, err := overhead.ParseSite(p)
		if err != nil {
			return command.UsageError("%v", err)
		}
		sites = append(sites, s)
	}

	rep := overhead.New(opts).Measure(ctx, sites)
	// Results first: a plot that cannot be written must not lose the run.
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printOverhead(env, rep)
	}
	if *plot != "" {
		for _, p := range overhead.Plots(rep) {
			base := *plot + "-" + p.Name
			if err := p.Plot.SaveAll(base+".svg", base+".png"); err != nil {
				return fmt.Errorf("--plot: %w (the results above are complete)", err)
			}
			fmt.Fprintf(env.Stderr, "overhead: wrote %s.svg and .png (thesis figure %s)\n", base, p.Figure)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	measured := 0
	for _, m := range rep.Aggregates.Modes {
		measured = max(measured, m.All.Sites)
	}
	if measured == 0 {
		return command.Negative() // every site unresponsive
	}
	return nil
}

func printOverhead(env *command.Env, rep *overhead.Report) {
	w := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	f := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	fmt.Fprintf(env.Stdout, "HTTPS overhead over HTTP, %d runs per site, scheme and mode (%s)\n\n", rep.Runs, rep.Finished.Sub(rep.Started).Round(time.Second))
	fmt.Fprintln(w, "mode\tsites\tHTTP ms\tHTTPS ms\toverhead ms\toverhead %\tsite median ms\tp75 ms\tp90 ms\tsite median %\t")
	for _, m := range rep.Aggregates.Modes {
		for _, row := range []struct {
			label string
			o     overhead.Overall
		}{{string(m.Mode), m.All}, {string(m.Mode) + ", no redirects", m.WithoutRedirects}} {
			o := row.o
			if o.Sites == 0 {
				fmt.Fprintf(w, "%s\t0\t\t\t\t\t\t\t\t\t\n", row.label)
				continue
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.label, o.Sites, f(o.HTTPMeanMS), f(o.HTTPSMeanMS),
				f(o.OverheadMS), f(o.OverheadPct), f(o.SiteOverheadMS.Median), f(o.SiteOverheadMS.P75), f(o.SiteOverheadMS.P90), f(o.SiteOverheadPct.Median))
		}
	}
	w.Flush()
	if len(rep.Aggregates.Sites) > 0 {
		fmt.Fprintln(env.Stdout)
		fmt.Fprintln(w, "site\tmode\truns\tHTTP ms\tHTTPS ms\toverhead ms\t%\tp50 ms\tp75 ms\tp90 ms\trequests\tfrom CSS\thandshakes\tKiB\tredirect\t")
		for _, s := range rep.Aggregates.Sites {
			redir := ""
			if s.Redirected {
				redir = "yes"
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Site, s.Mode, s.Pairs, f(s.HTTPMS.Mean), f(s.HTTPSMS.Mean),
				f(s.MeanOverheadMS), f(s.MeanOverheadPct), f(s.OverheadMS.Median), f(s.OverheadMS.P75), f(s.OverheadMS.P90),
				f(s.Requests), f(s.CSSObjects), f(s.Handshakes), f(s.HTTPSBytes/1024), redir)
		}
		w.Flush()
	}
	if len(rep.Unresponsive) > 0 {
		fmt.Fprintf(env.Stdout, "\nunresponsive (%d):\n", len(rep.Unresponsive))
		for _, u := range rep.Unresponsive {
			where := strings.TrimSpace(u.Scheme + " " + string(u.Mode))
			fmt.Fprintf(env.Stdout, "  %s (%s): %s\n", u.Site, where, u.Reason)
		}
	}
}
