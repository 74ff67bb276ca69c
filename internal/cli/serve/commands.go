// Package serve holds the commands that run a serving role: the notary,
// the CT log, the revocation authority, the prover, the PEC cloud and its
// forwarder, the PEC proxy and the origin-bound certificates demonstration
// site. Each initialises its data directory, serves until its context
// ends, and says so; what they share (startup lines and --json, logs,
// connection caps) is in this package.
package serve

import "github.com/pkie/pkie/internal/cli/command"

// Commands returns the serving commands.
func Commands() []command.Command {
	return []command.Command{
		{Name: "notary", Summary: "run a notary: init | serve | bundle", Run: Notary},
		{Name: "cloud", Summary: "run a PEC cloud that proves certificates for clients: init | serve | bundle", Run: Cloud},
		{Name: "forwarder", Summary: "run a PEC privacy forwarder that relays sealed proofs and submissions: init | serve | bundle", Run: Forwarder},
		{Name: "log", Summary: "run a CT log: init | serve | add | import | build | audit", Run: Log},
		{Name: "revocation", Summary: "run a revocation authority: init | serve | add-crl | add-serials | publish", Run: Revocation},
		{Name: "prover", Summary: "serve CT and revocation proofs from synced trees: serve", Run: Prover},
		{Name: "pec-proxy", Summary: "serve an HTTP backend over TLS as a PEC server: forward each chain to the client's cloud", Run: PECProxy},
	}
}

// OBCServeCommand is "pkie obc serve", the origin-bound certificates
// demonstration site.
var OBCServeCommand = command.Command{Name: "serve", Summary: "run a demonstration site with channel-bound session cookies", Run: OBCServe}
