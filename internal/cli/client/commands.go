// Package client holds the commands that check: a site's certificate by
// notaries, CA and proofs (check), a chain with phase timings (probe), a
// URL through the PEC dialer (pec get), origin-bound client certificates
// (obc get, list, forget) and verification back ends (verify).
package client

import "github.com/pkie/pkie/internal/cli/command"

// Commands returns the checking commands.
func Commands() []command.Command {
	return []command.Command{
		{Name: "check", Summary: "decide whether to trust a site's certificate: own probe, notaries, policy, local cache", Run: Check},
		{Name: "probe", Summary: "fetch a TLS server's certificate chain with phase timings", Run: Probe},
		{Name: "pec", Summary: "fetch a URL through the PEC dialer, the server's chain proved by the cloud: get", Run: PEC},
		{Name: "verify", Summary: "verify one certificate chain with every back end (Go, OpenSSL, webpki), timed per phase", Run: Verify},
	}
}

// OBCCommands returns the subcommands of "pkie obc" a client runs; the
// demonstration site, obc serve, is a serving role's.
func OBCCommands() []command.Command {
	return []command.Command{
		{Name: "get", Summary: "fetch an https URL presenting the origin-bound certificate of its origin", Run: OBCGet},
		{Name: "list", Summary: "list the stored origin-bound keys", Run: OBCList},
		{Name: "forget", Summary: "delete the key of an origin or scope: the site then sees a new client", Run: OBCForget},
	}
}
