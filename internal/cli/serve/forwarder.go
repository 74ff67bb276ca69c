package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/forwarder"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
)

func Forwarder(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{
		"init": forwarderInit, "serve": forwarderServe, "bundle": forwarderBundle,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve or bundle (run \"pkie forwarder -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie forwarder init|serve|bundle [flags]\n\n"+
			"  init     create a data directory: the forwarder's TLS key and its identifier key\n"+
			"  serve    relay sealed submissions to the clouds named and sealed proofs to clients, over QUIC and TLS/TCP\n"+
			"  bundle   print the bundle clients pin the forwarder by")
		if len(args) > 0 && command.IsHelp(args[0]) {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve or bundle")
	}
	return sub[args[0]](ctx, env, args[1:])
}

func forwarderInit(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "forwarder init", "[--data DIR] [--name NAME]")
	data := fs.String("data", defaultDataDir(env, "forwarder"), "data directory")
	name := fs.String("name", "", "the forwarder's name, shown in its bundle (default: the host name)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "pkie-forwarder"
		}
		*name = h
	}
	d, err := forwarder.Init(*data, *name)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": *data, "name": d.Name, "spki_sha256": d.SPKIHash()})
	}
	fmt.Fprintf(env.Stdout, "forwarder %q initialised in %s (keys 0600)\nnext: pkie forwarder serve --data %s --cloud CLOUD.bundle --quic :4443 --tcp :4443 --http localhost:9443\n",
		d.Name, *data, *data)
	return nil
}

// bundleFiles is a repeatable --cloud FILE flag.
type bundleFiles []*pecwire.Bundle

func (b *bundleFiles) String() string { return fmt.Sprint(len(*b)) }

func (b *bundleFiles) Set(v string) error {
	bd, err := pecwire.ReadBundle(v)
	if err != nil {
		return err
	}
	*b = append(*b, bd)
	return nil
}

func forwarderServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "forwarder serve", "--cloud FILE... [--data DIR] [--quic ADDR] [--tcp ADDR] [--http ADDR] [flags]")
	data := fs.String("data", defaultDataDir(env, "forwarder"), "data directory (from pkie forwarder init)")
	var clouds bundleFiles
	fs.Var(&clouds, "cloud", "bundle `FILE` of a cloud to relay sealed submissions to (repeatable); submissions for any other cloud are refused, and only these clouds, authenticated by their certificates, may send proofs on sessions of their own")
	quicAddr := fs.String("quic", ":4443", "UDP address of the QUIC listener (empty: none)")
	tcpAddr := fs.String("tcp", ":4443", "TCP address of the TLS listener (empty: none)")
	httpAddr := fs.String("http", "localhost:9443", "address of the plain-HTTP listener for /metrics and /healthz (empty: none)")
	bind := fs.String("bind", "", "local IP address the sessions to clouds are opened from over TCP (default: the system's choice)")
	keepalive := fs.Duration("keepalive", forwarder.DefaultKeepalive, "ping interval announced to clients")
	missed := fs.Int("missed-pings", forwarder.DefaultMissedPings, "intervals a session may stay silent before it is dropped")
	maxClients := fs.Int("max-clients", forwarder.DefaultMaxClients, "registered clients at most")
	maxSessions := fs.Int("max-sessions", 0, fmt.Sprintf("sessions at most, registered or not (default max-clients + max(max-clients/4, 64), at most the open-file limit less %d)", forwarder.FileReserve))
	perAddr := fs.Int("max-sessions-per-addr", forwarder.DefaultMaxSessionsAddr, "sessions per address (IPv6: per /64)")
	maxFrame := fs.Int("max-frame", pecwire.DefaultMaxFrame, "largest message body accepted, bytes")
	maxPending := fs.Int("max-pending", forwarder.DefaultMaxPending, "messages queued for a session at most")
	lifetime := fs.Duration("ephid-lifetime", forwarder.DefaultEphIDLifetime, "how long an issued identifier stays usable (and how long a used one is remembered)")
	window := fs.Duration("use-window", forwarder.DefaultUseWindow, "how long after its first use an identifier's connection may still receive proofs")
	maxUsed := fs.Int("max-used", forwarder.DefaultMaxUsed, "identifiers remembered as used at most; beyond it submissions are refused busy")
	rate := fs.Float64("submit-rate", forwarder.DefaultSubmitRate, "sealed submissions per second per client (burst twice that)")
	asJSON := fs.Bool("json", false, "print the startup information (addresses, name, key hash, clouds, data directory) as one JSON line, and the logs as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(clouds) == 0 {
		return command.UsageError("at least one --cloud bundle is required")
	}
	if *quicAddr == "" && *tcpAddr == "" {
		return command.UsageError("--quic and --tcp are both empty: a forwarder needs at least one listener")
	}
	if *missed <= 0 || *maxClients <= 0 || *perAddr <= 0 || *maxPending <= 0 || *maxUsed <= 0 || *rate <= 0 ||
		*keepalive <= 0 || *lifetime <= 0 || *window <= 0 {
		return command.UsageError("limits, durations and rates must be positive")
	}
	if *maxSessions < 0 {
		return command.UsageError("--max-sessions must not be negative")
	}
	if lim := httplimit.FileLimit(); *maxSessions > forwarder.SessionsFor(lim) || forwarder.SessionsFor(lim) < 1 {
		return command.UsageError("an open-file limit of %d allows %d sessions (%d descriptors are kept for /healthz, /metrics and the sessions to clouds), --max-sessions asks for %d: raise the limit (ulimit -n) or lower --max-sessions",
			lim, max(0, forwarder.SessionsFor(lim)), forwarder.FileReserve, *maxSessions)
	}
	if *maxFrame > pecwire.MaxFrameLimit || *maxFrame < 16<<10 {
		return command.UsageError("--max-frame must be between %d and %d", 16<<10, pecwire.MaxFrameLimit)
	}
	var bindIP net.IP
	if *bind != "" {
		if bindIP = net.ParseIP(*bind); bindIP == nil {
			return command.UsageError("--bind %q is not an IP address", *bind)
		}
	}
	d, err := forwarder.Load(*data)
	if err != nil {
		return err
	}
	ls, err := bindSessionListeners(*quicAddr, *tcpAddr, *httpAddr)
	if err != nil {
		return err
	}
	defer ls.Close()
	logger := serveLogger(env, *asJSON)
	f, err := forwarder.New(forwarder.Config{
		Certificate: d.Certificate, EphIDKey: d.EphIDKey, Clouds: clouds, Logger: logger,
		Keepalive: *keepalive, MissedPings: *missed, MaxClients: *maxClients, MaxSessions: *maxSessions, MaxSessionsPerAddr: *perAddr,
		MaxFrame: *maxFrame, MaxPending: *maxPending, EphIDLifetime: *lifetime, UseWindow: *window,
		MaxUsed: *maxUsed, SubmitRate: *rate, UpstreamBind: bindIP,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addrs, wait := ls.serve(ctx, cancel, f, httplimit.Options{MaxConns: forwarder.MaxHTTPConns, MaxConnsPerClient: forwarder.MaxHTTPConnsPerAddr})
	logger.Info("forwarder listening", "name", d.Name, "quic", addrs["quic"], "tcp", addrs["tcp"], "http", addrs["http"],
		"clouds", len(clouds), "spki_sha256", d.SPKIHash())
	var cloudNames []string
	for _, c := range clouds {
		cloudNames = append(cloudNames, c.Name)
	}
	first := wait(env, *asJSON, map[string]any{"name": d.Name, "spki_sha256": d.SPKIHash(), "clouds": cloudNames, "data": *data})
	f.Wait()
	if first == nil {
		logStopped(logger, "forwarder", ctx)
	}
	return first
}

func forwarderBundle(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "forwarder bundle", "--point QUICADDR[,TCPADDR]... [--data DIR] [--name NAME] [--json]")
	data := fs.String("data", defaultDataDir(env, "forwarder"), "data directory")
	var points pointFlag
	fs.Var(&points, "point", "an address of the forwarder: host:port of its QUIC listener, then optionally a comma and host:port of its TLS/TCP listener (\",HOST:PORT\": TCP only); repeatable")
	name := fs.String("name", "", "name in the bundle (default: the forwarder's name)")
	asJSON := fs.Bool("json", false, "print one JSON object: the bundle under \"bundle\", beside the data directory, the forwarder's name and key hash")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(points) == 0 {
		return command.UsageError("at least one --point is required")
	}
	d, err := forwarder.Load(*data)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = d.Name
	}
	b := &pecwire.Bundle{Version: pecwire.BundleVersion, Name: *name, Points: points, SPKISHA256: d.SPKIHash()}
	if err := b.Check(); err != nil {
		return command.UsageError("%v", err)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": *data, "name": d.Name, "spki_sha256": d.SPKIHash(), "bundle": b})
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	_, err = env.Stdout.Write(append(out, '\n'))
	return err
}
