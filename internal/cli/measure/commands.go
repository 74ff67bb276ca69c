// Package measure holds the measurement commands: scan (certificate chains
// of a list of sites), roots (root CAs ranked from scans), overhead (what
// HTTPS costs over HTTP) and replay (a network's HTTPS flows replayed as
// notary requests, Forced Perspectives' method).
package measure

import "github.com/pkie/pkie/internal/cli/command"

// Commands returns the measurement commands.
func Commands() []command.Command {
	return []command.Command{
		{Name: "overhead", Summary: "measure what HTTPS costs over HTTP for whole page downloads", Run: Overhead},
		{Name: "scan", Summary: "collect the certificate chains of a list of sites (resumable, JSON lines)", Run: Scan},
		{Name: "roots", Summary: "rank root CAs by sites, coverage curve, minimal trust store from scans", Run: Roots},
		{Name: "replay", Summary: "replay a network's HTTPS flows as notary requests: gen | flows | synth | run | report", Run: Replay},
	}
}
