package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/prover"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
)

func Prover(ctx context.Context, env *command.Env, args []string) error {
	if len(args) > 0 && args[0] == "mirror-key" {
		return proverMirrorKey(env, args[1:])
	}
	if len(args) > 0 && args[0] != "serve" && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want serve or mirror-key (run \"pkie prover -h\")", args[0])
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(env.Stderr, "Usage: pkie prover serve --ct-log URL --ct-log-key VKEY --ct-mirror-key FILE --state DIR --revocation URL --revocation-key VKEY [flags]\n\n"+
			"  serve        mirror a CT log (any static-ct-api or RFC 6962 log) and the revocation authority's sorted tree, and serve proofs over HTTP\n"+
			"  mirror-key   make the CT mirror's signing key (--dir DIR --name NAME): mirror.key (0600) and mirror.pub, the key clients pin")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: serve")
	}
	return proverServe(ctx, env, args[1:])
}

func proverServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "prover serve", "[flags]")
	ctLog := fs.String("ct-log", "", "a CT log to mirror: its static-ct-api monitoring prefix, or its RFC 6962 URL with --ct-log-kind rfc6962")
	ctLogKey := fs.String("ct-log-key", "", "the CT log's key (or @FILE): its RFC 6962 note verifier key, or its public key (PEM or base64) with --ct-log-origin")
	ctLogKind := fs.String("ct-log-kind", "static-ct-api", "static-ct-api | rfc6962")
	ctLogOrigin := fs.String("ct-log-origin", "", "a static-ct-api log's origin, when --ct-log-key is a bare public key")
	ctMirrorKey := fs.String("ct-mirror-key", "", "the mirror's Ed25519 signer key file (mode 0600), which signs the sorted-tree heads; made by pkie prover mirror-key")
	revURL := fs.String("revocation", "", "the revocation authority's base URL, e.g. http://127.0.0.1:8092")
	revKey := fs.String("revocation-key", "", "the authority's pinned verifier key (or @FILE)")
	listen := fs.String("listen", "127.0.0.1:8093", "HTTP listen address")
	every := fs.Duration("sync", 30*time.Second, "sync with the TTPs this often")
	maxAge := fs.Duration("max-age", 24*time.Hour, "refuse revocation checkpoints older than this")
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
	if *ctLog == "" && *revURL == "" {
		return command.UsageError("want --ct-log URL --ct-log-key VKEY --ct-mirror-key FILE, --revocation URL --revocation-key VKEY, or both")
	}
	if *ctLog != "" {
		switch {
		case *ctLogKey == "":
			return command.UsageError("--ct-log needs --ct-log-key: the log's key must be pinned")
		case *ctMirrorKey == "":
			return command.UsageError("--ct-log needs --ct-mirror-key, the mirror's signing key (pkie prover mirror-key makes one)")
		case *stateDir == "":
			return command.UsageError("--ct-log needs --state: a mirror keeps what it verified of the log")
		}
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
	mk := func(pkie, url, key, flag string) (prover.Source, error) {
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
		p, err := prover.New(cfg)
		if err != nil {
			return nil, err
		}
		res, err := p.Sync(ctx)
		if err != nil {
			return nil, err
		}
		logger.Info("synced", "pkie", pkie, "size", res.Size, "checkpoint_time", res.Time, "took", res.Duration)
		info.Revocation = &mirrored{url, res.Size}
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
	var mirrorHandler http.Handler
	if *ctLog != "" {
		k, err := command.ReadKeyArg(*ctLogKey)
		if err != nil {
			return command.UsageError("--ct-log-key: %v", err)
		}
		m, err := ctprover.OpenMirror(ctx, ctprover.MirrorConfig{LogKind: *ctLogKind, LogURL: *ctLog, LogKey: k, LogOrigin: *ctLogOrigin,
			MirrorKeyFile: *ctMirrorKey, Dir: filepath.Join(*stateDir, "ct"), Interval: *every, HTTP: hc, Logger: logger})
		if err != nil {
			return err
		}
		defer m.Close()
		st, err := m.Sync(ctx)
		if err != nil {
			return err
		}
		logger.Info("synced", "pkie", prover.CT, "log_size", st.Size, "keys", st.KeyCount)
		info.CT = &mirrored{*ctLog, m.Status().Size}
		go m.Run(ctx)
		o.CT, mirrorHandler = m, m.Handler()
	}
	if o.Revocation, err = mk(prover.Revocation, *revURL, *revKey, "revocation"); err != nil {
		return err
	}
	h := prover.Handler(o)
	if mirrorHandler != nil {
		// The mirror's head and tree file, for auditors (pkie ct
		// audit-mirror --mirror URL/ct) and other provers.
		// Not a ServeMux, whose redirects of unclean paths would answer
		// the proof API's requests with HTML instead of its JSON errors.
		proofs, tree := h, http.StripPrefix("/ct", mirrorHandler)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/ct/") {
				tree.ServeHTTP(w, r)
				return
			}
			proofs.ServeHTTP(w, r)
		})
	}
	srv := ctlog.NewHTTPServer(h)
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

// proverMirrorKey is "pkie prover mirror-key": the CT mirror's Ed25519
// signing key, whose name is the origin of its sorted-tree heads.
func proverMirrorKey(env *command.Env, args []string) error {
	fs := command.NewFlags(env, "prover mirror-key", "--dir DIR --name NAME")
	dir := fs.String("dir", "", "directory for mirror.key (mode 0600, refused if it exists) and mirror.pub")
	name := fs.String("name", "", "the mirror's key name, a schema-less URL of its own (e.g. mirror.example/ct), never the log's origin")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *name == "" {
		return command.UsageError("--dir and --name are required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	vkey, err := ctmirror.GenerateKey(*dir, *name)
	if err != nil {
		return command.UsageError("%v", err)
	}
	fmt.Fprintln(env.Stdout, vkey)
	return nil
}
