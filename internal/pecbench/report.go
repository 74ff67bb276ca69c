package pecbench

import (
	"fmt"
	"io"
)

// WriteText prints the report as tables, each figure beside its ceiling and
// the paper's.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pkie bench pec: %s/%s, %d CPUs, %s; %.1f s\n", r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.GoVersion, r.Seconds)
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
		fmt.Fprintf(w, "  paper: %.0f-%.0f us per proof, every time (two per connection); Ed25519 verify here %.1f us; proofs %.0f bytes + a %d-byte head once per root\n",
			c.PaperUsMin, c.PaperUsMax, c.Ed25519UsP50, c.ProofBytes, c.HeadBytes)
	}
}
