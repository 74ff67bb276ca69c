package client

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/pec"
	"github.com/pkie/pkie/probe"
)

func PEC(ctx context.Context, env *command.Env, args []string) error {
	sub := map[string]func(context.Context, *command.Env, []string) error{"get": pecGet}
	if len(args) > 0 && sub[args[0]] == nil && !command.IsHelp(args[0]) {
		return command.UsageError("unknown subcommand %q; want get (run \"pkie pec -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie pec get [flags] URL\n\n"+
			"  get      fetch a URL through the PEC dialer: the server's chain is proved by the\n"+
			"           cloud during the handshake, and no request is sent before the proofs verify")
		if len(args) > 0 && command.IsHelp(args[0]) {
			return nil
		}
		return command.UsageError("want a subcommand: get")
	}
	return sub[args[0]](ctx, env, args[1:])
}

// cloudFlags are the flags that reach a PEC cloud and say which of its
// proofs the client verifies, shared by "pkie pec get" and "pkie check
// --cloud". The TTP keys (--ct-key, --revocation-key) are the client's
// own pins; only the notary enhancement's key, whose TTP is the cloud's
// operator, comes from the bundle.
type cloudFlags struct {
	clouds    []string
	transport *string
	budget    *time.Duration
	forwarder *string
}

func addCloudFlags(fs *flag.FlagSet) *cloudFlags {
	c := &cloudFlags{}
	fs.Func("cloud", "PEC cloud bundle `FILE` (from pkie cloud bundle); repeat for failover, in order of preference", func(s string) error {
		c.clouds = append(c.clouds, s)
		return nil
	})
	c.transport = fs.String("transport", "auto", "how to reach the cloud: auto (QUIC, TLS over TCP if QUIC has not connected quickly) | quic | tcp")
	c.budget = fs.Duration("proof-timeout", pec.DefaultProofTimeout, "how long to wait for the cloud's proofs after the certificate arrived")
	c.forwarder = fs.String("forwarder", "", "privacy forwarder bundle `FILE` (from pkie forwarder bundle): reach the first --cloud only through it, sealed, so that the cloud never sees this client's address")
	return c
}

// load checks the flags and reads the bundles: everything that can be
// wrong without the network, so that it is reported before any I/O.
func (c *cloudFlags) load() (pec.ClientConfig, error) {
	if *c.budget <= 0 {
		return pec.ClientConfig{}, command.UsageError("--proof-timeout must be positive")
	}
	switch *c.transport {
	case "auto", "quic", "tcp":
	default:
		return pec.ClientConfig{}, command.UsageError("--transport %q: want auto, quic or tcp", *c.transport)
	}
	cfg := pec.ClientConfig{Transport: *c.transport}
	for _, path := range c.clouds {
		b, err := pec.ReadBundle(path)
		if err != nil {
			return pec.ClientConfig{}, command.UsageError("--cloud: %v", err)
		}
		cfg.Clouds = append(cfg.Clouds, b)
	}
	if *c.forwarder != "" {
		fb, err := pec.ReadBundle(*c.forwarder)
		if err != nil {
			return pec.ClientConfig{}, command.UsageError("--forwarder: %v", err)
		}
		cfg.Forwarder = fb
	}
	return cfg, nil
}

// connect opens the session with the first reachable cloud of cfg.
func (c *cloudFlags) connect(ctx context.Context, cfg pec.ClientConfig) (*pec.Client, error) {
	cl, err := pec.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("reaching the cloud: %w", err)
	}
	return cl, nil
}

// cloudVerifiers builds the verifiers of the enhancements the client
// checks through the cloud: ct and revocation when their TTP's key is
// pinned, notary when the bundle carries the cloud's notary key.
func cloudVerifiers(notes io.Writer, reg *pkie.Registry, bundles []*pec.Bundle, ctf *ctFlags, revKey string, maxAge time.Duration) ([]pkie.Verifier, error) {
	var out []pkie.Verifier
	add := func(name string, config []byte) error {
		k, ok := reg.ByName(name)
		if !ok || k.NewVerifier == nil {
			return fmt.Errorf("this pkie has no %s verifier", name)
		}
		v, err := k.NewVerifier(config)
		if err != nil {
			return fmt.Errorf("%s verifier: %w", name, err)
		}
		out = append(out, v)
		return nil
	}
	if ctf.enabled() {
		c, err := ctf.config(maxAge)
		if err != nil {
			return nil, err
		}
		if err := add("ct", c.JSON()); err != nil {
			return nil, command.UsageError("ct: %v", err)
		}
	} else if _, err := ctf.config(maxAge); err != nil {
		return nil, err // a ct flag without what it needs
	}
	if revKey != "" {
		k, err := command.ReadKeyArg(revKey)
		if err != nil {
			return nil, command.UsageError("--revocation-key: %v", err)
		}
		config, err := proofVerifierConfig("revocation", k, "", maxAge)
		if err != nil {
			return nil, err
		}
		if err := add("revocation", config); err != nil {
			return nil, command.UsageError("--revocation-key: %v", err)
		}
	}
	vs, skipped, err := pec.BundleVerifiers(reg, bundles)
	if err != nil {
		return nil, command.UsageError("--cloud: %v", strings.TrimPrefix(err.Error(), "pec: "))
	}
	for _, s := range skipped {
		fmt.Fprintf(notes, "note: the bundle configures an enhancement this client does not check (%s)\n", s)
	}
	out = append(out, vs...)
	return out, nil
}

// pecResult is what "pkie pec get --json" prints.
type pecResult struct {
	URL      string         `json:"url"`
	Verdict  *check.Verdict `json:"verdict,omitempty"`
	Evidence *pec.Evidence  `json:"evidence,omitempty"`
	Missing  []string       `json:"missing,omitempty"`
	Timings  pecTimings     `json:"timings"`
	Status   int            `json:"status,omitempty"`
	Proto    string         `json:"proto,omitempty"`
	Body     int64          `json:"body_bytes"`
	Error    string         `json:"error,omitempty"`
	// Warnings are set, and ExitStatus is ExitFetchedWithWarnings, when
	// --warn let the fetch through without a trusted verdict.
	Warnings   []string `json:"warnings,omitempty"`
	ExitStatus int      `json:"exit_status"`
}

type pecTimings struct {
	pec.Timings
	// Response is when the response's headers arrived, from the start of
	// the request.
	Response time.Duration `json:"response_ns,omitempty"`
}

func pecGet(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "pec get", "[flags] URL\n\n"+
		"A curl for PEC: fetches URL (https) through the PEC dialer. The server's chain is\n"+
		"submitted to the cloud the moment it arrives in the handshake; the request is sent only\n"+
		"after every required proof arrived and verified. Prints the verdict, the timings and the\n"+
		"response status, then the body (or writes it to -o FILE). Exit status: 0 fetched,\n"+
		"trusted; 1 the connection was refused (untrusted, or inconclusive without --warn);\n"+
		"2 usage or operational error; 3 fetched WITH WARNINGS: --warn let an inconclusive\n"+
		"verdict through (required evidence missing, each named on standard error first).\n"+
		"Loopback, private and other non-public addresses are refused without --allow-private.")
	cf := addCloudFlags(fs)
	require := fs.String("require", "", "comma-separated evidence that must pass: ca, ct, revocation, notary (default: ca and every enhancement configured)")
	ctf := addCTFlags(fs)
	revKey := fs.String("revocation-key", "", "the revocation authority's pinned verifier key (or @FILE): enables the revocation enhancement")
	maxAge := fs.Duration("proof-max-age", check.DefaultProofMaxAge, "reject signed roots older than this (bounds replay of old proofs)")
	roots := fs.String("roots", "", "PEM file of CA roots for CA validation (default: the system's roots)")
	agility := fs.Bool("trust-agility", false, "do not require CA validation: trust on the enhancements' evidence alone")
	warn := fs.Bool("warn", false, "on an inconclusive verdict (a required proof missing at the deadline, a busy cloud) fetch anyway and say so (default: fail closed)")
	mode := fs.String("mode", pec.ModeClientServer, "client-server (the PEC extension in the ClientHello: a PEC server forwards its chain; the client submits it too after --server-grace if no proofs came) | client-only")
	grace := fs.Duration("server-grace", 0, "client-server: how long after the certificate to wait for a PEC server's proofs before submitting the chain too (0: adaptive, 10-250ms)")
	maxTime := fs.Duration("max-time", 30*time.Second, "overall time limit")
	output := fs.String("o", "", "write the body to `FILE` instead of stdout")
	resolve := command.AddResolveFlags(fs, "the URL's host", true)
	allowPrivate := fs.Bool("allow-private", false, "allow connecting to a site on a loopback, private or other non-public address (as pkie check)")
	asJSON := fs.Bool("json", false, "print the verdict, timings and status as JSON (the body only with -o)")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want exactly one URL, got %d arguments", len(pos))
	}
	if *mode != pec.ModeClientServer && *mode != pec.ModeClientOnly {
		return command.UsageError("--mode %q: want client-server or client-only", *mode)
	}
	u, err := url.Parse(pos[0])
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return command.UsageError("%q is not an https URL", command.ClipArg(pos[0]))
	}
	if len(cf.clouds) == 0 {
		return command.UsageError("--cloud BUNDLE is required: the cloud that proves the server's chain")
	}
	if *maxTime <= 0 || *maxAge <= 0 {
		return command.UsageError("--max-time and --proof-max-age must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *maxTime)
	defer cancel()

	// Everything the flags and files can get wrong is reported before
	// any network I/O: the cloud is reached only for a request that can
	// be made.
	reg := builtin.Registry()
	d := &pec.Dialer{Registry: reg, TrustAgility: *agility, Warn: *warn, ProofTimeout: *cf.budget,
		TLSConfig: &tls.Config{}, Mode: *mode, ServerGrace: *grace, NetDial: siteDialer(resolve, *allowPrivate)}
	if *roots != "" {
		if d.TLSConfig.RootCAs, err = LoadRoots(*roots); err != nil {
			return command.UsageError("--roots: %v", err)
		}
	}
	if err := guardMapped(resolve, u, *allowPrivate); err != nil {
		return err
	}
	ccfg, err := cf.load()
	if err != nil {
		return err
	}
	if d.Verifiers, err = cloudVerifiers(env.Stderr, reg, ccfg.Clouds, ctf, *revKey, *maxAge); err != nil {
		return err
	}
	if len(d.Verifiers) == 0 {
		return command.UsageError("no enhancement to check: give --ct-log-list or --ct-key, or --revocation-key, or use a cloud bundle with a notary key")
	}
	if *require != "" {
		d.Require = command.SplitList(*require)
		if err := checkRequire(reg, d.Verifiers, d.Require); err != nil {
			return err
		}
	}
	cl, err := cf.connect(ctx, ccfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	d.Cloud = cl
	if err := d.Init(); err != nil {
		return command.UsageError("%v", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "pec: "), "check: "))
	}

	// The transport dials through the PEC dialer; the connection it made
	// carries the verdict.
	var mu sync.Mutex
	var conn *pec.Conn
	tr := &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.Dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			conn = c
			mu.Unlock()
			return c, nil
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res := pecResult{URL: u.String()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return command.UsageError("%v", err)
	}
	req.Header.Set("User-Agent", "pkie-pec-get")
	start := time.Now()
	resp, err := hc.Do(req)
	var ve *pec.VerdictError
	switch {
	case errors.As(err, &ve):
		res.Verdict, res.Missing, res.Timings.Timings = ve.Verdict, ve.Missing, ve.Timings
		res.Error = ve.Error()
		res.ExitStatus = command.ExitNegative
		if *asJSON {
			if err := command.WriteJSON(env.Stdout, res); err != nil {
				return err
			}
		} else {
			printPECResult(env.Stdout, &res)
		}
		return command.Negative()
	case err != nil:
		return fmt.Errorf("%v%s", err, forbiddenHint(err))
	}
	defer resp.Body.Close()
	res.Timings.Response = time.Since(start)
	res.Status, res.Proto = resp.StatusCode, resp.Proto
	mu.Lock()
	if conn != nil {
		res.Verdict, res.Timings.Timings = conn.Verdict(), conn.Timings()
		ev := conn.Evidence()
		res.Evidence, res.Missing = &ev, ev.Missing
	}
	mu.Unlock()
	// Only --warn lets a connection without a trusted verdict through.
	// Whoever fetched a revoked site that way must not mistake it for a
	// clean fetch: the warning comes first on standard error, before the
	// verdict and the body, again after the body, in --json, and in the
	// exit status.
	if res.Verdict == nil || res.Verdict.Result != check.Trusted {
		res.Warnings = fetchWarnings(&res)
		res.ExitStatus = ExitFetchedWithWarnings
		for _, w := range res.Warnings {
			fmt.Fprintf(env.Stderr, "pkie pec get: WARNING: %s\n", termtext.Escape(w))
		}
	}

	var body io.Writer = env.Stdout
	if *output != "" {
		f, err := os.Create(*output)
		if err != nil {
			return err
		}
		defer f.Close()
		body = f
	} else if *asJSON {
		body = io.Discard
	}
	if !*asJSON {
		printPECResult(env.Stdout, &res)
		if *output == "" {
			fmt.Fprintln(env.Stdout)
		}
	}
	n, err := io.Copy(body, resp.Body)
	res.Body = n
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if *output != "" {
		if err := body.(*os.File).Close(); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, res); err != nil {
			return err
		}
	}
	if res.ExitStatus == ExitFetchedWithWarnings {
		// The body may have scrolled the first warning away.
		fmt.Fprintf(env.Stderr, "pkie pec get: WARNING: fetched WITHOUT the required evidence (%s); exit status %d\n",
			termtext.Escape(strings.Join(lacking(res.Verdict, res.Missing), ", ")), ExitFetchedWithWarnings)
		return &command.ExitError{Code: ExitFetchedWithWarnings}
	}
	return nil
}

// ExitFetchedWithWarnings is pkie pec get's exit status when --warn let a
// fetch through without a trusted verdict: not 0, so that no script takes
// it for a clean fetch, and not 1, which means nothing was fetched.
const ExitFetchedWithWarnings = 3

// fetchWarnings says, one line each, that the fetch went ahead without a
// trusted verdict and which required evidence was missing and why.
func fetchWarnings(r *pecResult) []string {
	v := r.Verdict
	if v == nil {
		return []string{"fetched anyway because of --warn, and no verdict was recorded"}
	}
	out := []string{fmt.Sprintf("the verdict is %s, not trusted: fetched anyway because of --warn; what was fetched is not vouched for (a revoked or misissued certificate would look the same)",
		strings.ToUpper(string(v.Result)))}
	seen := map[string]bool{}
	for _, a := range v.Sources {
		if !a.Required || a.Status == check.Pass {
			continue
		}
		seen[a.Source] = true
		why := a.Detail
		if slices.Contains(r.Missing, a.Source) {
			why = "no answer from the cloud by the deadline (--proof-timeout): " + why
		}
		out = append(out, fmt.Sprintf("missing %s evidence (%s): %s", a.Source, a.Status, why))
	}
	for _, m := range r.Missing {
		if !seen[m] {
			out = append(out, fmt.Sprintf("missing %s evidence: no answer from the cloud by the deadline (--proof-timeout)", m))
		}
	}
	return out
}

// lacking names the required evidence that did not pass, and the
// enhancements the cloud had not answered.
func lacking(v *check.Verdict, missing []string) []string {
	var out []string
	if v != nil {
		for _, a := range v.Sources {
			if a.Required && a.Status != check.Pass {
				out = append(out, a.Source)
			}
		}
	}
	for _, m := range missing {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, "no verdict")
	}
	return out
}

// checkRequire refuses a --require naming evidence that is not
// configured, as the dialer would, but before the cloud is reached.
func checkRequire(reg *pkie.Registry, vs []pkie.Verifier, require []string) error {
	have := []string{"ca"}
	for _, v := range vs {
		have = append(have, reg.Name(v.ID()))
	}
	slices.Sort(have)
	enhancement := false
	for _, r := range require {
		if err := notBuiltIn(reg, r); err != nil {
			return err
		}
		if !slices.Contains(have, r) {
			return command.UsageError("--require: required source %q is not configured (have %s)", r, strings.Join(have, ", "))
		}
		enhancement = enhancement || r != "ca"
	}
	if !enhancement {
		return command.UsageError("--require names no enhancement: a CA signature alone is what PEC adds evidence to (have %s)", strings.Join(have, ", "))
	}
	return nil
}

// notBuiltIn refuses a --require naming an enhancement that reg (this
// binary's) does not hold, saying so and naming those it does: such an
// enhancement cannot be configured by any flag or bundle, only by a binary
// built with it (docs/guides/pkie-howto.md).
func notBuiltIn(reg *pkie.Registry, name string) error {
	if name == "ca" {
		return nil
	}
	if _, ok := reg.ByName(name); ok {
		return nil
	}
	var names []string
	for _, k := range reg.Kinds() {
		names = append(names, k.Name)
	}
	return command.UsageError("--require: enhancement %s: this pkie binary was not built with it (built in: %s)", name, strings.Join(names, ", "))
}

// siteDialer connects to the site as pkie check's probe does: a name
// mapped by --resolve to its addresses, any other by DNS, and, without
// allowPrivate, never to a loopback, private or other non-public
// address. The addresses are judged after resolution and dialled as
// judged, so a name cannot resolve to one address for the guard and to
// another for the connection.
func siteDialer(r *command.Resolves, allowPrivate bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("port %q of %s: %w", p, addr, err)
		}
		as, err := r.Lookup(ctx, host, port)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", probe.ErrResolve, host, err)
		}
		var d net.Dialer
		var errs []error
		for _, a := range as {
			if why := probe.NonPublic(a.Addr()); why != "" && !allowPrivate {
				errs = append(errs, &probe.ForbiddenAddressError{Addr: a.Addr(), Reason: why})
				continue
			}
			c, err := d.DialContext(ctx, network, a.String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("%w %s: no address", probe.ErrResolve, host)
		}
		return nil, dialErrors(errs)
	}
}

// dialErrors are the failures of each address of a site, on one line;
// errors.Is and errors.As see each.
type dialErrors []error

func (e dialErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e dialErrors) Unwrap() []error { return e }

// guardMapped refuses, before any I/O, a URL whose host is a non-public
// IP literal or is mapped by --resolve to a non-public address, unless
// allowPrivate; names resolved by DNS are judged when dialled.
func guardMapped(r *command.Resolves, u *url.URL, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	port := 443
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return command.UsageError("%q: port %q is not 1-65535", command.ClipArg(u.String()), p)
		}
		port = n
	}
	host := u.Hostname()
	as, ok := r.Find(host, port)
	if ip, err := netip.ParseAddr(host); !ok && err == nil {
		as = []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}
	}
	for _, a := range as {
		if why := probe.NonPublic(a.Addr()); why != "" {
			return command.UsageError("%s is %s (%s), which pkie pec get refuses to connect to without --allow-private", command.ClipArg(host), a.Addr(), why)
		}
	}
	return nil
}

// printPECResult prints r for a person. The verdict's texts repeat what
// remote parties chose (a server's certificate names, a proof's contents),
// so each is escaped: nothing printed drives the terminal or starts a
// line of its own.
func printPECResult(w io.Writer, r *pecResult) {
	if v := r.Verdict; v != nil {
		fmt.Fprintf(w, "%s  %s\n", termtext.Escape(r.URL), strings.ToUpper(string(v.Result)))
		if r.ExitStatus == ExitFetchedWithWarnings {
			fmt.Fprintf(w, "  WARNING  fetched anyway because of --warn, WITHOUT the required evidence (%s)\n",
				termtext.Escape(strings.Join(lacking(v, r.Missing), ", ")))
		}
		fmt.Fprintf(w, "  %s\n", termtext.Escape(v.Headline))
		if v.SHA256 != "" {
			fmt.Fprintf(w, "  sha256   %s\n", v.SHA256)
		}
		fmt.Fprintln(w, "  evidence:")
		for _, a := range v.Sources {
			req := "reported"
			if a.Required {
				req = "required"
			}
			fmt.Fprintf(w, "    %-12s %-8s %-8s  %s\n", termtext.Escape(a.Source), a.Status, req, termtext.Escape(a.Detail))
		}
		fmt.Fprintln(w, "  reasons:")
		for _, s := range v.Reasons {
			fmt.Fprintf(w, "    - %s\n", termtext.Escape(s))
		}
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "  missing  no answer from the cloud for: %s\n", termtext.Escape(strings.Join(r.Missing, ", ")))
	}
	if e := r.Evidence; e != nil && e.Resumed {
		how := "proofs asked afresh"
		if e.Reused {
			how = "proofs of the resumed session, verified " + e.VerifiedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  session  resumed: %s\n", how)
	}
	t := r.Timings
	fmt.Fprintf(w, "  timings  connect %s, certificate %s, handshake %s, first proof %s, last proof %s, verification %s, total %s",
		command.Millis(t.Connect), command.Millis(t.Certificate), command.Millis(t.Handshake), command.Millis(t.FirstProof), command.Millis(t.LastProof), command.Millis(t.Verification), command.Millis(t.Total))
	if t.Response > 0 {
		fmt.Fprintf(w, ", response %s", command.Millis(t.Response))
	}
	fmt.Fprintln(w)
	if r.Status != 0 {
		fmt.Fprintf(w, "  %s %d %s\n", r.Proto, r.Status, http.StatusText(r.Status))
	}
}

// proofVerifierConfig is the verifier configuration of the ct or
// revocation enhancement for a pinned TTP key.
func proofVerifierConfig(name, key, logKey string, maxAge time.Duration) ([]byte, error) {
	switch name {
	case "ct":
		return check.CTVerifierConfig{Key: key, LogKey: logKey, MaxAge: maxAge}.JSON(), nil
	case "revocation":
		return check.RevocationVerifierConfig{Key: key, MaxAge: maxAge}.JSON(), nil
	}
	return nil, fmt.Errorf("no verifier configuration for %s", name)
}
