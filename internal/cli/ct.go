package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctmirror"
)

const ctUsage = "Usage: pkie ct <subcommand> [flags]\n\nCertificate Transparency tools that work on any static-ct-api or RFC 6962 log.\n\nSubcommands:"

// ctCommands is the "pkie ct" family.
func ctCommands() command.Command {
	return command.Group("ct", "Certificate Transparency tools: check, audit-mirror", ctUsage, []command.Command{
		{Name: "check", Summary: "check a certificate's SCTs against a log list and a CT policy", Run: runCTCheck},
		{Name: "audit-mirror", Summary: "rebuild a mirror's sorted tree from the log's public data and compare", Run: runAuditMirror},
	})
}

func runAuditMirror(ctx context.Context, env *Env, args []string) error {
	fs := command.NewFlags(env, "ct audit-mirror", "--mirror URL --mirror-key KEY --log URL --log-key KEY [--log-kind static-ct-api|rfc6962] [--json]\n\n"+
		"Fetches the mirror's signed sorted-tree head (URL/head), verifies it with the mirror's key and\n"+
		"its bound checkpoint with the log's key, follows the log from scratch up to that checkpoint\n"+
		"(every tile or entry checked against it), rebuilds the sorted tree of its certificates and\n"+
		"compares size and root. Exit status: 0 the head names exactly that tree; 1 it does not (the\n"+
		"difference is named, with keys missing from or extra in the mirror's tree file when it serves\n"+
		"one); 2 usage or operational error. Progress goes to standard error.")
	mirror := fs.String("mirror", "", "the mirror's base URL (where it serves head and tree)")
	mirrorKey := fs.String("mirror-key", "", "the mirror's verifier key (or @FILE, e.g. @mirror.pub)")
	logURL := fs.String("log", "", "the log's static-ct-api monitoring prefix, or its RFC 6962 URL")
	logKey := fs.String("log-key", "", "the log's RFC 6962 note verifier key (or @FILE)")
	kind := fs.String("log-kind", ctfollow.KindStatic, "static-ct-api | rfc6962")
	dir := fs.String("dir", "", "scratch directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *mirror == "" || *mirrorKey == "" || *logURL == "" || *logKey == "" {
		return command.UsageError("--mirror, --mirror-key, --log and --log-key are all required")
	}
	if *kind != ctfollow.KindStatic && *kind != ctfollow.KindRFC6962 {
		return command.UsageError("--log-kind %q: want %s or %s", *kind, ctfollow.KindStatic, ctfollow.KindRFC6962)
	}
	mk, err := command.ReadKeyArg(*mirrorKey)
	if err != nil {
		return command.UsageError("--mirror-key: %v", err)
	}
	lk, err := command.ReadKeyArg(*logKey)
	if err != nil {
		return command.UsageError("--log-key: %v", err)
	}
	res, err := ctmirror.Audit(ctx, ctmirror.AuditConfig{MirrorURL: *mirror, MirrorKey: mk, LogKind: *kind, LogURL: *logURL, LogKey: lk, Dir: *dir,
		Progress: func(s string) { fmt.Fprintln(env.Stderr, s) }})
	if res != nil && *asJSON {
		if jerr := command.WriteJSON(env.Stdout, res); jerr != nil {
			return jerr
		}
	}
	switch {
	case errors.Is(err, ctmirror.ErrMismatch):
		fmt.Fprintf(env.Stderr, "FAIL: %v\n", err)
		for _, k := range res.Missing {
			fmt.Fprintf(env.Stderr, "  missing from the mirror's tree: %s\n", k)
		}
		for _, k := range res.Extra {
			fmt.Fprintf(env.Stderr, "  in the mirror's tree, not in the log: %s\n", k)
		}
		return command.Negative()
	case err != nil:
		return err
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "ok: %s's head of %d keys (root %x) is the tree of %s's first %d entries (%s)\n",
			res.Head.Origin, res.Head.Size, res.Head.Root, res.Head.Log.Origin, res.Head.Log.Size, res.Took.Round(time.Millisecond))
	}
	return nil
}
