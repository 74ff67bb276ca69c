package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verifybench"
)

func runBenchVerify(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench verify", "[--sites all|none|NAME,...] [--shapes all|none|NAME,...] [--n 200] [--conns 10] [--rtt 20ms] [--backends LIST] [--verifier-dir DIR] [--roots mozilla|system|FILE] [--out DIR] [--json] [--from FILE]")
	sites := fs.String("sites", "all", "sites shaped like the Servo experiment's: all, none, or a comma-separated list of "+strings.Join(verifybench.SiteNames(), ", "))
	shapes := fs.String("shapes", "all", "chain shapes: all, none, or a comma-separated list of "+strings.Join(verifybench.ShapeNames(), ", "))
	n := fs.Int("n", 200, "verifications per back end and site or shape (and signature-ceiling runs per shape)")
	conns := fs.Int("conns", 10, "connections per site and method (none and every back end)")
	// 20 ms is a nearby site over a good link: enough for the handshake's
	// round trips to dominate, as on the experiment's Internet, without
	// making every connection of the run slow.
	rtt := fs.Duration("rtt", 20*time.Millisecond, "round trip the delay proxy adds in front of each site")
	tls13 := fs.Bool("tls13", false, "let the sites speak TLS 1.3 (default: TLS 1.2 at most, as the experiment's sites in 2017)")
	backends := fs.String("backends", strings.Join(verify.Names, ","), "back ends to run")
	verifierDir := fs.String("verifier-dir", "", "directory of the helper programs (default: $PKIE_VERIFIER_DIR, then pkie's own directory, then $PATH)")
	helperTimeout := fs.Duration("helper-timeout", verify.DefaultHelperTimeout, "bound on each exchange with a helper")
	roots := fs.String("roots", "mozilla", "trust store each back end builds: mozilla (x509roots/fallback), system ("+verifybench.SystemBundle+"), or a PEM FILE; the testbed's roots are added")
	out := fs.String("out", "", "write the plots (verify-*.svg and .png) into this directory, created if missing")
	from := fs.String("from", "", "measure nothing: print (and with --out draw) the report a --json run saved in this file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *n < 1 || *conns < 1 {
		return command.UsageError("--n and --conns must be at least 1")
	}
	if *rtt < 0 {
		return command.UsageError("--rtt must not be negative")
	}
	if *from != "" {
		b, err := os.ReadFile(*from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		var r verifybench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("--from %s: not a pkie bench verify --json report: %w", *from, err)
		}
		if *out != "" {
			if err := command.MakeOutDir("--out", *out); err != nil {
				return err
			}
		}
		return writeBenchReport(env, "bench verify", "--out", &r, *asJSON, *out)
	}
	cfg := verifybench.Config{N: *n, Conns: *conns, RTT: *rtt, TLS13: *tls13, Backends: command.SplitList(*backends),
		HelperTimeout: *helperTimeout, Progress: command.PrefixWriter{Env: env, Prefix: "bench verify: "}}
	cfg.Sites = pickList(*sites, verifybench.SiteNames())
	cfg.Shapes = pickList(*shapes, verifybench.ShapeNames())
	if *verifierDir != "" {
		cfg.Dirs = []string{*verifierDir}
	} else {
		cfg.Dirs = verify.DefaultDirs(env.Getenv)
	}
	if cfg.Roots, err = verifybench.LoadRoots(*roots); err != nil {
		return command.UsageError("--roots: %v", err)
	}
	if err := cfg.Check(); err != nil {
		return command.UsageError("%v", err)
	}
	for _, b := range cfg.Backends {
		if !knownBackend(b) {
			return command.UsageError("--backends: unknown back end %q (known: %s)", b, strings.Join(verify.Names, ", "))
		}
	}
	// Made only now, when every flag is known good: a refused command
	// leaves nothing behind.
	if *out != "" {
		if err := command.MakeOutDir("--out", *out); err != nil {
			return err
		}
	}
	r, err := verifybench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeBenchReport(env, "bench verify", "--out", r, *asJSON, *out)
}

// pickList reads a list flag: all, none, or names.
func pickList(v string, all []string) []string {
	switch v {
	case "all":
		return all
	case "none", "":
		return nil
	}
	return command.SplitList(v)
}

func knownBackend(name string) bool {
	for _, k := range verify.Names {
		if k == name {
			return true
		}
	}
	return false
}
