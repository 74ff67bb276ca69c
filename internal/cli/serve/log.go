package serve

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	rootstore "github.com/pkie/pkie/internal/roots"
)

func Log(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{
		"init": logInit, "serve": logServe, "add": logAdd, "import": logImport, "build": logBuild, "audit": logAudit,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve, add, import, build or audit (run \"pkie log -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie log init|serve|add|import|build|audit [flags]\n\n"+
			"  init     create a log directory with a fresh Ed25519 key\n"+
			"  serve    serve the log's HTTP API and build the sorted tree periodically\n"+
			"  add      log certificate chains (PEM or DER files) and print their SCTs\n"+
			"  import   bulk-log a directory of PEM/DER chains or a JSON-lines file\n"+
			"  build    build, sign and append the sorted tree now\n"+
			"  audit    check the published sorted tree against the log (--url: from outside, via its HTTP API)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve, add, import, build or audit")
	}
	return sub[args[0]](ctx, env, args[1:])
}

func logInit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log init", "[--data DIR] --origin NAME")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory")
	origin := fs.String("origin", "", "the log's checkpoint origin and key name, e.g. log.example.org/2026 (required)")
	roots := fs.String("roots", "", logRootsHelp+" (default mozilla); remembered in the log directory for serve, add and import")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *origin == "" {
		return command.UsageError("--origin is required")
	}
	if *roots != "" {
		if _, err := loadRootsChoice(*roots); err != nil {
			return command.UsageError("%v", err)
		}
	}
	vkey, err := ctlog.Init(*data, *origin)
	if err != nil {
		return err
	}
	if err := rememberRoots(*data, *roots); err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]string{"data": *data, "origin": *origin, "sorted_origin": ctlog.SortedOrigin(*origin), "verifier_key": vkey})
	}
	fmt.Fprintf(env.Stdout, "log %q initialised in %s (key 0600)\nverifier key (pin it in clients and provers):\n%s\n", *origin, *data, vkey)
	return nil
}

// logRootsHelp explains --roots for every log command that accepts chains.
const logRootsHelp = "accepted roots: mozilla (Mozilla's NSS store, as CT logs accept), a PEM file, or any (accept every parseable chain: test logs only)"

// RootsFile is the file in a log directory that remembers which roots the
// log accepts (see logRootsHelp): "mozilla", "any", or the PEM roots
// themselves, copied so a moved or edited source file cannot change them.
const RootsFile = "roots"

// rememberRoots records choice (a --roots value; "" records nothing) in
// the log directory, for later commands that are not given --roots.
func rememberRoots(data, choice string) error {
	if choice == "" {
		return nil
	}
	content := []byte(choice + "\n")
	if choice != "any" && choice != "mozilla" {
		b, err := os.ReadFile(choice)
		if err != nil {
			return command.UsageError("--roots: %v", err)
		}
		content = b
	}
	if _, err := parseRoots(content, choice); err != nil {
		return command.UsageError("%v", err)
	}
	return atomicfile.WriteFile(filepath.Join(data, RootsFile), content, 0o600)
}

// loadRootsChoice parses a --roots value: nil for any.
func loadRootsChoice(choice string) (*x509.CertPool, error) {
	switch choice {
	case "any", "mozilla":
		return parseRoots([]byte(choice), choice)
	}
	b, err := os.ReadFile(choice)
	if err != nil {
		return nil, fmt.Errorf("--roots: %w", err)
	}
	return parseRoots(b, choice)
}

func parseRoots(b []byte, name string) (*x509.CertPool, error) {
	switch strings.TrimSpace(string(b)) {
	case "any":
		return nil, nil
	case "mozilla":
		s, err := rootstore.Mozilla()
		if err != nil {
			return nil, err
		}
		return s.Pool(), nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--roots %s holds no PEM certificate", name)
	}
	return pool, nil
}

// openLog opens the log at data accepting chains to roots (see
// logRootsHelp), or, if roots is "", to those the log directory remembers
// (Mozilla's if none). A real log refuses chains to unknown roots, or
// anyone could fill it with certificates of their own making.
func openLog(env *command.Env, data, roots string) (*ctlog.Log, error) {
	return openLogLogged(slog.New(slog.NewTextHandler(env.Stderr, nil)), data, roots)
}

// openLogLogged is openLog with the log's warnings going to logger.
func openLogLogged(logger *slog.Logger, data, roots string) (*ctlog.Log, error) {
	o := ctlog.Options{Logf: warnf(logger)}
	var err error
	if roots == "" {
		b, rerr := os.ReadFile(filepath.Join(data, RootsFile))
		switch {
		case errors.Is(rerr, os.ErrNotExist):
			o.Roots, err = parseRoots([]byte("mozilla"), "mozilla")
		case rerr != nil:
			return nil, fmt.Errorf("the log's remembered roots: %w", rerr)
		default:
			o.Roots, err = parseRoots(b, filepath.Join(data, RootsFile))
		}
	} else {
		o.Roots, err = loadRootsChoice(roots)
	}
	if err != nil {
		return nil, err
	}
	return ctlog.Open(data, o)
}

// logServeFlags names ctlog.ServeOptions' fields as log serve's flags do.
var logServeFlags = map[string]string{
	"BuildInterval": "--build-interval", "BodyTimeout": "--body-timeout",
	"MaxInFlight": "--max-in-flight", "MaxAddChain": "--max-add-chain", "MaxPerClient": "--max-in-flight-per-ip",
}

func logServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log serve", "[flags]")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory (from pkie log init)")
	listen := fs.String("listen", "127.0.0.1:8091", "HTTP listen address")
	every := fs.Duration("build-interval", time.Minute, "build, sign and append the sorted tree this often (keep it well under clients' --proof-max-age)")
	roots := fs.String("roots", "", logRootsHelp+"; chains that do not verify to one are refused (default: the roots the log was initialised or last served with, else mozilla; the choice is remembered)")
	maxInFlight := fs.Int("max-in-flight", 64, "read requests (checkpoint, proofs, entries, SCTs, feed) handled at once; more get 503")
	maxAddChain := fs.Int("max-add-chain", 64, "add-chain requests handled at once, apart from reads; more get 503")
	perIP := fs.Int("max-in-flight-per-ip", 0, "one client address's share of each of those (0: a quarter)")
	bodyTimeout := fs.Duration("body-timeout", httplimit.DefaultBodyTimeout, "time an add-chain body may take to arrive, plus 1 s per 64 KiB")
	conns := connFlags(fs)
	asJSON := fs.Bool("json", false, "print the startup information (address, origin, verifier key, data directory) as one JSON line, and the logs as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	opts := ctlog.ServeOptions{BuildInterval: *every,
		HandlerOptions: ctlog.HandlerOptions{MaxInFlight: *maxInFlight, MaxAddChain: *maxAddChain, MaxPerClient: *perIP, BodyTimeout: *bodyTimeout}}
	if err := command.OptionError(opts.Validate(), logServeFlags); err != nil {
		return err
	}
	co, err := conns()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// Bound before anything is built or signed: a busy port must not cost
	// a signed tree head.
	defer ln.Close()
	if err := rememberRoots(*data, *roots); err != nil {
		return err
	}
	logger := serveLogger(env, *asJSON)
	l, err := openLogLogged(logger, *data, *roots)
	if err != nil {
		return err
	}
	defer l.Close()
	b, err := l.BuildSorted(ctx)
	if err != nil {
		return err
	}
	logger.Info("sorted tree built", "size", b.Size, "entry", b.EntryIndex)
	srv := ctlog.NewHTTPServer(l.Handler(opts.HandlerOptions))
	go l.Run(ctx, opts.BuildInterval, func(f string, a ...any) { logger.Error(fmt.Sprintf(f, a...)) })
	go func() { <-ctx.Done(); srv.Close() }()
	logger.Info("log listening", "origin", l.Origin(), "addr", ln.Addr().String())
	info := map[string]any{"listening": ln.Addr().String(), "origin": l.Origin(), "sorted_origin": ctlog.SortedOrigin(l.Origin()),
		"verifier_key": l.VerifierKey(), "data": *data, "sorted_size": b.Size}
	if err := printServing(env, *asJSON, info, "listening "+ln.Addr().String()); err != nil {
		return err
	}
	if err := serveLimited(srv, ln, co); err != nil && ctx.Err() == nil {
		return err
	}
	logStopped(logger, "log", ctx)
	return nil
}

func logAdd(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log add", "[--data DIR] CHAIN_FILE...")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory")
	roots := fs.String("roots", "", logRootsHelp+" (default: the roots the log was initialised or last served with, else mozilla)")
	asJSON := fs.Bool("json", false, "print JSON")
	files, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return command.UsageError("want at least one chain file (PEM, leaf first, or one DER certificate)")
	}
	var chains [][][]byte
	for _, f := range files {
		b, err := command.ReadLimited(f, ctlog.MaxAddChainBytes)
		if err != nil {
			return err
		}
		c, err := ctlog.ParseChain(b)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		chains = append(chains, c)
	}
	l, err := openLog(env, *data, *roots)
	if err != nil {
		return err
	}
	defer l.Close()
	rs, err := l.AddChains(ctx, chains)
	if err != nil {
		return err
	}
	out := make([]ctlog.AddChainResponse, len(rs))
	for i, r := range rs {
		out[i] = ctlog.AddChainResponse{Index: r.Index, Key: hex.EncodeToString(r.Key[:]), SCT: r.SCT, Duplicate: r.Duplicate}
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, out)
	}
	for i, r := range out {
		dup := ""
		if r.Duplicate {
			dup = " (already logged)"
		}
		fmt.Fprintf(env.Stdout, "%s  index %d  sct %s%s\n", files[i], r.Index, r.SCT.Time().UTC().Format(time.RFC3339Nano), dup)
	}
	return nil
}

func logImport(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log import", "[--data DIR] (DIRECTORY | --jsonl FILE)")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory")
	jsonl := fs.String("jsonl", "", "JSON-lines file of {\"chain\": [base64 DER, ...]} objects (- for stdin)")
	roots := fs.String("roots", "", logRootsHelp+" (default: the roots the log was initialised or last served with, else mozilla)")
	build := fs.Bool("build", false, "build and sign the sorted tree after importing")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if (*jsonl == "") == (len(pos) != 1) {
		return command.UsageError("want one directory or --jsonl FILE")
	}
	l, err := openLog(env, *data, *roots)
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	progress := func(s ctlog.ImportStats) {
		fmt.Fprintf(env.Stderr, "\rimported %d chains (%d new) in %s", s.Chains, s.Added, time.Since(start).Round(time.Second))
	}
	var st *ctlog.ImportStats
	if *jsonl != "" {
		in := env.Stdin
		if *jsonl != "-" {
			f, err := os.Open(*jsonl)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		st, err = l.ImportJSONLines(ctx, in, progress)
	} else {
		st, err = l.ImportDir(ctx, pos[0], progress)
	}
	fmt.Fprintln(env.Stderr)
	if err != nil {
		return fmt.Errorf("%w (%d chains committed before it)", err, st.Chains)
	}
	out := map[string]any{"chains": st.Chains, "added": st.Added, "duplicates": st.Duplicates, "seconds": time.Since(start).Seconds()}
	if *build {
		b, err := l.BuildSorted(ctx)
		if err != nil {
			return err
		}
		out["sorted_size"], out["sorted_entry"] = b.Size, b.EntryIndex
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, out)
	}
	fmt.Fprintf(env.Stdout, "imported %d chains: %d new, %d already logged\n", st.Chains, st.Added, st.Duplicates)
	return nil
}

func logBuild(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log build", "[--data DIR]")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	l, err := ctlog.Open(*data, ctlog.Options{Logf: warnf(slog.New(slog.NewTextHandler(env.Stderr, nil)))})
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	b, err := l.BuildSorted(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"size": b.Size, "root": hex.EncodeToString(b.Root[:]), "entry_index": b.EntryIndex,
			"appended": b.Appended, "log_size": b.LogSize,
			"tree": b.TreePath, "tree_bytes": b.TreeBytes, "seconds": time.Since(start).Seconds(), "checkpoint": string(b.Checkpoint)})
	}
	where := fmt.Sprintf("appended to the log at index %d", b.EntryIndex)
	if !b.Appended {
		where = fmt.Sprintf("unchanged since the head at log index %d: fresh head signed, nothing appended", b.EntryIndex)
	}
	fmt.Fprintf(env.Stdout, "sorted tree of %d certificates, root %x, built from the log's first %d entries\n%s; tree %s (%d bytes)\n%s",
		b.Size, b.Root, b.LogSize, where, b.TreePath, b.TreeBytes, b.Checkpoint)
	return nil
}

func logAudit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log audit", "[--data DIR] [--tree FILE] [--checkpoint FILE] [--previous FILE]\n"+
		"       pkie log audit --url http://LOG --key VKEY|@FILE [--state FILE]")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory (local audit)")
	tree := fs.String("tree", "", "the published sorted tree file to audit (local audit; default: the log's)")
	cpFile := fs.String("checkpoint", "", "the signed sorted-tree checkpoint it was published with (local audit; default: the latest)")
	prev := fs.String("previous", "", "a log checkpoint saved earlier, to check the log grew consistently from it (local audit; default: the one before the latest)")
	logURL := fs.String("url", "", "audit the log at this base URL through its public HTTP API, trusting only --key")
	keyArg := fs.String("key", "", "the log's pinned note verifier key, or @FILE holding it (remote audit)")
	state := fs.String("state", "", "file remembering the last log checkpoint verified; each run checks the log is consistent with it, then updates it (remote audit)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on each API request (remote audit)")
	treeTimeout := fs.Duration("tree-timeout", 30*time.Minute, "bound on the sorted tree download (remote audit)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var rep *ctlog.AuditReport
	if *logURL != "" {
		for _, n := range []string{"data", "tree", "checkpoint", "previous"} {
			if set[n] {
				return command.UsageError("--%s is for a local audit; a remote audit (--url) reads only the log's HTTP API", n)
			}
		}
		if *keyArg == "" {
			return command.UsageError("--url needs --key: the log's pinned verifier key (VKEY or @FILE)")
		}
		if *timeout <= 0 || *treeTimeout <= 0 {
			return command.UsageError("--timeout and --tree-timeout must be positive")
		}
		vkey, err := command.ReadKeyArg(*keyArg)
		if err != nil {
			return command.UsageError("--key: %v", err)
		}
		v, err := ctlog.VerifierFromKey(vkey)
		if err != nil {
			return command.UsageError("--key: %v", err)
		}
		progress := newAuditProgress(env)
		rep, err = ctlog.AuditRemote(ctx, ctlog.RemoteAuditOptions{URL: *logURL, Verifier: v, State: *state,
			RequestTimeout: *timeout, TreeTimeout: *treeTimeout, Progress: progress.report})
		progress.done()
		if err != nil {
			return err
		}
	} else {
		for _, n := range []string{"key", "state", "timeout", "tree-timeout"} {
			if set[n] {
				return command.UsageError("--%s is for a remote audit: give the log's --url", n)
			}
		}
		// An input that cannot be read is a usage error (2), not a log that
		// misbehaved (1).
		if *tree != "" {
			f, err := os.Open(*tree)
			if err != nil {
				return command.UsageError("--tree: %v", err)
			}
			f.Close()
		}
		// The audit reports a database behind the state file as a failed
		// check rather than refusing to open it.
		l, err := ctlog.Open(*data, ctlog.Options{NoStateCheck: true})
		if err != nil {
			return err
		}
		defer l.Close()
		o := ctlog.AuditOptions{TreePath: *tree}
		for _, p := range []struct {
			path string
			dst  *[]byte
		}{{*cpFile, &o.SortedCheckpoint}, {*prev, &o.Previous}} {
			if p.path != "" {
				if *p.dst, err = command.ReadLimited(p.path, 64<<10); err != nil {
					return command.UsageError("%v", err)
				}
			}
		}
		if rep, err = l.Audit(ctx, o); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, map[string]any{"ok": rep.OK(), "report": rep}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "log size %d, sorted tree %d keys, root %s\n", rep.LogSize, rep.SortedSize, rep.SortedRoot)
		for _, c := range rep.Checks {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(env.Stdout, "%s %s", mark, c.Name)
			if c.Detail != "" {
				fmt.Fprintf(env.Stdout, ": %s", c.Detail)
			}
			fmt.Fprintln(env.Stdout)
		}
		if *logURL != "" && *state == "" {
			fmt.Fprintln(env.Stdout, "note: without --state this audit checks the log only against itself: a log that started a new history under its key (a fork) passes it")
		}
	}
	if !rep.OK() {
		return command.Negative()
	}
	return nil
}

// auditProgress shows a remote audit's progress on stderr, at most a few
// times a second.
type auditProgress struct {
	env   *command.Env
	start time.Time
	last  time.Time
	stage string
	shown bool
}

func newAuditProgress(env *command.Env) *auditProgress {
	return &auditProgress{env: env, start: time.Now()}
}

func (p *auditProgress) report(stage string, done, total uint64) {
	now := time.Now()
	if now.Sub(p.last) < 250*time.Millisecond && done != total && stage == p.stage {
		return
	}
	if p.shown && stage != p.stage {
		fmt.Fprintln(p.env.Stderr) // keep the finished stage's last line
	}
	p.last, p.shown, p.stage = now, true, stage
	what := "log entries"
	if stage == "tree" {
		what = "tree bytes"
	}
	fmt.Fprintf(p.env.Stderr, "\rread %d/%d %s (%s)   ", done, total, what, now.Sub(p.start).Round(time.Second))
}

func (p *auditProgress) done() {
	if p.shown {
		fmt.Fprintln(p.env.Stderr)
	}
}
