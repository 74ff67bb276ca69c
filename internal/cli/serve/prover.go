package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/feed"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/prover"
)

func Prover(ctx context.Context, env *command.Env, args []string) error {
	if len(args) > 0 && args[0] != "serve" && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want serve (run \"pkie prover -h\")", args[0])
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(env.Stderr, "Usage: pkie prover serve --ct URL --ct-key VKEY --revocation URL --revocation-key VKEY [flags]\n\n"+
			"  serve   mirror the log's and the revocation authority's sorted trees and serve proofs over HTTP")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: serve")
	}
	return proverServe(ctx, env, args[1:])
}

func proverServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "prover serve", "[flags]")
	ctURL := fs.String("ct", "", "the CT log's base URL, e.g. http://127.0.0.1:8091")
	ctKey := fs.String("ct-key", "", "the log's pinned verifier key (or @FILE)")
	revURL := fs.String("revocation", "", "the revocation authority's base URL, e.g. http://127.0.0.1:8092")
	revKey := fs.String("revocation-key", "", "the authority's pinned verifier key (or @FILE)")
	listen := fs.String("listen", "127.0.0.1:8093", "HTTP listen address")
	every := fs.Duration("sync", 30*time.Second, "sync with the TTPs this often")
	maxAge := fs.Duration("max-age", 24*time.Hour, "refuse TTP checkpoints older than this")
	maxInFlight := fs.Int("max-in-flight", 256, "concurrent requests at most; more get 503")
	perIP := fs.Int("max-in-flight-per-ip", 0, "one client address's share of those (0: a quarter)")
	conns := connFlags(fs)
	asJSON := fs.Bool("json", false, "print the startup information (address, the TTPs mirrored and their tree sizes, state directory) as one JSON line, and the logs as JSON")
	stateDir := fs.String("state", "", "directory keeping the last checkpoint accepted from each TTP (created 0700), so a restarted prover still refuses a tree that shrinks; without it a restart accepts whatever a TTP signs first")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	co, err := conns()
	if err != nil {
		return err
	}
	if *ctURL == "" && *revURL == "" {
		return command.UsageError("want --ct URL --ct-key VKEY, --revocation URL --revocation-key VKEY, or both")
	}
	if *every <= 0 || *maxAge <= 0 {
		return command.UsageError("--sync and --max-age must be positive")
	}
	logger := serveLogger(env, *asJSON)
	if *stateDir != "" {
		if err := os.MkdirAll(*stateDir, 0o700); err != nil {
			return err
		}
	} else {
		logger.Warn("no --state directory: after a restart this prover accepts whatever tree a TTP signs first, even one smaller than it served before")
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	type mirrored struct {
		URL  string `json:"url"`
		Size uint64 `json:"size"` // keys in the sorted tree at the first sync
	}
	info := struct {
		Listening  string    `json:"listening"`
		CT         *mirrored `json:"ct,omitempty"`
		Revocation *mirrored `json:"revocation,omitempty"`
		State      string    `json:"state"`
	}{State: *stateDir}
	mk := func(pkie, url, key, flag string) (*prover.Prover, error) {
		if url == "" {
			return nil, nil
		}
		if key == "" {
			return nil, command.UsageError("--%s needs --%s-key: the TTP's key must be pinned", flag, flag)
		}
		k, err := command.ReadKeyArg(key)
		if err != nil {
			return nil, command.UsageError("--%s-key: %v", flag, err)
		}
		v, err := checkpoint.NewVerifier(k)
		if err != nil {
			return nil, command.UsageError("--%s-key: %v", flag, err)
		}
		cfg := prover.Config{PKIE: pkie, Verifier: v, MaxAge: *maxAge, StateDir: *stateDir,
			Feed: &feed.Client{Base: strings.TrimSuffix(url, "/") + "/v1/sorted", HTTP: hc},
			Progress: func(done, total uint64) {
				fmt.Fprintf(env.Stderr, "\r%s: fetched %d of %d new keys", pkie, done, total)
				if done == total {
					fmt.Fprintln(env.Stderr)
				}
			}}
		if *asJSON {
			// A progress line is no JSON; the "synced" log line says it.
			cfg.Progress = nil
		}
		if pkie == prover.CT {
			cfg.LogConsistency = prover.LogConsistency(url, hc)
		}
		p, err := prover.New(cfg)
		if err != nil {
			return nil, err
		}
		res, err := p.Sync(ctx)
		if err != nil {
			return nil, err
		}
		logger.Info("synced", "pkie", pkie, "size", res.Size, "checkpoint_time", res.Time, "took", res.Duration)
		if pkie == prover.CT {
			info.CT = &mirrored{url, res.Size}
		} else {
			info.Revocation = &mirrored{url, res.Size}
		}
		go p.Run(ctx, *every, func(f string, a ...any) { logger.Error(fmt.Sprintf(f, a...)) })
		return p, nil
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// Bound first: a busy port is found before any sync or state write.
	defer ln.Close()
	o := prover.ServerOptions{MaxInFlight: *maxInFlight, MaxPerClient: *perIP}
	if o.CT, err = mk(prover.CT, *ctURL, *ctKey, "ct"); err != nil {
		return err
	}
	if o.Revocation, err = mk(prover.Revocation, *revURL, *revKey, "revocation"); err != nil {
		return err
	}
	srv := ctlog.NewHTTPServer(prover.Handler(o))
	srv.WriteTimeout = 30 * time.Second
	go func() { <-ctx.Done(); srv.Close() }()
	logger.Info("prover listening", "addr", ln.Addr().String())
	info.Listening = ln.Addr().String()
	if err := printServing(env, *asJSON, info, "listening "+info.Listening); err != nil {
		return err
	}
	if err := serveLimited(srv, ln, co); err != nil && ctx.Err() == nil {
		return err
	}
	logStopped(logger, "prover", ctx)
	return nil
}
