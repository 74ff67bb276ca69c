package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/provers"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
)

func Cloud(ctx context.Context, env *command.Env, args []string) error {
	return cloudMain(ctx, env, args, provers.Registry())
}

// CloudWith is Cloud hosting the enhancements of reg: the entry point of a
// cloud binary built outside this module with enhancements of its own
// beside the built-ins (package cloud's Main).
func CloudWith(ctx context.Context, env *command.Env, args []string, reg *pkie.Registry) error {
	return cloudMain(ctx, env, args, reg)
}

// cloudMain is Cloud with the registry the enhancements are looked up
// in, so that tests can host one of their own beside the built-ins.
func cloudMain(ctx context.Context, env *command.Env, args []string, reg *pkie.Registry) error {
	sub := map[string]func(context.Context, *command.Env, []string, *pkie.Registry) error{
		"init": cloudInit, "serve": cloudServe, "bundle": cloudBundle,
	}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want init, serve or bundle (run \"pkie cloud -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie cloud init|serve|bundle [flags]\n\n"+
			"  init     create a data directory: the cloud's TLS key and the enhancements it hosts\n"+
			"  serve    serve PEC clients and servers over QUIC and TLS/TCP, /metrics and /healthz over HTTP\n"+
			"  bundle   print the bundle clients pin the cloud by")
		if len(args) > 0 && command.IsHelp(args[0]) {
			return nil
		}
		return command.UsageError("want a subcommand: init, serve or bundle")
	}
	return sub[args[0]](ctx, env, args[1:], reg)
}

// pkieFlag is a repeatable NAME[=CONFIGFILE] flag.
type pkieFlag []cloud.PKIEConfig

func (p *pkieFlag) String() string {
	var names []string
	for _, c := range *p {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func (p *pkieFlag) Set(v string) error {
	name, file, hasFile := strings.Cut(v, "=")
	if name == "" {
		return errors.New("want NAME or NAME=CONFIGFILE")
	}
	c := cloud.PKIEConfig{Name: name, Config: json.RawMessage("{}")}
	if hasFile {
		raw, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !json.Valid(raw) {
			return fmt.Errorf("%s is not JSON", file)
		}
		c.Config = json.RawMessage(strings.TrimSpace(string(raw)))
	}
	for _, o := range *p {
		if o.Name == name {
			return fmt.Errorf("%s given twice", name)
		}
	}
	*p = append(*p, c)
	return nil
}

// checkPKIEs command.Resolves names against reg (ids and names both accepted) to
// the registered names, and refuses enhancements without a prover.
func checkPKIEs(reg *pkie.Registry, ps []cloud.PKIEConfig) ([]cloud.PKIEConfig, error) {
	out := make([]cloud.PKIEConfig, 0, len(ps))
	for _, p := range ps {
		k, ok := reg.ByName(p.Name)
		if !ok {
			var names []string
			for _, k := range reg.Kinds() {
				if k.NewProver != nil {
					names = append(names, k.Name)
				}
			}
			return nil, command.UsageError("--pkie %s: unknown enhancement; this pkie hosts %s", p.Name, strings.Join(names, ", "))
		}
		if k.NewProver == nil {
			return nil, command.UsageError("--pkie %s: the enhancement has no prover", p.Name)
		}
		p.Name = k.Name
		out = append(out, p)
	}
	return out, nil
}

// checkProverConfigs checks each configuration against its enhancement
// without contacting any TTP or creating anything: a built-in's with its
// strict decoder and NewProver's own checks, any other's as a JSON object.
// A bad configuration is refused when it is written, not at serve.
func checkProverConfigs(ps []cloud.PKIEConfig) error {
	for _, p := range ps {
		checked, err := provers.CheckProverConfig(p.Name, p.Config)
		if !checked {
			var obj map[string]json.RawMessage
			err = json.Unmarshal(p.Config, &obj)
			if err == nil && obj == nil {
				err = errors.New("want a JSON object")
			}
		}
		if err != nil {
			return command.UsageError("--pkie %s: %v", p.Name, err)
		}
	}
	return nil
}

func cloudInit(ctx context.Context, env *command.Env, args []string, reg *pkie.Registry) error {
	fs := command.NewFlags(env, "cloud init", "[--data DIR] [--name NAME] [--pkie NAME[=CONFIGFILE]]... | --data DIR --new-notary-key")
	data := fs.String("data", defaultDataDir(env, "cloud"), "data directory")
	name := fs.String("name", "", "the cloud's name, shown to clients in its bundle (default: the host name)")
	var pkies pkieFlag
	fs.Var(&pkies, "pkie", "enable an enhancement, with its prover configuration from a JSON file (repeatable; default: notary alone, with its defaults)")
	newKey := fs.Bool("new-notary-key", false, "in an existing data directory whose notary keys are lost for good, create new ones (then republish the bundle)")
	newHPKE := fs.Bool("new-hpke-key", false, "in an existing data directory without one (made before privacy forwarding), create the HPKE key of submissions sealed through a privacy forwarder (then republish the bundle)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *newHPKE {
		if *name != "" || len(pkies) > 0 || *newKey {
			return command.UsageError("--new-hpke-key takes no --name, --pkie or --new-notary-key: it only creates the HPKE key in an existing data directory")
		}
		if _, err := cloud.Load(*data); err != nil {
			return err
		}
		if _, err := cloud.NewHPKEKey(*data); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "new HPKE key in %s\npublish the bundle again (pkie cloud bundle --data %s --point ...) so that clients can seal submissions to it\n", filepath.Join(*data, cloud.FileHPKE), *data)
		return nil
	}
	if *newKey {
		if *name != "" || len(pkies) > 0 {
			return command.UsageError("--new-notary-key takes no --name or --pkie: it only creates the notary's keys in an existing data directory")
		}
		return newNotaryKey(env, *data, *asJSON)
	}
	if *name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "pkie-cloud"
		}
		*name = h
	}
	if len(pkies) == 0 {
		pkies = pkieFlag{{Name: pkienotary.Name, Config: json.RawMessage("{}")}}
	}
	ps, err := checkPKIEs(reg, pkies)
	if err != nil {
		return err
	}
	if err := checkProverConfigs(ps); err != nil {
		return err
	}
	d, err := cloud.Init(*data, cloud.FileConfig{Name: *name, PKIEs: ps})
	if err != nil {
		return err
	}
	// The notary enhancement's key is the cloud's own, created here and
	// nowhere else: serve and bundle refuse a data directory without it
	// rather than mint a key no client pinned.
	if hasPKIE(ps, pkienotary.Name) {
		dir := d.ProverDir(pkienotary.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if _, err := notaryprover.Init(dir, notaryConfig(ps)); err != nil {
			return err
		}
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": *data, "name": *name, "spki_sha256": d.SPKIHash(), "pkies": pkieNames(ps)})
	}
	fmt.Fprintf(env.Stdout, "cloud %q initialised in %s (key 0600), hosting %s\nnext: pkie cloud serve --data %s --quic :4433 --tcp :4433 --http localhost:9433\n",
		*name, *data, strings.Join(pkieNames(ps), ", "), *data)
	return nil
}

func hasPKIE(ps []cloud.PKIEConfig, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

func pkieNames(ps []cloud.PKIEConfig) []string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names
}

// notaryConfig returns the notary enhancement's prover configuration in ps.
func notaryConfig(ps []cloud.PKIEConfig) json.RawMessage {
	for _, p := range ps {
		if p.Name == pkienotary.Name {
			return p.Config
		}
	}
	return nil
}

// newNotaryKey creates new notary keys in an existing data directory whose
// notary's keys are lost for good: the recovery `pkie cloud serve` and
// `pkie cloud bundle` name when they refuse a directory without them.
func newNotaryKey(env *command.Env, data string, asJSON bool) error {
	d, err := cloud.Load(data)
	if err != nil {
		return err
	}
	if !hasPKIE(d.Config.PKIEs, pkienotary.Name) {
		return command.UsageError("--new-notary-key: the cloud in %s does not host the notary enhancement", data)
	}
	dir := d.ProverDir(pkienotary.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := notaryprover.Init(dir, notaryConfig(d.Config.PKIEs))
	if err != nil {
		return err
	}
	if asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": data, "notary_key": key})
	}
	fmt.Fprintf(env.Stdout, "new notary key %s in %s\nclients that pinned the old bundle now fail every notary proof: publish the new one (pkie cloud bundle --data %s --point ...)\n",
		key, dir, data)
	return nil
}

// mergePKIEs returns base with each of over replacing the entry of its
// name or added after them.
func mergePKIEs(base, over []cloud.PKIEConfig) []cloud.PKIEConfig {
	out := append([]cloud.PKIEConfig(nil), base...)
next:
	for _, o := range over {
		for i := range out {
			if out[i].Name == o.Name {
				out[i] = o
				continue next
			}
		}
		out = append(out, o)
	}
	return out
}

// cloudServeFlags names cloud.ServeOptions' fields as cloud serve's flags
// do.
var cloudServeFlags = map[string]string{
	"QUIC": "--quic", "TCP": "--tcp", "Peers": "--peer",
	"Keepalive": "--keepalive", "MissedPings": "--missed-pings", "HandshakeTimeout": "--handshake-timeout", "WriteTimeout": "--write-timeout",
	"MaxClients": "--max-clients", "MaxSessions": "--max-sessions", "MaxSessionsPerAddr": "--max-sessions-per-addr",
	"MaxFrame": "--max-frame", "MaxPending": "--max-pending", "MaxJobs": "--max-jobs", "MaxJobsPerAddr": "--max-jobs-per-addr",
	"MaxJobsPerClient": "--max-jobs-per-client", "MaxProverCalls": "--max-prover-calls", "MaxBudget": "--max-budget",
}

func cloudServe(ctx context.Context, env *command.Env, args []string, reg *pkie.Registry) error {
	fs := command.NewFlags(env, "cloud serve", "[--data DIR] [--quic ADDR] [--tcp ADDR] [--http ADDR] [--pkie NAME=CONFIGFILE]... [flags]")
	data := fs.String("data", defaultDataDir(env, "cloud"), "data directory (from pkie cloud init)")
	quicAddr := fs.String("quic", ":4433", "UDP address of the QUIC listener (empty: none)")
	tcpAddr := fs.String("tcp", ":4433", "TCP address of the TLS listener, the fallback where UDP is blocked (empty: none)")
	httpAddr := fs.String("http", "localhost:9433", "address of the plain-HTTP listener for /metrics and /healthz (empty: none)")
	var over pkieFlag
	fs.Var(&over, "pkie", "replace, for this run, the prover configuration of an enhancement the data directory enables, with that in a JSON file (repeatable)")
	keepalive := fs.Duration("keepalive", cloud.DefaultKeepalive, "ping interval announced to clients")
	missed := fs.Int("missed-pings", cloud.DefaultMissedPings, "intervals a session may stay silent before it is dropped and its client identifier freed")
	handshake := fs.Duration("handshake-timeout", cloud.DefaultHandshakeTimeout, "time for a TLS or QUIC handshake and a session's first message")
	writeTimeout := fs.Duration("write-timeout", cloud.DefaultWriteTimeout, "time for a session to take one message; a session slower than that is dropped")
	maxClients := fs.Int("max-clients", cloud.DefaultMaxClients, "registered clients at most")
	maxSessions := fs.Int("max-sessions", 0, fmt.Sprintf("sessions at most, registered or submitting (default max-clients + max(max-clients/4, 64), at most the open-file limit less %d; here %d)",
		cloud.FileReserve, max(0, min(cloud.DefaultMaxClients+cloud.DefaultMaxClients/4, cloud.SessionsFor(httplimit.FileLimit())))))
	perAddrSessions := fs.Int("max-sessions-per-addr", cloud.DefaultMaxSessionsAddr, "sessions per client address (IPv6: per /64)")
	maxFrame := fs.Int("max-frame", pecwire.DefaultMaxFrame, "largest message body accepted, bytes")
	maxPending := fs.Int("max-pending", cloud.DefaultMaxPending, "messages queued for a session at most; a session that falls further behind is dropped")
	maxJobs := fs.Int("max-jobs", cloud.DefaultMaxJobs, "submissions being proved at once; beyond it submissions are refused with busy at once")
	perAddrJobs := fs.Int("max-jobs-per-addr", 0, "one submitter address's share of --max-jobs (default max-jobs/8)")
	perClientJobs := fs.Int("max-jobs-per-client", cloud.DefaultMaxJobsPerClient, "submissions being proved for one registered client: this many of its own, as many more by others for it (a quarter per submitter address)")
	maxCalls := fs.Int("max-prover-calls", cloud.DefaultMaxProverCalls, "calls in flight to each prover; beyond it that enhancement answers busy")
	maxBudget := fs.Duration("max-budget", cloud.DefaultMaxBudget, "longest a submission may wait for its proofs; also the budget of a submission that names none")
	submitRate := fs.Float64("submit-rate", cloud.DefaultSubmitRate, "submissions a second from one address (IPv6: per /64), refused or not, with twice that as burst; negative: no limit")
	sessionRate := fs.Float64("session-submit-rate", cloud.DefaultSessionRate, "submissions a second on one session, with twice that as burst; negative: no limit")
	maxRemembered := fs.Int("max-remembered", cloud.DefaultMaxRemembered, "proved submissions remembered for duplicate suppression, all sessions together")
	var peers command.StringList
	fs.Var(&peers, "peer", "base `URL` of another replica's HTTP listener (repeatable): a CT or revocation prover without state of its own learns from it what its TTP signed before")
	trustFirst := fs.Bool("trust-first-head", false, "let a revocation prover that has no state and learns no head from a --peer accept the first head its TTP signs (the first start of a new cloud's first replica only; by default it serves nothing until it knows what its TTP signed before). The ct prover follows its log from the first entry and needs no such word")
	var forwarders bundleFiles
	fs.Var(&forwarders, "forwarder", "bundle `FILE` of a privacy forwarder PEC servers may name for their clients' sealed proofs (repeatable); sessions are opened only to these")
	asJSON := fs.Bool("json", false, "print the startup information (addresses, name, enhancements, key hash, data directory) as one JSON line, and the logs as JSON")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	opts := cloud.ServeOptions{
		Config: cloud.Config{
			Keepalive: *keepalive, MissedPings: *missed, HandshakeTimeout: *handshake, WriteTimeout: *writeTimeout,
			MaxClients: *maxClients, MaxSessions: *maxSessions, MaxSessionsPerAddr: *perAddrSessions,
			MaxFrame: *maxFrame, MaxPending: *maxPending, MaxJobs: *maxJobs, MaxJobsPerAddr: *perAddrJobs, MaxJobsPerClient: *perClientJobs,
			MaxProverCalls: *maxCalls, MaxBudget: *maxBudget, MaxRemembered: *maxRemembered,
			SubmitRate: *submitRate, SessionSubmitRate: *sessionRate, Forwarders: forwarders,
		},
		QUIC: *quicAddr, TCP: *tcpAddr, HTTP: *httpAddr, Peers: peers,
	}
	// Refused before anything is loaded, bound or synced.
	if err := command.OptionError(opts.Validate(), cloudServeFlags); err != nil {
		return err
	}
	d, err := cloud.Load(*data)
	if err != nil {
		return err
	}
	// --pkie replaces the configuration of an enhancement init enabled,
	// never enables another: what a cloud hosts is in cloud.json, where
	// `pkie cloud bundle` reads it (the notary's key) too.
	over, err = checkPKIEs(reg, over)
	if err != nil {
		return err
	}
	for _, o := range over {
		if !hasPKIE(d.Config.PKIEs, o.Name) {
			return command.UsageError("--pkie %s: not enabled in %s; enable it with pkie cloud init, so that pkie cloud bundle knows it too", o.Name, *data)
		}
	}
	if err := checkProverConfigs(over); err != nil {
		return err
	}
	ps, err := checkPKIEs(reg, mergePKIEs(d.Config.PKIEs, over))
	if err != nil {
		return err
	}
	hk, err := d.LoadHPKE()
	if err != nil {
		return err
	}
	// Bind first: a busy port is found before any prover syncs.
	ls, err := bindSessionListeners(*quicAddr, *tcpAddr, *httpAddr)
	if err != nil {
		return err
	}
	defer ls.Close()
	logger := serveLogger(env, *asJSON)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Syncs, a ct mirror's tile fetches and peers share a few connections
	// per host, so that they cannot spend the descriptors sessions leave.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = cloud.MaxConnsPerTTP
	provers, err := d.BuildProvers(ctx, reg, ps, cloud.ProverOptions{HTTP: &http.Client{Timeout: 30 * time.Second, Transport: tr}, Log: logger,
		Peers: opts.Peers, TrustFirstHead: *trustFirst})
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range provers {
			if c, ok := p.(io.Closer); ok {
				c.Close()
			}
		}
	}()
	cfg := opts.Config
	cfg.Certificate, cfg.Provers, cfg.Registry, cfg.Logger, cfg.HPKEKey = d.Certificate, provers, reg, logger, hk
	c, err := cloud.New(cfg)
	if err != nil {
		return err
	}
	if hk == nil {
		logger.Warn("no HPKE key in the data directory: submissions sealed through privacy forwarders are refused (pkie cloud init --data DIR --new-hpke-key adds one)", "data", *data)
	}
	runDone := make(chan struct{})
	go func() { c.Run(ctx); close(runDone) }()
	// Capped so that health checks and scrapes stay within the
	// descriptors sessions leave (cloud.FileReserve).
	addrs, wait := ls.serve(ctx, cancel, c, httplimit.Options{MaxConns: cloud.MaxHTTPConns, MaxConnsPerClient: cloud.MaxHTTPConnsPerAddr})
	logger.Info("cloud listening", "name", d.Config.Name, "quic", addrs["quic"], "tcp", addrs["tcp"], "http", addrs["http"],
		"pkies", strings.Join(pkieNames(ps), ","), "spki_sha256", d.SPKIHash())
	// The address lines let scripts and tests that pass port 0 find the
	// ports.
	first := wait(env, *asJSON, map[string]any{"name": d.Config.Name, "pkies": pkieNames(ps), "spki_sha256": d.SPKIHash(), "data": *data})
	<-runDone
	c.Wait()
	if first == nil {
		logStopped(logger, "cloud", ctx)
	}
	return first
}

// pointFlag is a repeatable QUICADDR[,TCPADDR] flag.
type pointFlag []pecwire.Point

func (p *pointFlag) String() string { return fmt.Sprint(len(*p)) }

func (p *pointFlag) Set(v string) error {
	q, t, _ := strings.Cut(v, ",")
	if q == "" && t == "" {
		return errors.New("want QUICADDR[,TCPADDR] (,TCPADDR for TCP only)")
	}
	*p = append(*p, pecwire.Point{QUIC: q, TCP: t})
	return nil
}

func cloudBundle(ctx context.Context, env *command.Env, args []string, reg *pkie.Registry) error {
	fs := command.NewFlags(env, "cloud bundle", "--point QUICADDR[,TCPADDR]... [--data DIR] [--name NAME] [--json]")
	data := fs.String("data", defaultDataDir(env, "cloud"), "data directory")
	var points pointFlag
	fs.Var(&points, "point", "a point of presence: host:port of its QUIC listener, then optionally a comma and host:port of its TLS/TCP listener (\",HOST:PORT\": TCP only); repeatable, nearest first for most clients")
	name := fs.String("name", "", "name in the bundle (default: the cloud's name)")
	asJSON := fs.Bool("json", false, "print one JSON object: the bundle under \"bundle\", beside the data directory, the cloud's name, enhancements and key hash")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(points) == 0 {
		return command.UsageError("at least one --point is required")
	}
	d, err := cloud.Load(*data)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = d.Config.Name
	}
	b := &pecwire.Bundle{Version: pecwire.BundleVersion, Name: *name, Points: points, SPKISHA256: d.SPKIHash()}
	// The notary enhancement's trusted party is the cloud's own notary:
	// its key travels in the bundle. Logs' and authorities' keys never do.
	for _, p := range d.Config.PKIEs {
		if k, ok := reg.ByName(p.Name); ok && k.ID == pkie.Notary {
			key, err := notaryprover.PublicKey(d.ProverDir(k.Name))
			if err != nil {
				return err
			}
			b.Verifiers = map[string]json.RawMessage{pkienotary.Name: pkienotary.VerifierConfig{Key: key}.JSON()}
		}
	}
	// The HPKE key, if the cloud has one, lets clients of a privacy
	// forwarder seal their submissions to it.
	hk, err := d.LoadHPKE()
	if err != nil {
		return err
	}
	if hk != nil {
		b.HPKE = pecwire.NewHPKEKey(cloud.HPKEKeyID, hk)
	}
	if err := b.Check(); err != nil {
		return command.UsageError("%v", err)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, map[string]any{"data": *data, "name": d.Config.Name, "pkies": pkieNames(d.Config.PKIEs), "spki_sha256": d.SPKIHash(), "bundle": b})
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	_, err = env.Stdout.Write(append(out, '\n'))
	return err
}
