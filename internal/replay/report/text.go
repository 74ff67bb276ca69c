package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pkie/pkie/internal/termtext"
)

// WriteText prints the report as text tables, the paper's figures beside
// the run's.
func WriteText(out io.Writer, rep *Report) error {
	ew := &errWriter{w: out}
	p := func(format string, a ...any) { fmt.Fprintf(ew, format, a...) }
	r := rep.Run
	p("Replay of %s (%s)\n", termtext.Escape(r.Schedule), termtext.Escape(r.Source))
	state := "ended"
	switch {
	case !r.Ended:
		state = "killed (no end in the record)"
	case r.Interrupted:
		state = "interrupted"
	}
	p("  API %s, connections %s, speed-up %g×, client timeout %v, %d results, %s at trace time %v",
		termtext.Escape(r.API), termtext.Escape(r.Conns), r.Speedup, r.Timeout, r.Results, state, r.Reached.Round(time.Millisecond))
	if r.Wall > 0 {
		p(" after %v", r.Wall.Round(time.Millisecond))
	}
	p("\n  trace seconds %d to %d (%d s); max lag %v trace time", rep.Window.From, rep.Window.Until, rep.Window.Seconds, r.MaxLag.Round(time.Millisecond))
	if r.RecordMaxLag > 0 {
		p(" (the record's: %v wall)", r.RecordMaxLag.Round(time.Millisecond))
	}
	if r.PeakInFlight > 0 {
		p(", peak in flight %d", r.PeakInFlight)
	}
	if r.PeakHeap > 0 {
		p(", peak heap %.1f MB", float64(r.PeakHeap)/1e6)
	}
	p("\n")
	if r.Local != "" {
		p("  local notary: %s\n", termtext.Escape(r.Local))
	}
	for _, w := range rep.Warnings {
		p("WARNING: %s\n", w)
	}

	several := len(rep.Notaries) > 1
	for _, n := range rep.Notaries {
		name := ""
		if several {
			name = fmt.Sprintf(", notary %d (%s)", n.Index, termtext.Escape(n.Name))
		}
		p("\nTable 1: every request by outcome%s\n", name)
		table(ew, n.Outcomes.Rows, n.Outcomes.Total)
	}
	if several {
		p("\nTable 1: every request by outcome, all %d notaries\n", len(rep.Notaries))
		table(ew, rep.Total.Rows, rep.Total.Total)
	}
	t := rep.Targets
	p("  targets: %d, of which %d dead; %d results for dead targets, %d of them 503; %d 503s for live targets\n",
		t.Targets, t.Dead, t.ToDead, t.UnavailableDead, t.UnavailableLive)

	for _, n := range rep.Notaries {
		name := ""
		if several {
			name = fmt.Sprintf(", notary %d (%s)", n.Index, termtext.Escape(n.Name))
		}
		p("\nTable 2: cache utilisation over successful requests and client cache hits%s\n", name)
		table(ew, n.Cache.Rows, n.Cache.Total)

		p("\nTable 3: time to reach each notary cache utilisation level%s\n", name)
		p("  %-5s  %8s  %6s\n", "level", "this run", "paper")
		for _, l := range n.Utilisation {
			got := "never"
			if l.Reached {
				got = fmt.Sprintf("%d s", *l.Seconds)
			}
			paper := ""
			if l.PaperSeconds != nil {
				paper = fmt.Sprintf("%d s", *l.PaperSeconds)
			}
			p("%s\n", strings.TrimRight(fmt.Sprintf("  %-5s  %8s  %6s", fmt.Sprintf("%d%%", l.Percent), got, paper), " "))
		}

		p("\nLatency by cache condition%s\n", name)
		p("  %-10s  %9s  %8s  %8s  %8s  %8s  %8s\n", "condition", "requests", "mean ms", "p50 ms", "p90 ms", "p99 ms", "max ms")
		for _, c := range []string{"hit", "miss", "successful"} {
			l := n.Latency[c]
			p("  %-10s  %9d  %8.1f  %8.1f  %8.1f  %8.1f  %8.1f\n", c, l.N, l.MeanMS, l.P50MS, l.P90MS, l.P99MS, l.MaxMS)
		}

		d := n.Delay
		p("\nExpected validation delay per connection%s: %s\n", name, d.Formula)
		if !d.Defined {
			p("  not defined: no successful request and no client cache hit\n")
		} else {
			p("  shares (Table 2 without unknown cache): p_client %.4f, p_hit %.4f, p_miss %.4f\n", d.PClient, d.PHit, d.PMiss)
			p("  (a) this run's mean latencies: %.4f·%.1f + %.4f·%.1f + %.4f·%.1f = %.1f ms (L_client from --local-cost)\n",
				d.PClient, d.Measured.ClientMS, d.PHit, d.Measured.HitMS, d.PMiss, d.Measured.MissMS, d.Measured.DelayMS)
			p("  (b) the paper's Table 4 continental costs: %.4f·108 + %.4f·743 + %.4f·1006 = %.1f ms\n",
				d.PClient, d.PHit, d.PMiss, d.PaperCosts.DelayMS)
		}
	}
	pd := rep.Paper
	p("  the paper's own (Table 2 shares, Table 4 costs): %.4f·108 + %.4f·743 + %.4f·1006 = %.1f ms (§5 states %.0f ms)\n",
		pd.PClient, pd.PHit, pd.PMiss, pd.Costs.DelayMS, pd.Stated)

	o := rep.Overhead
	p("\nNetwork overhead (Notary Bytes / SSL Bytes)\n")
	if !o.Measured {
		p("  not measured: the record has no byte sample\n")
	} else {
		p("  notary bytes %d, counted at the %s from the run's start to its last sample (wall %v): TCP payload both ways, no IP or TCP headers\n",
			o.NotaryBytes, termtext.Escape(o.Where), o.Wall.Round(time.Millisecond))
		p("  probe bytes %d (the synthetic world's listeners: the notary's probes of the targets)\n", o.ProbeBytes)
		p("  HTTPS bytes of the trace seconds replayed: %.0f\n", o.HTTPSBytes)
		all := ""
		if o.Notaries > 1 {
			all = fmt.Sprintf(", all %d notaries together", o.Notaries)
		}
		if o.HTTPSBytes > 0 {
			p("  overhead %.4f%% (with probes %.4f%%%s); paper %.2f%% (1.73 GB / 2.77 TB, one notary; its notary bytes were whole captured frames, headers included)\n",
				o.Percent, o.PercentWithProbes, all, o.PaperPercent)
		}
		p("  %.0f notary bytes per request sent\n", o.BytesPerRequest)
		if o.Notaries > 1 && len(o.PerNotary) == 0 {
			p("  per notary: not known (the record has only the sum); the paper's figure is one notary's\n")
		}
		for _, n := range o.PerNotary {
			p("  notary %d (%s): %d bytes, overhead %.4f%%, %.0f bytes per request sent\n",
				n.Index, termtext.Escape(n.Name), n.NotaryBytes, n.Percent, n.BytesPerRequest)
		}
	}
	return ew.err
}

func table(w io.Writer, rows []Row, total int64) {
	width := len("total")
	labels := make([]string, len(rows))
	for i, r := range rows {
		labels[i] = r.Label
		if r.Part {
			labels[i] = "  " + r.Label
		}
		width = max(width, utf8.RuneCountInString(labels[i]))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
	fmt.Fprintf(w, "  %s  %9s  %7s  %9s  %7s\n", pad(""), "count", "percent", "paper", "paper %")
	for i, r := range rows {
		paper, paperPct := "", ""
		if r.Paper != nil {
			paper, paperPct = strconv.FormatInt(r.Paper.Count, 10), r.Paper.Percent
		}
		line := fmt.Sprintf("  %s  %9d  %6.1f%%  %9s  %7s", pad(labels[i]), r.Count, r.Percent, paper, paperPct)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "  %s  %9d\n", pad("total"), total)
}

// errWriter keeps the first write error so the printing above need not
// check each.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
