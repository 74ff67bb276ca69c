package ctbench

import (
	"fmt"
	"io"
)

// WriteText prints the result as the docs' tables read it: each figure
// beside its same-run ceiling and, for proofs, the PEC paper's Table 1.
func (r *Result) WriteText(w io.Writer) {
	how := fmt.Sprintf("generated in %.1f s", r.Log.GenerateSeconds)
	if r.Log.Reused {
		how = fmt.Sprintf("reused; generated earlier in %.1f s", r.Log.GenerateSeconds)
	}
	fmt.Fprintf(w, "synthetic static-ct-api log: %d entries (%s); hash tiles %.2f GB stored, data tiles %.2f GB\n",
		r.Entries, how, float64(r.Log.HashTileBytes)/1e9, float64(r.Log.DataTileBytes)/1e9)
	fmt.Fprintf(w, "ingest over loopback HTTP, %d parallel tile fetches:\n", r.Parallel)
	fmt.Fprintf(w, "  %-44s %12s %10s %10s\n", "", "entries/s", "MB/s", "seconds")
	c := r.Ceiling
	fmt.Fprintf(w, "  %-44s %12.0f %10.1f %10.1f", "ceiling: GET + parse + leaf hash + key hash", c.EntriesPerSecond, float64(c.Bytes)/c.Seconds/1e6, c.Seconds)
	if c.Entries < r.Entries {
		fmt.Fprintf(w, "  over the first %d entries", c.Entries)
	}
	fmt.Fprintln(w)
	if m := r.Mirror; m != nil {
		fmt.Fprintf(w, "  %-44s %12.0f %10.1f %10.1f  %.2f× the ceiling\n", "mirror: ctfollow, every entry verified", m.EntriesPerSecond, float64(r.Log.DataTileBytes)/m.FollowSeconds/1e6, m.FollowSeconds, r.MirrorVsCeiling)
		fmt.Fprintf(w, "  mirror process: peak RSS %.1f MB; %d keys, keys file %.2f GB", float64(m.PeakRSSBytes)/1e6, m.Keys, float64(m.KeysFileBytes)/1e9)
		if m.TreeFile != "" {
			fmt.Fprintf(w, "; tree of %d keys, file %.2f GB; first signed head %.1f s after start (%.1f s after the last entry)",
				m.TreeKeys, float64(m.TreeFileBytes)/1e9, m.FirstHeadSeconds, m.FirstHeadSeconds-m.FollowSeconds)
		}
		fmt.Fprintln(w)
	}
	if p := r.Proofs; p != nil {
		fmt.Fprintf(w, "proofs on %s: %d leaves, depth %d, %d present + %d absent keys (p50 / avg / max, µs)\n", r.ProofsOn, p.Leaves, p.Depth, p.Samples, p.Samples)
		row := func(label string, p50, avg, mx float64, note string) {
			fmt.Fprintf(w, "  %-36s %8.1f %8.1f %9.1f  %s\n", label, p50, avg, mx, note)
		}
		row("generate presence", p.GenPresenceUsP50, p.GenPresenceUsAvg, p.GenPresenceUsMax,
			fmt.Sprintf("bare SHA-256 audit path of %d hashes: %.2f µs; worst p50 %.1f× it (target ≤ 3×)", p.Depth, p.CeilingPathUsP50, r.GenVsPathP50))
		row("generate absence", p.GenAbsenceUsP50, p.GenAbsenceUsAvg, p.GenAbsenceUsMax, "")
		row("verify presence, root trusted", p.VerifyPresenceUsP50, p.VerifyPresenceUsAvg, p.VerifyPresenceUsMax, "")
		row("verify absence, root trusted", p.VerifyAbsenceUsP50, p.VerifyAbsenceUsAvg, p.VerifyAbsenceUsMax, "")
		row("verify presence + signed root", p.VerifyPresenceSigUsP50, p.VerifyPresenceSigUsAvg, p.VerifyPresenceSigUsMax,
			fmt.Sprintf("one Ed25519 verify %.1f µs; worst p50 %.2f× it (target ≤ 1.5×)", r.Ed25519VerifyUsP50, r.VerifySigVsSigP50))
		row("verify absence + signed root", p.VerifyAbsenceSigUsP50, p.VerifyAbsenceSigUsAvg, p.VerifyAbsenceSigUsMax,
			fmt.Sprintf("one ECDSA P-256 verify (a static-ct-api checkpoint's) %.1f µs", r.ECDSAP256VerifyUsP50))
		row("verify presence + signed head", p.VerifyPresenceHeadUsP50, p.VerifyPresenceHeadUsAvg, p.VerifyPresenceHeadUsMax, "head and the checkpoint it binds: two signatures")
		row("verify absence + signed head", p.VerifyAbsenceHeadUsP50, p.VerifyAbsenceHeadUsAvg, p.VerifyAbsenceHeadUsMax, "")
		if hv := r.Head; hv != nil {
			fmt.Fprintf(w, "  against the mirror's own signed head (%d bytes: its Ed25519 signature and the log's ECDSA P-256 checkpoint signature), p50:\n", hv.HeadBytes)
			fmt.Fprintf(w, "    prove (encoded) presence %.1f, absence %.1f µs; verify head + proof presence %.1f, absence %.1f µs;\n",
				hv.ProvePresenceUsP50, hv.ProveAbsenceUsP50, hv.VerifyPresenceUsP50, hv.VerifyAbsenceUsP50)
			fmt.Fprintf(w, "    ceiling one Ed25519 + one ECDSA P-256 verify %.1f µs: %.2f× it\n", hv.CeilingUsP50, hv.Ratio)
		}
		paper := ""
		if pp := p.Paper; pp != nil {
			paper = fmt.Sprintf("; PEC paper Table 1 (%d keys): presence %.0f, absence %.0f avg (%.0f-%.0f)", pp.Leaves, pp.PresenceBytes.Avg, pp.AbsenceBytes.Avg, pp.AbsenceBytes.Min, pp.AbsenceBytes.Max)
		}
		fmt.Fprintf(w, "  proof bytes (min / avg / max): presence %d / %.0f / %d, absence %d / %.0f / %d\n",
			p.PresenceBytesMin, p.PresenceBytesAvg, p.PresenceBytesMax, p.AbsenceBytesMin, p.AbsenceBytesAvg, p.AbsenceBytesMax)
		fmt.Fprintf(w, "  with a detached signature (avg / max): presence %.0f / %d, absence %.0f / %d%s\n",
			p.PresenceSignedBytesAvg, p.PresenceSignedBytesMax, p.AbsenceSignedBytesAvg, p.AbsenceSignedBytesMax, paper)
		fmt.Fprintf(w, "  tree file %.1f MB, open %.3f s + %.1f s background fill, tree in memory %.1f MB\n",
			float64(p.FileBytes)/1e6, p.OpenSeconds, p.WarmSeconds, float64(p.TreeBytes)/1e6)
	}
	if len(r.AddChain) > 0 {
		a := r.AddChain[0]
		fmt.Fprintf(w, "add-chain, %d distinct chains, %d concurrent clients, same batching and checkpoint interval:\n", a.Chains, a.Concurrency)
		for _, a := range r.AddChain {
			fmt.Fprintf(w, "  %-24s %8.0f chains/s  latency p50 %.0f ms, p99 %.0f ms\n", a.Log, a.PerSecond, a.LatencyMsP50, a.LatencyMsP99)
		}
		if r.AddChainRatio > 0 {
			fmt.Fprintf(w, "  pkie log / TesseraCT: %.2f× (target ≥ 1)\n", r.AddChainRatio)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
