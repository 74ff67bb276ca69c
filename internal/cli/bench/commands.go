// Package bench holds the commands that measure pkie against its research
// papers on the in-process testbed: bench (proofs, ct, notary, pec, obc,
// scan, roots, verify, soak) and demo (an offline world where a MitM is caught).
package bench

import "github.com/pkie/pkie/internal/cli/command"

// Commands returns the benchmark commands.
func Commands() []command.Command {
	return []command.Command{
		{Name: "demo", Summary: "run an offline world of sites, notaries and a MitM, and show the MitM caught", Run: Demo},
		{Name: "bench", Summary: "measure pkie against the research papers (bench proofs, ...)", Run: Bench},
	}
}
