package obcbench

import (
	"fmt"
	"io"
	"strings"

	"github.com/pkie/pkie/internal/chart"
)

// WriteText prints the report as tables beside the paper's figures.
func (r *Report) WriteText(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s; load average %.2f at the start, %.2f at the end; %.0f s\n",
		m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, r.Seconds)
	if len(r.Gen) > 0 {
		fmt.Fprintf(w, "\nkey and certificate generation (Origin-Bound Certificates, Figure 8: NSS), ms p50 / p90\n")
		fmt.Fprintf(w, "  %-11s %17s %17s %17s %17s %17s %17s %10s\n", "alg", "key", "cert (sign)", "key + cert", "store 1st visit", "… with pool", "store return", "paper")
		for _, g := range r.Gen {
			paper := "-"
			if g.PaperMs > 0 {
				paper = fmt.Sprintf("%.0f", g.PaperMs)
			}
			fmt.Fprintf(w, "  %-11s %17s %17s %17s %17s %17s %17s %10s\n", g.Alg, pq(&g.KeyMs), pq(&g.CertMs), pq(&g.TotalMs),
				pq(g.StoreFirstMs), pq(g.StoreFirstPooledMs), pq(g.StoreReturnMs), paper)
		}
	}
	if t := r.Terminator; t != nil {
		where := "in its own process"
		if !t.Separate {
			where = "in this process (CPU and memory include the load generator and backend)"
		}
		fmt.Fprintf(w, "\nTLS terminator (Figures 9–14): %.0f requests/s for %.0f s after %.0f s warm-up, %.0f%% on resumed sessions, %d clients; terminator %s\n",
			t.Rate, t.Seconds, t.Warmup, 100*t.Resumed, t.Clients, where)
		fmt.Fprintf(w, "  backend: %s\n", t.Backend)
		c := t.Ceiling
		fmt.Fprintf(w, "  ceiling, same run: %.0f full handshakes/s without client certificates (%d workers, terminator %.2f cores: %.0f per terminator CPU second)\n",
			c.PerSecond, c.Workers, c.TerminatorCPU, c.PerCPUSecond)
		var base *TerminatorCase
		for i := range t.Cases {
			if t.Cases[i].Case == "none" {
				base = &t.Cases[i]
			}
		}
		fmt.Fprintf(w, "  %-11s %8s %6s %6s %9s %8s %8s %8s %9s %13s %8s %10s %17s %7s %10s\n", "client key", "req/s", "errors", "skip",
			"resumed", "RSS MB", "heap MB", "CPU", "loadgen", "added p50/p99", "<1 ms", "+waits p50", "seen keys", "paper", "paper CPU")
		for _, k := range t.Cases {
			resumed := 0.0
			if n := k.SeenResumed + k.SeenFresh; n > 0 {
				resumed = float64(k.SeenResumed) / float64(n)
			}
			var seen []string
			for alg, n := range k.Seen {
				seen = append(seen, fmt.Sprintf("%s %d", alg, n))
			}
			paperMem, paperCPU := "-", "-"
			if k.PaperMemGB > 0 {
				paperMem = fmt.Sprintf("%.3f GB", k.PaperMemGB)
				paperCPU = fmt.Sprintf("%.2f", k.PaperCPUCores)
			}
			fmt.Fprintf(w, "  %-11s %8.1f %6d %6d %8.1f%% %8.1f %8.1f %8.3f %9.3f %6.2f/%-6.2f %7.1f%% %10.2f %17s %7s %10s\n",
				k.Case, k.AchievedRate, k.Errors, k.Skipped, 100*resumed, k.RSSMB, k.HeapMB, k.CPUCores, k.LoadGenCores,
				k.OverheadMs.P50, k.OverheadMs.P99, 100*k.Under1ms, k.WallMs.P50, strings.Join(seen, ", "), paperMem, paperCPU)
		}
		if base != nil && base.RSSMB > 0 && base.CPUCores > 0 {
			fmt.Fprintf(w, "  against no client certificate (measured; paper):\n")
			for _, k := range t.Cases {
				if k.Case == "none" {
					continue
				}
				fmt.Fprintf(w, "    %-11s RSS %+.1f%%, heap %+.1f%%, CPU %+.1f%%", k.Case, pct(k.RSSMB, base.RSSMB), pct(k.HeapMB, base.HeapMB), pct(k.CPUCores, base.CPUCores))
				if k.PaperMemGB > 0 {
					fmt.Fprintf(w, "; paper: memory %+.1f%%, CPU %+.1f%%", pct(k.PaperMemGB, paperMemGB["none"]), pct(k.PaperCPUCores, paperCPUCores["none"]))
				}
				fmt.Fprintln(w)
			}
		}
		fmt.Fprintf(w, "  added latency histogram (requests per bin, ms):\n  %-11s", "")
		for i, e := range HistogramEdgesMs {
			fmt.Fprintf(w, " %8s", binLabel(i, e))
		}
		fmt.Fprintf(w, " %8s\n", fmt.Sprintf("≥%g", HistogramEdgesMs[len(HistogramEdgesMs)-1]))
		for _, k := range t.Cases {
			fmt.Fprintf(w, "  %-11s", k.Case)
			for _, n := range k.Histogram {
				fmt.Fprintf(w, " %8d", n)
			}
			fmt.Fprintln(w)
		}
	}
}

func binLabel(i int, e float64) string {
	if i == 0 {
		return fmt.Sprintf("<%g", e)
	}
	return fmt.Sprintf("%g-%g", HistogramEdgesMs[i-1], e)
}

func pct(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return 100 * (x/base - 1)
}

// pq prints p50 / p90, or "-".
func pq(s *Stats) string {
	if s == nil || s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f", s.P50, s.P90)
}

// SavePlots draws the report's figures, each as PREFIX-NAME.svg and .png:
// generation time per algorithm (gen), the terminator's memory and CPU
// (memory, cpu) and its added-latency histogram per client key
// (latency-CASE). It returns the files written.
func (r *Report) SavePlots(prefix string) ([]string, error) {
	var written []string
	save := func(name string, b *chart.Bars) error {
		paths := []string{prefix + "-" + name + ".svg", prefix + "-" + name + ".png"}
		if err := b.SaveAll(paths...); err != nil {
			return err
		}
		written = append(written, paths...)
		return nil
	}
	if len(r.Gen) > 0 {
		b := &chart.Bars{Title: "Origin-bound key and certificate generation (median)", XLabel: "client key", YLabel: "time (ms)"}
		key, cert, pooled := group("key generation"), group("certificate signing"), group("store first visit, pooled key")
		for _, g := range r.Gen {
			b.Labels = append(b.Labels, g.Alg)
			key.Values = append(key.Values, g.KeyMs.P50)
			cert.Values = append(cert.Values, g.CertMs.P50)
			if g.StoreFirstPooledMs != nil {
				pooled.Values = append(pooled.Values, g.StoreFirstPooledMs.P50)
			}
		}
		b.Groups = []chart.BarGroup{key, cert}
		if len(pooled.Values) == len(b.Labels) {
			b.Groups = append(b.Groups, pooled)
		}
		if err := save("gen", b); err != nil {
			return written, err
		}
	}
	if t := r.Terminator; t != nil && len(t.Cases) > 0 {
		mem := &chart.Bars{Title: fmt.Sprintf("TLS terminator memory at %.0f requests/s (mean RSS)", t.Rate), XLabel: "client key", YLabel: "RSS (MB)", Format: "%.1f"}
		cpu := &chart.Bars{Title: fmt.Sprintf("TLS terminator CPU at %.0f requests/s", t.Rate), XLabel: "client key", YLabel: "CPU (cores)", Format: "%.3f"}
		mg, cg := group("RSS"), group("CPU")
		for _, k := range t.Cases {
			mem.Labels = append(mem.Labels, k.Case)
			cpu.Labels = append(cpu.Labels, k.Case)
			mg.Values = append(mg.Values, k.RSSMB)
			cg.Values = append(cg.Values, k.CPUCores)
		}
		mem.Groups, cpu.Groups = []chart.BarGroup{mg}, []chart.BarGroup{cg}
		if err := save("memory", mem); err != nil {
			return written, err
		}
		if err := save("cpu", cpu); err != nil {
			return written, err
		}
		var labels []string
		for i, e := range HistogramEdgesMs {
			labels = append(labels, binLabel(i, e))
		}
		labels = append(labels, fmt.Sprintf("≥%g", HistogramEdgesMs[len(HistogramEdgesMs)-1]))
		for _, k := range t.Cases {
			g := group(k.Case)
			n := 0
			for _, c := range k.Histogram {
				n += c
			}
			for _, c := range k.Histogram {
				g.Values = append(g.Values, 100*float64(c)/float64(max(n, 1)))
			}
			h := &chart.Bars{Title: fmt.Sprintf("Latency the terminator added, client key %s (%d requests)", k.Case, n),
				XLabel: "added latency (ms)", YLabel: "requests (%)", Labels: labels, Groups: []chart.BarGroup{g}, Format: "%.1f"}
			if err := save("latency-"+k.Case, h); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// group returns an empty bar group named name.
func group(name string) chart.BarGroup { return chart.BarGroup{Name: name} }
