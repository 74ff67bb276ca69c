package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

func Notary(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{
		"init": notaryInit, "serve": notaryServe, "bundle": notaryBundle,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve or bundle (run \"pkie notary -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie notary init|serve|bundle [flags]\n\n"+
			"  init     create a data directory with the notary's keys\n"+
			"  serve    serve the Convergence and v1 APIs over HTTPS\n"+
			"  bundle   print the Convergence .notary bundle clients install")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve or bundle")
	}
	return sub[args[0]](ctx, env, args[1:])
}

// defaultDataDir is $XDG_DATA_HOME/pkie/notary (~/.local/share/pkie/notary).
func defaultDataDir(env *command.Env, role string) string {
	base := env.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "pkie", role)
}

func notaryInit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "notary init", "[--data DIR] [--name NAME] [--host H]...")
	data := fs.String("data", defaultDataDir(env, "notary"), "data directory")
	name := fs.String("name", "", "notary name (default: the first --host)")
	var hosts command.StringList
	fs.Var(&hosts, "host", "host name or IP the notary is reached at (repeatable; default localhost, 127.0.0.1)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(hosts) == 0 {
		hosts = command.StringList{"localhost", "127.0.0.1"}
	}
	for _, h := range hosts {
		if err := notary.CheckHost(h); err != nil {
			return command.UsageError("--host %v", err)
		}
	}
	if *name == "" {
		*name = hosts[0]
	}
	id, err := notary.NewIdentity(*name, hosts)
	if err != nil {
		return err
	}
	if err := id.Save(*data); err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": *data, "name": *name, "certificate": string(id.CertPEM)})
	}
	fmt.Fprintf(env.Stdout, "notary %q initialised in %s (keys 0600)\nnext: pkie notary serve --data %s --listen :8443\n", *name, *data, *data)
	return nil
}

func notaryServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "notary serve", "[flags]")
	data := fs.String("data", defaultDataDir(env, "notary"), "data directory (from pkie notary init)")
	listen := fs.String("listen", ":8443", "HTTPS listen address (Convergence and v1 APIs, /metrics, /healthz)")
	dsn := fs.String("db", "", "history store: postgres://… to share with other notaries (default: SQLite in the data directory)")
	allowPrivate := fs.Bool("allow-private", false, "allow probing loopback, private and other non-public addresses")
	maxAge := fs.Duration("max-age", 24*time.Hour, "freshness window: the notary vouches, without a new probe, for every certificate it has seen at a target this recently")
	maxReprobes := fs.Int("max-reprobes", 3, "extra probes when a probe sees another certificate than the one asked about, looking for it among those the target serves at once (0: none)")
	reprobeInterval := fs.Duration("reprobe-interval", time.Minute, "one round of reprobes per target (host name or pinned address) per this interval at most")
	timeout := fs.Duration("probe-timeout", probe.DefaultTimeout, "probe connect + handshake timeout")
	maxProbes := fs.Int("max-probes", 64, "outbound probes in flight at most")
	maxQueue := fs.Int("max-queue", 256, "probes waiting at most; beyond it requests get 503 at once")
	perClient := fs.Int("max-probes-per-client", 0, "probes in flight per client address (IPv6: per /64), with the same share of the queue (default max-probes/8)")
	perTarget := fs.Int("max-probes-per-target", 0, "probes in flight per target host or pinned address, with the same share of the queue (default max-probes/8)")
	maxHistory := fs.Int("max-history", 64, "certificates kept per target in the history, the most recently seen (negative: all)")
	maxRequests := fs.Int("max-requests", 4096, "probing requests (Convergence POST, v1 check) handled at once; more get 503")
	maxReads := fs.Int("max-reads", 1024, "read requests (history GET, v1 key) handled at once, apart from probing requests; more get 503")
	perIPRequests := fs.Int("max-requests-per-ip", 0, "one client address's share of each of those (0: a sixteenth)")
	bodyTimeout := fs.Duration("body-timeout", httplimit.DefaultBodyTimeout, "time a request body may take to arrive")
	conns := connFlags(fs)
	bounceIdle := fs.Duration("bounce-idle-timeout", 60*time.Second, "close a bouncer tunnel idle (or not read) this long")
	bounceListen := fs.String("bounce-listen", "", "also serve a plain-HTTP CONNECT bouncer on this address")
	var bounceAllow command.StringList
	fs.Var(&bounceAllow, "bounce-allow", "host:port of a notary the bouncer may CONNECT to (repeatable)")
	resolve := command.AddResolveFlags(fs, "a target the notary probes, to try named sites on loopback; --allow-private is needed for non-public addresses", true)
	asJSON := fs.Bool("json", false, "print the startup information (addresses, name, keys, data directory) as one JSON line, and the logs as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *maxAge <= 0 || *reprobeInterval <= 0 || *timeout <= 0 {
		return command.UsageError("--max-age, --reprobe-interval and --probe-timeout must be positive")
	}
	if *maxReprobes < 0 || *maxReprobes > 16 {
		return command.UsageError("--max-reprobes must be between 0 and 16")
	}
	reprobes := *maxReprobes
	if reprobes == 0 {
		reprobes = -1 // notary.Config: negative disables, 0 is the default
	}
	popts := probe.Options{Timeout: *timeout, AllowPrivate: *allowPrivate}
	if !resolve.Empty() {
		// The guard would refuse every probe of these names; say so now,
		// not in a 403 to the first client.
		if !*allowPrivate {
			for _, a := range resolve.Addrs() {
				if why := probe.NonPublic(a); why != "" {
					return command.UsageError("--resolve maps a name to %s (%s), which the notary refuses to probe without --allow-private", a, why)
				}
			}
		}
		popts.Lookup = resolve.Lookup
	}
	co, err := conns()
	if err != nil {
		return err
	}
	if *bodyTimeout <= 0 || *bounceIdle <= 0 {
		return command.UsageError("--body-timeout and --bounce-idle-timeout must be positive")
	}
	id, err := notary.LoadIdentity(*data)
	if err != nil {
		return err
	}
	popts.Vantage = id.Name
	if *dsn == "" {
		*dsn = filepath.Join(*data, notary.FileHistory)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// Bound first: a busy port is found before any sync or state write.
	defer ln.Close()
	h, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer h.Close()
	logger := serveLogger(env, *asJSON)
	n, err := notary.New(notary.Config{
		Identity: id, History: h, MaxAge: *maxAge, MaxProbes: *maxProbes, MaxQueue: *maxQueue,
		MaxProbesPerClient: *perClient, MaxProbesPerTarget: *perTarget, MaxHistory: *maxHistory,
		HistoryMarker: filepath.Join(*data, notary.FileHistorySeen), Logger: logger,
		MaxReprobes: reprobes, ReprobeInterval: *reprobeInterval,
		MaxRequests: *maxRequests, MaxReads: *maxReads, MaxRequestsPerClient: *perIPRequests, BodyTimeout: *bodyTimeout, Conns: co,
		Prober: probe.New(popts),
	})
	if err != nil {
		return err
	}
	// A lost database is logged at error level and exported as a metric;
	// the notary serves on, since an empty history is a valid one.
	if _, err := n.CheckHistory(ctx); err != nil {
		return err
	}
	errc := make(chan error, 2)
	info := struct {
		Name      string `json:"name"`
		Listening string `json:"listening"`
		Bouncer   string `json:"bouncer,omitempty"`
		notaryKeys
		Data  string `json:"data"`
		Store string `json:"store"`
	}{Name: id.Name, Listening: ln.Addr().String(), notaryKeys: keysOf(id), Data: *data, Store: storeKind(*dsn)}
	if *bounceListen != "" {
		if len(bounceAllow) == 0 {
			return command.UsageError("--bounce-listen needs at least one --bounce-allow host:port")
		}
		bl, err := net.Listen("tcp", *bounceListen)
		if err != nil {
			return err
		}
		info.Bouncer = bl.Addr().String()
		logger.Info("bouncer listening", "addr", bl.Addr().String(), "allow", strings.Join(bounceAllow, ","))
		b := notary.NewBouncer(bounceAllow, 0)
		b.IdleTimeout, b.Conns = *bounceIdle, co
		go func() { errc <- notary.ServeBouncer(ctx, bl, b) }()
	}
	attrs := []any{"name", id.Name, "addr", ln.Addr().String(), "store", storeKind(*dsn), "allow_private", *allowPrivate}
	if !resolve.Empty() {
		attrs = append(attrs, "resolve", resolve.String())
	}
	logger.Info("notary listening", attrs...)
	// The address line lets scripts and tests that pass port 0 find the port.
	if err := printServing(env, *asJSON, info, "listening "+info.Listening); err != nil {
		return err
	}
	go func() { errc <- n.ServeTLS(ctx, ln) }()
	err = <-errc
	if err == nil || errors.Is(err, context.Canceled) {
		logStopped(logger, "notary", ctx)
		return nil
	}
	return err
}

func storeKind(dsn string) string {
	if strings.HasPrefix(dsn, "postgres") {
		return "postgres"
	}
	return "sqlite:" + dsn
}

func notaryBundle(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "notary bundle", "--host H [--ssl-port P] [--http-port P] [--json] [flags]")
	data := fs.String("data", defaultDataDir(env, "notary"), "data directory")
	host := fs.String("host", "", "host name clients connect to (required)")
	sslPort := fs.Int("ssl-port", 443, "HTTPS port of the notary API")
	httpPort := fs.Int("http-port", 0, "plain-HTTP port of this notary's bouncer (notary serve --bounce-listen), to advertise; none unless given")
	name := fs.String("name", "", "display name (default: the notary's name)")
	region := fs.String("region", "", "region or country code, e.g. US")
	location := fs.String("location", "", "URL the bundle is published at (bundle_location)")
	asJSON := fs.Bool("json", false, "print one JSON object: the bundle under \"bundle\", beside the data directory and the keys it pins")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *host == "" {
		return command.UsageError("--host is required")
	}
	if err := notary.CheckHost(*host); err != nil {
		return command.UsageError("--host %v", err)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"--ssl-port", *sslPort}, {"--http-port", *httpPort}} {
		if p.v < 0 || p.v > 65535 || (p.name == "--ssl-port" && p.v == 0) {
			return command.UsageError("%s %s is out of range", p.name, strconv.Itoa(p.v))
		}
	}
	id, err := notary.LoadIdentity(*data)
	if err != nil {
		return err
	}
	bundle := id.Bundle(*host, *sslPort, *httpPort, *name, *region, *location)
	if *asJSON {
		return command.WriteJSON(env.Stdout, struct {
			Data string `json:"data"`
			notaryKeys
			Bundle notary.Bundle `json:"bundle"`
		}{*data, keysOf(id), bundle})
	}
	b, err := bundle.MarshalIndent()
	if err != nil {
		return err
	}
	_, err = env.Stdout.Write(b)
	return err
}

// command.StringList is a repeatable string flag.
