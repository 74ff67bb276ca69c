package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/pkie/pkie/internal/demo"
)

func runDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "demo", "[--json] [--revisit=false]")
	asJSON := fs.Bool("json", false, `print [{"site", "verdict", "reasons", …}, …]`)
	revisit := fs.Bool("revisit", true, "check every site a second time to show the local cache")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	progress := env.Stderr
	rs, err := demo.Run(ctx, demo.Options{Progress: progress, Revisit: *revisit})
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.Stdout, rs); err != nil {
			return err
		}
	} else {
		printDemo(env, rs)
	}
	if !demo.Caught(rs) {
		fmt.Fprintln(env.Stderr, "pkie demo: the client did not reach the expected verdicts (see above)")
		return negative()
	}
	return nil
}

func printDemo(env *Env, rs []demo.SiteResult) {
	w := env.Stdout
	fmt.Fprintln(w, "\npkie demo: a client checks six sites through three notaries and a PEC cloud that")
	fmt.Fprintln(w, "proves each certificate logged (CT) and not revoked against a log and a revocation")
	fmt.Fprintln(w, "authority. A MitM on the client's path intercepts bank.test with a forged chain from")
	fmt.Fprintln(w, "a rogue intermediate that chains to the trusted root, so CA validation alone accepts")
	fmt.Fprintln(w, "it; revoked.test's certificate was revoked and unlogged.test's never logged, which")
	fmt.Fprintln(w, "neither CA validation nor the notaries can tell.")
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
		src := "notaries"
		if r.FromCache {
			src = "local cache"
		}
		fmt.Fprintf(w, "%s %-10s %-12s CA says %-5s  %s in %s (probe %s, notaries %s)\n", mark, r.Site, strings.ToUpper(r.Verdict),
			r.CA, src, ms(r.Timings.Total), ms(r.Timings.Probe), ms(r.Timings.Notaries))
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
		fmt.Fprintln(w, "\nResult: the intercepted, the revoked and the unlogged site were caught; every other site was trusted.")
	}
}
