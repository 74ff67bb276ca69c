package soak

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteText prints the report as plain-text tables.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "good traffic: %.0f req/s for %.0f s from %s, every request on a new connection\n\n", r.Rate, r.DurationSeconds, goodSource)
	fmt.Fprintf(w, "%-8s %7s %7s %9s %9s %9s\n", "service", "sent", "ok", "success", "p50 ms", "p99 ms")
	for _, s := range r.Services {
		fmt.Fprintf(w, "%-8s %7d %7d %8.2f%% %9.1f %9.1f\n", s.Service, s.Sent, s.Succeeded, 100*s.SuccessRate, s.P50ms, s.P99ms)
	}
	fmt.Fprintf(w, "\n%-16s %7s", "phase", "seconds")
	for _, s := range r.Services {
		fmt.Fprintf(w, " %9s %9s", s.Service+" ok", "p99 ms")
	}
	fmt.Fprintln(w)
	for i, p := range r.Phases {
		fmt.Fprintf(w, "%-16s %7.0f", p.Name, p.EndS-p.StartS)
		for _, s := range r.Services {
			ps := s.Phases[i]
			fmt.Fprintf(w, " %8.2f%% %9.1f", 100*ps.SuccessRate, ps.P99ms)
		}
		fmt.Fprintln(w)
	}
	for _, s := range r.Services {
		if len(s.Failures) == 0 {
			continue
		}
		var fs []string
		for k, n := range s.Failures {
			fs = append(fs, fmt.Sprintf("%s ×%d", k, n))
		}
		sort.Strings(fs)
		fmt.Fprintf(w, "%s failures: %s\n", s.Service, strings.Join(fs, ", "))
	}
	fmt.Fprintf(w, "\n%-8s %-22s %7s %7s %9s %9s %9s\n", "service", "kind", "sent", "ok", "success", "p50 ms", "p99 ms")
	for _, k := range r.Kinds {
		fmt.Fprintf(w, "%-8s %-22s %7d %7d %8.2f%% %9.1f %9.1f\n", k.Service, k.Kind, k.Sent, k.Succeeded, 100*k.SuccessRate, k.P50ms, k.P99ms)
	}
	if len(r.Attacks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nattacks")
	for _, a := range r.Attacks {
		fmt.Fprintf(w, "  %s (%s from %s; phases: %s)\n", a.Name, a.Target, a.Source, strings.Join(a.Phases, ", "))
		fmt.Fprintf(w, "    %s: %s\n", a.What, a.Achieved)
		var cs []string
		for _, c := range a.Counters {
			cs = append(cs, fmt.Sprintf("%s=%d", c.Name, c.Value))
		}
		fmt.Fprintf(w, "    %s\n", strings.Join(cs, " "))
	}
}
