package serve

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctlog"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/revocation"
)

func Revocation(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{
		"init": revInit, "serve": revServe, "add-crl": revAddCRL, "add-serials": revAddSerials, "publish": revPublish,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve, add-crl, add-serials or publish (run \"pkie revocation -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie revocation init|serve|add-crl|add-serials|publish [flags]\n\n"+
			"  init         create an authority directory with a fresh Ed25519 key\n"+
			"  serve        serve the signed tree and the prover feed over HTTP, republishing periodically\n"+
			"  add-crl      ingest X.509 CRLs (DER or PEM) after checking their issuer's signature\n"+
			"  add-serials  revoke a list of hexadecimal serial numbers of one issuer\n"+
			"  publish      build and sign the tree now")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve, add-crl, add-serials or publish")
	}
	return sub[args[0]](ctx, env, args[1:])
}

func revInit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "revocation init", "[--data DIR] --origin NAME")
	data := fs.String("data", defaultDataDir(env, "revocation"), "authority directory")
	origin := fs.String("origin", "", "checkpoint origin and key name, e.g. revocation.example.org (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *origin == "" {
		return command.UsageError("--origin is required")
	}
	vkey, err := revocation.Init(*data, *origin)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]string{"data": *data, "origin": *origin, "verifier_key": vkey})
	}
	fmt.Fprintf(env.Stdout, "revocation authority %q initialised in %s (key 0600)\nverifier key (pin it in clients and provers):\n%s\n", *origin, *data, vkey)
	return nil
}

func revServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "revocation serve", "[flags]")
	data := fs.String("data", defaultDataDir(env, "revocation"), "authority directory")
	listen := fs.String("listen", "127.0.0.1:8092", "HTTP listen address")
	every := fs.Duration("refresh", time.Minute, "re-sign the tree this often even without updates (keep it well under clients' --proof-max-age)")
	maxInFlight := fs.Int("max-in-flight", 64, "requests handled at once; more get 503")
	perIP := fs.Int("max-in-flight-per-ip", 0, "one client address's share of those (0: a quarter)")
	conns := connFlags(fs)
	fork := forkFlag(fs)
	asJSON := fs.Bool("json", false, "print the startup information (address, origin, verifier key, data directory) as one JSON line, and the logs as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	co, err := conns()
	if err != nil {
		return err
	}
	if *every <= 0 {
		return command.UsageError("--refresh must be positive")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// Bound before anything is built or signed: a busy port must not cost
	// a signed tree head.
	defer ln.Close()
	logger := serveLogger(env, *asJSON)
	a, err := revocation.Open(*data, revocation.Options{AcceptFork: *fork, Logf: warnf(logger)})
	if err != nil {
		return err
	}
	defer a.Close()
	if n, err := a.RemoveStaleTemp(); err != nil {
		logger.Warn(err.Error())
	} else if n > 0 {
		logger.Info("removed temporary files left by an interrupted publication", "files", n)
	}
	up, err := a.Publish(ctx)
	if err != nil {
		return err
	}
	srv := ctlog.NewHTTPServer(a.HandlerWith(revocation.HandlerOptions{MaxInFlight: *maxInFlight, MaxPerClient: *perIP}))
	go a.Run(ctx, *every, func(f string, x ...any) { logger.Error(fmt.Sprintf(f, x...)) })
	go func() { <-ctx.Done(); srv.Close() }()
	logger.Info("revocation authority listening", "origin", a.Origin(), "addr", ln.Addr().String())
	info := map[string]any{"listening": ln.Addr().String(), "origin": a.Origin(), "verifier_key": a.VerifierKey(), "data": *data, "size": up.Size}
	if err := printServing(env, *asJSON, info, "listening "+ln.Addr().String()); err != nil {
		return err
	}
	if err := serveLimited(srv, ln, co); err != nil && ctx.Err() == nil {
		return err
	}
	logStopped(logger, "revocation authority", ctx)
	return nil
}

func printUpdate(env *command.Env, asJSON bool, what string, up *revocation.Update) error {
	if asJSON {
		return command.WriteJSON(env.Stdout, up)
	}
	fmt.Fprintf(env.Stdout, "%s: %d newly revoked, %d already revoked; tree now %d keys, republished %s\n",
		what, up.Added, up.Already, up.Size, up.Published.UTC().Format(time.RFC3339))
	return nil
}

func revAddCRL(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "revocation add-crl", "[--data DIR] --issuer CERT CRL...")
	data := fs.String("data", defaultDataDir(env, "revocation"), "authority directory")
	issuerPath := fs.String("issuer", "", "the CRL issuer's certificate (PEM or DER; required): its key must have signed the CRLs")
	asJSON := fs.Bool("json", false, "print JSON")
	files, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *issuerPath == "" || len(files) == 0 {
		return command.UsageError("want --issuer CERT and at least one CRL file")
	}
	issuer, err := readIssuer(*issuerPath)
	if err != nil {
		return err
	}
	a, err := revocation.Open(*data, revocation.Options{Logf: warnf(slog.New(slog.NewTextHandler(env.Stderr, nil)))})
	if err != nil {
		return err
	}
	defer a.Close()
	var ups []*revocation.Update
	for _, f := range files {
		b, err := command.ReadLimited(f, revocation.MaxCRLBytes)
		if err != nil {
			return err
		}
		up, err := a.AddCRL(ctx, b, issuer)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if !*asJSON {
			printUpdate(env, false, f, up)
		}
		ups = append(ups, up)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, ups)
	}
	return nil
}

func revAddSerials(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "revocation add-serials", "[--data DIR] (--issuer CERT | --issuer-key-id HEX) FILE")
	data := fs.String("data", defaultDataDir(env, "revocation"), "authority directory")
	issuerPath := fs.String("issuer", "", "the issuing CA's certificate (PEM or DER)")
	kidHex := fs.String("issuer-key-id", "", "the issuing CA's key identifier in hex (its subject key identifier)")
	asJSON := fs.Bool("json", false, "print JSON")
	files, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if (*issuerPath == "") == (*kidHex == "") || len(files) != 1 {
		return command.UsageError("want exactly one of --issuer and --issuer-key-id, and one serial-list file (hex, one per line)")
	}
	var kid []byte
	if *issuerPath != "" {
		issuer, err := readIssuer(*issuerPath)
		if err != nil {
			return err
		}
		if kid, err = pkierev.IssuerKeyID(issuer); err != nil {
			return err
		}
	} else if kid, err = hex.DecodeString(*kidHex); err != nil || len(kid) == 0 {
		return command.UsageError("--issuer-key-id %q is not hex", *kidHex)
	}
	b, err := command.ReadLimited(files[0], revocation.MaxCRLBytes)
	if err != nil {
		return err
	}
	serials, err := revocation.ParseSerials(b)
	if err != nil {
		return fmt.Errorf("%s: %w", files[0], err)
	}
	a, err := revocation.Open(*data, revocation.Options{Logf: warnf(slog.New(slog.NewTextHandler(env.Stderr, nil)))})
	if err != nil {
		return err
	}
	defer a.Close()
	up, err := a.AddSerials(ctx, kid, serials, files[0])
	if err != nil {
		return err
	}
	return printUpdate(env, *asJSON, files[0], up)
}

func revPublish(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "revocation publish", "[--data DIR]")
	data := fs.String("data", defaultDataDir(env, "revocation"), "authority directory")
	asJSON := fs.Bool("json", false, "print JSON")
	fork := forkFlag(fs)
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	a, err := revocation.Open(*data, revocation.Options{AcceptFork: *fork, Logf: warnf(slog.New(slog.NewTextHandler(env.Stderr, nil)))})
	if err != nil {
		return err
	}
	defer a.Close()
	p, err := a.Publish(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"size": p.Size, "root": hex.EncodeToString(p.Root[:]), "time": p.Time, "tree": p.TreePath, "checkpoint": string(p.Checkpoint)})
	}
	fmt.Fprintf(env.Stdout, "published %d revoked keys, root %x\n%s", p.Size, p.Root, p.Checkpoint)
	return nil
}

// forkFlag is the operator's deliberate way past the refusal to sign a tree
// behind the last signed checkpoint (docs/operations/proofs.md).
func forkFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("dangerously-accept-fork", false, "start even though the database is behind what the authority last signed (lost or restored database), "+
		"and sign a tree that does not extend it: provers that saw the old tree refuse it, and revocations in the lost part are forgotten")
}

// warnf logs Open's notes about the state file as warnings.
func warnf(l *slog.Logger) func(string, ...any) {
	return func(f string, a ...any) { l.Warn(fmt.Sprintf(f, a...)) }
}

// readIssuer reads the --issuer certificate (PEM or DER, at most 64 KiB).
func readIssuer(path string) (*x509.Certificate, error) {
	b, err := command.ReadLimited(path, 64<<10)
	if err != nil {
		return nil, err
	}
	return revocation.ParseCertificatePEM(b)
}
