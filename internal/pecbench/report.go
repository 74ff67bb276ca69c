package pecbench

import (
	"fmt"
	"io"
)

// WriteText prints the report as tables, each figure beside its ceiling and
// the paper's.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pkie bench pec: %s/%s, %d CPUs, %s; %.1f s\n", r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.GoVersion, r.Seconds)
	if t := r.Throughput; t != nil {
		fmt.Fprintf(w, "\nthroughput: connections proved per second (CT + revocation, logged and not revoked), %d-byte chains of %d certificates; trees of %d certificates and %d revocations\n",
			t.ChainBytes, t.ChainCerts, t.TreeSizes[0], t.TreeSizes[1])
		fmt.Fprintf(w, "  %-14s %-5s %9s %7s %10s %8s %8s %7s %7s %9s %9s\n", "", "", "sessions", "window", "conn/s", "p50 ms", "p99 ms", "not ok", "errors", "submit B", "proofs B")
		for _, x := range []*Throughput{t.Cloud, t.Ceiling} {
			fmt.Fprintf(w, "  %-14s %-5s %9d %7d %10.0f %8.2f %8.2f %7d %7d %9d %9d\n", x.Name, x.Transport, x.Sessions, x.Window, x.PerSecond, x.P50ms, x.P99ms, x.NotOK, x.SessionErrors, x.SubmitBytes, x.ProofBytes)
		}
		met := "met"
		if !t.MetTarget {
			met = "NOT met"
		}
		fmt.Fprintf(w, "  cloud / ceiling = %.2f; target >= %.0f/s and >= %.1f of the ceiling: %s; paper: %.0f/s on a 2-vCPU t2.medium\n",
			t.Ratio, t.TargetPerSecond, t.TargetRatio, met, t.PaperPerSecond)
		if t.Cloud.FirstError != "" {
			fmt.Fprintf(w, "  first cloud session error: %s\n", t.Cloud.FirstError)
		}
	}
	if c := r.ClientCost; c != nil {
		fmt.Fprintf(w, "\nclient cost per connection: CT presence + revocation absence proofs, trees of %d and %d keys (depths %d and %d)\n",
			c.CTLeaves, c.RevokedLeaves, c.CTDepth, c.RevokedDepth)
		fmt.Fprintf(w, "  %-46s %10s\n", "", "p50 us")
		fmt.Fprintf(w, "  %-46s %10.1f   (%.1f× the ceiling)\n", "warm: heads verified before, paths only", c.WarmUsP50, c.WarmOverCeiling)
		fmt.Fprintf(w, "  %-46s %10.1f\n", "cold: both signed heads opened every time", c.ColdUsP50)
		fmt.Fprintf(w, "  %-46s %10.2f\n", "ceiling: the paths' SHA-256 calls alone", c.CeilingUsP50)
		if v := c.Verifier; v != nil {
			fmt.Fprintf(w, "  %-46s %10s %10s\n", "client verifiers (ct, revocation), bench trees", "p50 us", "p99 us")
			fmt.Fprintf(w, "  %-46s %10.1f %10.1f\n", fmt.Sprintf("warm (depths %d and %d)", v.Depths[0], v.Depths[1]), v.WarmUsP50, v.WarmUsP99)
			fmt.Fprintf(w, "  %-46s %10.1f %10.1f\n", "cold: a fresh verifier per connection", v.ColdUsP50, v.ColdUsP99)
		}
		fmt.Fprintf(w, "  paper (averages, every time): CT presence %.0f us + revocation absence %.0f us = %.0f us per connection\n",
			c.PaperCTPresenceUs, c.PaperRevAbsenceUs, c.PaperConnectionUs)
		fmt.Fprintf(w, "  Ed25519 verify here %.1f us; proofs %.0f bytes per connection + a %d-byte signed head once per root\n",
			c.Ed25519UsP50, c.ProofBytes, c.HeadBytes)
	}
}
