package serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ct "github.com/google/certificate-transparency-go"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/httplimit"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	rootstore "github.com/pkie/pkie/internal/roots"
)

func Log(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{
		"init": logInit, "serve": logServe, "add": logAdd, "roots": logRoots,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve, add or roots (run \"pkie log -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie log init|serve|add|roots [flags]\n\n"+
			"  init     create a static-ct-api log directory with a fresh ECDSA P-256 key\n"+
			"  serve    serve the log: RFC 6962 submission, static-ct-api tiles, the RFC 6962 read API\n"+
			"  add      submit certificate chains (PEM files) to a running log and print their SCTs\n"+
			"  roots    print the roots a log accepts (--data, or a running log's get-roots with --url)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve, add or roots")
	}
	return sub[args[0]](ctx, env, args[1:])
}

// logRootsHelp explains --roots.
const logRootsHelp = "accepted roots: mozilla (Mozilla's NSS store, as public CT logs accept) or a PEM file"

func logInit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log init", "[--data DIR] --origin NAME [--roots mozilla|FILE]")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory")
	origin := fs.String("origin", "", "the log's URL prefix without scheme, in lower case, e.g. log.example.org/2026h1: its checkpoint origin and key name (required)")
	roots := fs.String("roots", "mozilla", logRootsHelp+"; copied into the log directory ("+ctlog.RootsFile+")")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *origin == "" {
		return command.UsageError("--origin is required")
	}
	pemRoots, err := rootsPEM(*roots)
	if err != nil {
		return command.UsageError("--roots: %v", err)
	}
	vkey, err := ctlog.Init(ctx, *data, *origin, ctlog.InitOptions{Roots: pemRoots})
	if err != nil {
		if strings.Contains(err.Error(), "origin") {
			return command.UsageError("%v", err)
		}
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]string{"data": *data, "origin": *origin, "verifier_key": vkey})
	}
	fmt.Fprintf(env.Stdout, "log %q initialised in %s (keys 0600)\nverifier key (pin it in monitors and provers):\n%s\n", *origin, *data, vkey)
	return nil
}

// rootsPEM resolves --roots to PEM: Mozilla's store, or a file's
// certificates.
func rootsPEM(choice string) ([]byte, error) {
	if choice == "mozilla" {
		s, err := rootstore.Mozilla()
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		for _, c := range s.Certs {
			pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
		return b.Bytes(), nil
	}
	b, err := command.ReadLimited(choice, 16<<20)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", choice)
	}
	return b, nil
}

// logServeFlags names ctlog.ServeOptions' fields as log serve's flags do.
var logServeFlags = map[string]string{
	"BodyTimeout": "--body-timeout", "MaxInFlight": "--max-in-flight", "MaxAddChain": "--max-add-chain", "MaxPerClient": "--max-in-flight-per-ip",
	"CheckpointInterval": "--checkpoint-interval", "NotAfterStart": "--not-after-start", "NotAfterLimit": "--not-after-limit",
}

func logServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log serve", "[flags]")
	data := fs.String("data", defaultDataDir(env, "log"), "log directory (from pkie log init)")
	listen := fs.String("listen", "127.0.0.1:8091", "HTTP listen address")
	mysqlDSN := fs.String("mysql", "", "store the log in this MySQL or MariaDB database (go-sql-driver DSN, e.g. user:pass@tcp(db:3306)/ctlog) instead of "+ctlog.TilesDir+"/ in the log directory")
	notAfterStart := fs.String("not-after-start", "", "accept only leaves expiring at or after this time (RFC 3339): a temporal shard's start")
	notAfterLimit := fs.String("not-after-limit", "", "accept only leaves expiring before this time (RFC 3339): a temporal shard's end")
	rejectExpired := fs.Bool("reject-expired", false, "refuse leaves that have expired")
	eku := fs.String("eku", "any", "extended key usage a leaf must carry: any, or serverAuth")
	checkpointEvery := fs.Duration("checkpoint-interval", 0, "how often a grown tree gets a new checkpoint: on POSIX storage add-chain waits about this long at most, on MySQL up to twice it (0: 200ms, 1s with --mysql)")
	maxInFlight := fs.Int("max-in-flight", 64, "read requests (checkpoint, tiles, issuers, RFC 6962 reads) handled at once; more get 503")
	maxAddChain := fs.Int("max-add-chain", 64, "add-chain and add-pre-chain requests handled at once, apart from reads; more get 503")
	perIP := fs.Int("max-in-flight-per-ip", 0, "one client address's share of each of those (0: a quarter)")
	bodyTimeout := fs.Duration("body-timeout", httplimit.DefaultBodyTimeout, "time an add-chain body may take to arrive, plus 1 s per 64 KiB")
	conns := connFlags(fs)
	asJSON := fs.Bool("json", false, "print the startup information (address, origin, verifier key, data directory) as one JSON line, and the logs as JSON")
	sortedEvery := fs.Duration("sorted-interval", 30*time.Second, "how often the sorted tree of the log's certificates (served under /pkie/sorted/) follows the log and its head is signed again; keep it well below clients' maximum head age")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *sortedEvery <= 0 {
		return command.UsageError("--sorted-interval must be positive")
	}
	policy, err := logPolicy(*notAfterStart, *notAfterLimit, *rejectExpired, *eku)
	if err != nil {
		return err
	}
	opts := ctlog.ServeOptions{Policy: policy, CheckpointInterval: *checkpointEvery,
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
	defer ln.Close()
	logger := serveLogger(env, *asJSON)
	// Tessera logs through klog: into this command's log, not around it.
	defer command.SetStorageLog(logger.Handler())()
	var l *ctlog.Log
	drain, err := routeStderr(logger, func() (err error) {
		l, err = ctlog.Open(ctx, *data, ctlog.Options{Policy: opts.Policy, MySQLDSN: *mysqlDSN, CheckpointInterval: opts.CheckpointInterval})
		return err
	})
	if err != nil {
		drain()
		return err
	}
	closed := false
	closeLog := func() error {
		if closed {
			return nil
		}
		closed = true
		err := l.Close()
		drain()
		return err
	}
	defer closeLog()
	// pkie's sorted tree of the log's certificates, under /pkie/sorted/:
	// the same follower and mirror a prover runs over any log, reading
	// this one through its Reader and signing with the log's head key.
	r := l.Reader()
	sorted, err := ctprover.OpenMirror(ctx, ctprover.MirrorConfig{LogKey: l.VerifierKey(),
		Fetch:         &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer},
		MirrorKeyFile: filepath.Join(*data, ctlog.HeadKeyFile), Dir: filepath.Join(*data, SortedDir), Interval: *sortedEvery, Logger: logger})
	if err != nil {
		return err
	}
	defer sorted.Close()
	if _, err := sorted.Sync(ctx); err != nil {
		return fmt.Errorf("the sorted tree of the log's certificates: %w", err)
	}
	go sorted.Run(ctx)
	opts.Extension = http.StripPrefix(SortedPath, sorted.Handler())
	srv := ctlog.NewHTTPServer(l.Handler(opts.HandlerOptions))
	go func() { <-ctx.Done(); srv.Close() }()
	storage := filepath.Join(*data, ctlog.TilesDir)
	if *mysqlDSN != "" {
		storage = "mysql"
	}
	logger.Info("log listening", "origin", l.Origin(), "addr", ln.Addr().String(), "storage", storage)
	info := map[string]any{"listening": ln.Addr().String(), "origin": l.Origin(), "verifier_key": l.VerifierKey(),
		"head_verifier_key": l.HeadVerifierKey(), "data": *data, "storage": storage}
	if err := printServing(env, *asJSON, info, "listening "+ln.Addr().String()); err != nil {
		return err
	}
	if err := serveLimited(srv, ln, co); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	// Entries accepted are integrated and published before the last line.
	if err := closeLog(); err != nil {
		logger.Error("closing the log", "err", err)
	}
	logStopped(logger, "log", ctx)
	return nil
}

// Where pkie log serve keeps and serves the sorted tree of the log's
// certificates: SortedDir in the log's data directory (the follower's and
// the mirror's state), SortedPath on its HTTP server (head, tree, healthz).
const (
	SortedDir  = "sorted"
	SortedPath = "/pkie/sorted"
)

// routeStderr runs open with the process's stderr replaced by a pipe whose
// lines go to logger, and returns a function that closes the pipe and
// waits for its last lines. Tessera's antispam index (badger) writes its
// log straight to the os.Stderr it finds when it is opened, and keeps that
// file; routed, its lines are this command's log lines (JSON with --json)
// instead of text interleaved with them. Only a serve command, which owns
// its process, may do this.
func routeStderr(logger *slog.Logger, open func() error) (drain func(), err error) {
	r, w, perr := os.Pipe()
	if perr != nil {
		return func() {}, open()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				logger.Info("storage", "line", line)
			}
		}
	}()
	saved := os.Stderr
	os.Stderr = w
	err = open()
	os.Stderr = saved
	return func() { w.Close(); <-done }, err
}

func logPolicy(start, limit string, rejectExpired bool, eku string) (ctlog.Policy, error) {
	p := ctlog.Policy{RejectExpired: rejectExpired}
	for _, f := range []struct {
		flag, v string
		t       *time.Time
	}{{"--not-after-start", start, &p.NotAfterStart}, {"--not-after-limit", limit, &p.NotAfterLimit}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			return p, command.UsageError("%s: want an RFC 3339 time such as 2026-07-01T00:00:00Z: %v", f.flag, err)
		}
		*f.t = t
	}
	switch eku {
	case "any":
	case "serverAuth":
		p.ExtKeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	default:
		return p, command.UsageError("--eku: want any or serverAuth, not %q", eku)
	}
	return p, nil
}

func logAdd(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log add", "--url URL [--precert] CHAIN_FILE...")
	u := fs.String("url", "", "the log's submission prefix, e.g. http://127.0.0.1:8091 (required)")
	precert := fs.Bool("precert", false, "submit precertificate chains (add-pre-chain)")
	timeout := fs.Duration("timeout", 30*time.Second, "time one submission may take")
	asJSON := fs.Bool("json", false, "print JSON")
	files, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *u == "" {
		return command.UsageError("--url is required")
	}
	if len(files) == 0 {
		return command.UsageError("want at least one chain file (PEM certificates, leaf first)")
	}
	var chains [][][]byte
	for _, f := range files {
		b, err := command.ReadLimited(f, ctlog.MaxAddChainBytes)
		if err != nil {
			return err
		}
		c, err := parsePEMChain(b)
		if err != nil {
			return command.UsageError("%s: %v", f, err)
		}
		chains = append(chains, c)
	}
	path := "/ct/v1/add-chain"
	if *precert {
		path = "/ct/v1/add-pre-chain"
	}
	type result struct {
		File      string `json:"file"`
		LeafIndex uint64 `json:"leaf_index"`
		Timestamp uint64 `json:"timestamp"`
		LogID     []byte `json:"log_id"`
		SCT       []byte `json:"sct"` // the TLS-encoded SignedCertificateTimestamp
	}
	var out []result
	hc := &http.Client{Timeout: *timeout}
	for i, chain := range chains {
		res, err := submit(ctx, hc, strings.TrimSuffix(*u, "/")+path, chain)
		if err != nil {
			return fmt.Errorf("%s: %w", files[i], err)
		}
		sct, err := res.ToSignedCertificateTimestamp()
		if err != nil {
			return fmt.Errorf("%s: the log's answer: %w", files[i], err)
		}
		r := result{File: files[i], Timestamp: sct.Timestamp, LogID: sct.LogID.KeyID[:]}
		if r.LeafIndex, err = ctwire.LeafIndex(sct.Extensions); err != nil {
			return fmt.Errorf("%s: the log's SCT: %w", files[i], err)
		}
		if r.SCT, err = tlsSCT(sct); err != nil {
			return err
		}
		out = append(out, r)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, out)
	}
	for _, r := range out {
		fmt.Fprintf(env.Stdout, "%s  leaf_index %d  sct %s  %s\n", r.File, r.LeafIndex,
			time.UnixMilli(int64(r.Timestamp)).UTC().Format(time.RFC3339Nano), base64.StdEncoding.EncodeToString(r.SCT))
	}
	return nil
}

// submit posts one chain as RFC 6962 add-chain JSON and reads the answer,
// bounded.
func submit(ctx context.Context, hc *http.Client, u string, chain [][]byte) (*ct.AddChainResponse, error) {
	body, err := json.Marshal(ct.AddChainRequest{Chain: chain})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, command.UsageError("--url: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"error_message"`
			Error   string `json:"error"`
		}
		json.Unmarshal(b, &e)
		msg := e.Message + e.Error
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("the log refused the chain (%s): %s", resp.Status, msg)
	}
	var res ct.AddChainResponse
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("the log's answer is not RFC 6962 add-chain JSON: %w", err)
	}
	return &res, nil
}

func tlsSCT(sct *ct.SignedCertificateTimestamp) ([]byte, error) {
	b, err := ctlog.MarshalSCT(sct)
	if err != nil {
		return nil, fmt.Errorf("encoding the SCT: %w", err)
	}
	return b, nil
}

// parsePEMChain reads PEM certificates, leaf first.
func parsePEMChain(b []byte) ([][]byte, error) {
	var chain [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(chain), err)
		}
		chain = append(chain, blk.Bytes)
	}
	if len(chain) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	if len(chain) > ctlog.MaxChainCerts {
		return nil, fmt.Errorf("chain of %d certificates, at most %d accepted", len(chain), ctlog.MaxChainCerts)
	}
	return chain, nil
}

func logRoots(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "log roots", "(--data DIR | --url URL)")
	data := fs.String("data", "", "log directory: print its "+ctlog.RootsFile)
	u := fs.String("url", "", "a running log's submission prefix: print what its get-roots answers")
	asJSON := fs.Bool("json", false, "print JSON: the roots as base64 DER")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if (*data == "") == (*u == "") {
		return command.UsageError("want one of --data and --url")
	}
	var roots [][]byte
	if *data != "" {
		b, err := os.ReadFile(filepath.Join(*data, ctlog.RootsFile))
		if err != nil {
			return err
		}
		if roots = allPEM(b); len(roots) == 0 {
			return fmt.Errorf("%s holds no roots", ctlog.RootsFile)
		}
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(*u, "/")+"/ct/v1/get-roots", nil)
		if err != nil {
			return command.UsageError("--url: %v", err)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("get-roots: %s", resp.Status)
		}
		var r struct {
			Certificates [][]byte `json:"certificates"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&r); err != nil {
			return fmt.Errorf("get-roots: %w", err)
		}
		roots = r.Certificates
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"certificates": roots})
	}
	for _, d := range roots {
		if err := pem.Encode(env.Stdout, &pem.Block{Type: "CERTIFICATE", Bytes: d}); err != nil {
			return err
		}
	}
	return nil
}

func allPEM(b []byte) [][]byte {
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type == "CERTIFICATE" {
			out = append(out, blk.Bytes)
		}
	}
}
