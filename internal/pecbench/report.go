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
		fmt.Fprintf(w, "  %-17s %-5s %9s %7s %10s %8s %8s %6s %10s %7s %7s %9s %9s\n", "", "", "sessions", "window", "conn/s", "p50 ms", "p99 ms", "cores", "conn/cpu-s", "not ok", "errors", "submit B", "proofs B")
		for _, x := range []*Throughput{t.Cloud, t.CloudNewLeaves, t.Ceiling} {
			if x == nil {
				continue
			}
			fmt.Fprintf(w, "  %-17s %-5s %9d %7d %10.0f %8.2f %8.2f %6.2f %10.0f %7d %7d %9d %9d\n", x.Name, x.Transport, x.Sessions, x.Window, x.PerSecond, x.P50ms, x.P99ms,
				x.CPUCores, x.PerCPUSecond, x.NotOK, x.SessionErrors, x.SubmitBytes, x.ProofBytes)
		}
		met := "met"
		if !t.MetTarget {
			met = "NOT met"
		}
		fmt.Fprintf(w, "  best of %d runs each; cloud / ceiling = %.2f (per CPU second %.2f); target >= %.0f/s and >= %.1f of the ceiling: %s\n",
			runsOf(t.Runs, t.Cloud.Name), t.Ratio, t.RatioPerCPU, t.TargetPerSecond, t.TargetRatio, met)
		if t.CloudNewLeaves != nil {
			fmt.Fprintf(w, "  new leaves: every submission a different logged leaf (%d-byte chains, not padded) past the cloud's %d-certificate parse cache; / ceiling = %.2f\n",
				t.NewLeafChainBytes, benchCertCache, t.RatioNewLeaves)
		}
		if t.CloudSCTs != nil {
			fmt.Fprintf(w, "  with SCTs: a %d-byte chain whose leaf embeds %d SCTs from listed logs, their inclusion evidence cached by the ct prover\n",
				t.SCTChainBytes, t.SCTs)
			for _, x := range []*Throughput{t.CloudSCTs, t.CeilingSCTs} {
				fmt.Fprintf(w, "  %-17s %-5s %9d %7d %10.0f %8.2f %8.2f %6.2f %10.0f %7d %7d %9d %9d\n", x.Name, x.Transport, x.Sessions, x.Window, x.PerSecond, x.P50ms, x.P99ms,
					x.CPUCores, x.PerCPUSecond, x.NotOK, x.SessionErrors, x.SubmitBytes, x.ProofBytes)
			}
			fmt.Fprintf(w, "  with SCTs: cloud / its echo ceiling = %.2f\n", t.RatioSCTs)
		}
		fmt.Fprintf(w, "  paper: %.0f/s on a 2-vCPU t2.medium\n", t.PaperPerSecond)
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
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "\nlatency, client-only PEC over loopback delay proxies: time to a usable connection, %d full handshakes per point\n", l.Handshakes)
		fmt.Fprintf(w, "  %9s %9s %12s %12s %12s %12s %10s %8s\n", "server", "cloud", "without p50", "without p99", "with p50", "with p99", "inflation", "expected")
		for _, p := range l.Points {
			fmt.Fprintf(w, "  %6.0f ms %6.0f ms %9.1f ms %9.1f ms %9.1f ms %9.1f ms %9.0f%% %7.0f%%\n", p.ServerRTTms, p.CloudRTTms,
				p.Without.P50ms, p.Without.P99ms, p.With.P50ms, p.With.P99ms, 100*p.Inflation, 100*p.Expected)
		}
		fmt.Fprintf(w, "  paper, Figure 5: client-only inflation under 1%% for 85%% of placements with the nearest cloud (smart selection)\n")
	}
	if f := r.Failover; f != nil {
		fmt.Fprintf(w, "\nfailover to the second cloud, %d trials; pings every %.0f ms, %d missed = dead\n", f.Trials, f.KeepaliveMS, f.MissedPings)
		fmt.Fprintf(w, "  %-44s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "max ms")
		for _, x := range []struct {
			name string
			d    Dist
		}{{"primary stopped: failure to proofs delivered", f.Stopped}, {"  client's own failover time", f.StoppedClient},
			{"primary silent: failure to proofs delivered", f.Silent}, {"  client's own failover time", f.SilentClient}} {
			fmt.Fprintf(w, "  %-44s %9.1f %9.1f %9.1f\n", x.name, x.d.P50ms, x.d.P99ms, x.d.MaxMS)
		}
	}
	if l := r.Loss; l != nil {
		fmt.Fprintf(w, "\nproof delivery over QUIC, %.0f ms RTT, %.0f%% of datagrams dropped each way (%d of %d dropped)\n",
			l.RTTms, 100*l.Loss, l.Dropped, l.Datagrams)
		fmt.Fprintf(w, "  %-12s %6s %9s %9s %9s\n", "", "n", "p50 ms", "p99 ms", "max ms")
		fmt.Fprintf(w, "  %-12s %6d %9.1f %9.1f %9.1f\n", "no loss", l.Clean.N, l.Clean.P50ms, l.Clean.P99ms, l.Clean.MaxMS)
		fmt.Fprintf(w, "  %-12s %6d %9.1f %9.1f %9.1f\n", "loss", l.Lossy.N, l.Lossy.P50ms, l.Lossy.P99ms, l.Lossy.MaxMS)
		fmt.Fprintf(w, "  added: p50 %+.1f ms, p99 %+.1f ms; not delivered within the budget: %d\n", l.AddedP50, l.AddedP99, l.Failed)
	}
	if b := r.Blocked; b != nil {
		fmt.Fprintf(w, "\nUDP blocked: auto transport (TCP raced after %.0f ms), %d trials, registered over %v\n", b.FallbackDelayMS, b.Trials, b.Transports)
		fmt.Fprintf(w, "  %-36s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "max ms")
		for _, x := range []struct {
			name string
			d    Dist
		}{{"UDP blocked: registered (TCP)", b.Register}, {"UDP blocked: first proofs delivered", b.Deliver},
			{"UDP open: registered (QUIC)", b.OpenRegister}, {"UDP open: first proofs delivered", b.OpenDeliver}} {
			fmt.Fprintf(w, "  %-36s %9.1f %9.1f %9.1f\n", x.name, x.d.P50ms, x.d.P99ms, x.d.MaxMS)
		}
	}
}

// runsOf counts the runs of one target.
func runsOf(runs []*Throughput, name string) int {
	n := 0
	for _, r := range runs {
		if r.Name == name {
			n++
		}
	}
	return n
}
