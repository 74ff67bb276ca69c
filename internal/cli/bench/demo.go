package bench

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/demo"
)

func Demo(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "demo", "[--json] [-v] [--revisit=false]")
	asJSON := fs.Bool("json", false, `print [{"site", "verdict", "reasons", "notaries", "proofs", "timings", …}, …]`)
	verbose := fs.Bool("v", false, "progress on stderr, and every notary's answer and every source's reason under each site")
	revisit := fs.Bool("revisit", true, "check every site a second time to show the local cache")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	var progress io.Writer
	if *verbose {
		progress = env.Stderr
	}
	// The story comes first, so a newcomer reads what to watch for while
	// the world starts rather than after the results scrolled past.
	if !*asJSON {
		printDemoStory(env.Stdout)
	}
	restore := command.QuietStorage(env)
	rs, err := demo.Run(ctx, demo.Options{Progress: progress, Revisit: *revisit})
	restore()
	if err != nil {
		return err
	}
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, rs); err != nil {
			return err
		}
	} else {
		printDemo(env.Stdout, rs, *verbose)
	}
	if !demo.Caught(rs) {
		fmt.Fprintln(env.Stderr, "pkie demo: the client did not reach the expected verdicts (see above)")
		return command.Negative()
	}
	return nil
}

func printDemoStory(w io.Writer) {
	fmt.Fprint(w, `pkie demo: can a client catch what CA validation alone lets through?

Set up, in this process on loopback: seven TLS sites; three notaries that fetch each site's
certificate from their own paths (one 150 ms away); a static-ct-api CT log on Tessera, and a
mirror that follows its tiles, verifies every checkpoint and signs the log's certificates as
a sorted tree; three more CT logs, two of two operators in the client's CT log list and one
not; a revocation authority; a PEC cloud that proves each certificate in the mirror's tree (bound to a checkpoint
the log signed) and not revoked; a man in the middle on the client's path. The client requires
CA validation, a majority of the notaries, the cloud's revocation proof, and CT: a certificate's
SCTs must meet Chrome's CT policy against the client's log list; one without SCTs must be in
the mirror's tree.
Watch for: bank.test, intercepted with a forged chain from a rogue intermediate of the trusted
root, so CA validation accepts it (the notaries see another certificate; the log never saw it);
revoked.test and unlogged.test, genuine but revoked or never logged, which only the cloud's
proofs catch; unlisted-log.test, whose one SCT a real log signed, but not a log the client's
list names. The other three sites should be trusted; news.test's certificate carries SCTs
from the two listed logs, and the cloud proves their inclusion.
`)
}

func printDemo(w io.Writer, rs []demo.SiteResult, verbose bool) {
	visit := 0
	for _, r := range rs {
		if r.Visit != visit {
			visit = r.Visit
			if visit == 1 {
				fmt.Fprintln(w, "\nFirst visit:")
			} else {
				fmt.Fprintln(w, "\nReturn visit (local cache; a certificate not accepted before goes back to the notaries):")
			}
		}
		mark := "  "
		if r.Verdict == "untrusted" {
			mark = "!!"
		}
		fmt.Fprintf(w, "%s %-17s %-10s %8s  %s\n", mark, r.Site, strings.ToUpper(r.Verdict), command.Millis(r.Timings.Total), demoReason(r))
		if !verbose {
			continue
		}
		if r.Verdict != "trusted" {
			fmt.Fprintf(w, "     %s\n", r.Headline)
		}
		for _, n := range r.Notaries {
			fmt.Fprintf(w, "     %-20s %-11s %7.1f ms  %s\n", n.Name, n.Vote, n.RoundTripMS, n.Detail)
		}
		for _, reason := range r.Reasons {
			fmt.Fprintf(w, "     - %s\n", reason)
		}
	}
	if demo.Caught(rs) {
		fmt.Fprintln(w, "\nResult: the intercepted, the revoked, the unlogged and the unlisted-log site were caught; every other site was trusted.")
	}
	if !verbose {
		fmt.Fprintln(w, "Every notary's answer and every proof's detail: pkie demo -v, or pkie demo --json.")
	}
}

// demoReason is the short why of one site's verdict, built from the
// result's fields rather than cut from its reasons: those carry tree
// heads, fingerprints and addresses that belong in -v and --json.
func demoReason(r demo.SiteResult) string {
	if r.FromCache {
		return "accepted on the first visit: local cache, no notary asked"
	}
	var bad []string
	if r.CA != "pass" {
		bad = append(bad, "CA validation "+orDash(r.CA))
	}
	yes, no := 0, 0
	for _, n := range r.Notaries {
		switch n.Vote {
		case "yes":
			yes++
		case "no":
			no++
		}
	}
	notaries := fmt.Sprintf("%d of %d notaries", yes, len(r.Notaries))
	if no > 0 {
		bad = append(bad, notaries+" see this certificate (MitM?)")
	}
	for _, p := range r.Proofs {
		if p.Status == "pass" {
			continue
		}
		switch {
		case p.PKIE == "ct" && p.Status == "fail" && strings.Contains(p.Detail, "not in the log list"):
			bad = append(bad, "CT policy: SCT from an unlisted log")
		case p.PKIE == "ct" && p.Status == "fail":
			bad = append(bad, "CT proof: never logged")
		case p.PKIE == "revocation" && p.Status == "fail":
			bad = append(bad, "revocation proof: revoked")
		default:
			bad = append(bad, fmt.Sprintf("%s proof: %s", p.PKIE, orDash(p.Status)))
		}
	}
	if len(bad) > 0 {
		why := strings.Join(bad, "; ")
		if no == 0 && r.CA == "pass" {
			why += fmt.Sprintf(", though CA and %s accept it", notaries)
		}
		return why
	}
	var proofs []string
	for _, p := range r.Proofs {
		proofs = append(proofs, p.PKIE)
	}
	return fmt.Sprintf("CA, %s, %s proofs all pass", notaries, strings.Join(proofs, " and "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
