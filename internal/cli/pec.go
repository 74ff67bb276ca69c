package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/pec"
)

func runPEC(ctx context.Context, env *Env, args []string) error {
	sub := map[string]func(context.Context, *Env, []string) error{"get": pecGet}
	if len(args) > 0 && sub[args[0]] == nil && !isHelp(args[0]) {
		return usageError("unknown subcommand %q; want get (run \"pkie pec -h\")", args[0])
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(env.Stderr, "Usage: pkie pec get [flags] URL\n\n"+
			"  get      fetch a URL through the PEC dialer: the server's chain is proved by the\n"+
			"           cloud during the handshake, and no request is sent before the proofs verify")
		if len(args) > 0 && isHelp(args[0]) {
			return nil
		}
		return usageError("want a subcommand: get")
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
}

func addCloudFlags(fs *flag.FlagSet) *cloudFlags {
	c := &cloudFlags{}
	fs.Func("cloud", "PEC cloud bundle `FILE` (from pkie cloud bundle); repeat for failover, in order of preference", func(s string) error {
		c.clouds = append(c.clouds, s)
		return nil
	})
	c.transport = fs.String("transport", "auto", "how to reach the cloud: auto (QUIC, TLS over TCP if QUIC has not connected quickly) | quic | tcp")
	c.budget = fs.Duration("proof-timeout", pec.DefaultProofTimeout, "how long to wait for the cloud's proofs after the certificate arrived")
	return c
}

// dial reads the bundles and opens the session with the first reachable
// cloud.
func (c *cloudFlags) dial(ctx context.Context) (*pec.Client, []*pec.Bundle, error) {
	if *c.budget <= 0 {
		return nil, nil, usageError("--proof-timeout must be positive")
	}
	switch *c.transport {
	case "auto", "quic", "tcp":
	default:
		return nil, nil, usageError("--transport %q: want auto, quic or tcp", *c.transport)
	}
	var bundles []*pec.Bundle
	for _, path := range c.clouds {
		b, err := pec.ReadBundle(path)
		if err != nil {
			return nil, nil, usageError("--cloud: %v", err)
		}
		bundles = append(bundles, b)
	}
	cl, err := pec.Dial(ctx, pec.ClientConfig{Clouds: bundles, Transport: *c.transport})
	if err != nil {
		return nil, nil, fmt.Errorf("reaching the cloud: %w", err)
	}
	return cl, bundles, nil
}

// cloudVerifiers builds the verifiers of the enhancements the client
// checks through the cloud: ct and revocation when their TTP's key is
// pinned, notary when the bundle carries the cloud's notary key.
func cloudVerifiers(notes io.Writer, reg *pkie.Registry, bundles []*pec.Bundle, ctKey, revKey string, maxAge, mmd time.Duration) ([]pkie.Verifier, error) {
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
	for _, p := range []struct{ name, flag, key string }{{"ct", "ct-key", ctKey}, {"revocation", "revocation-key", revKey}} {
		if p.key == "" {
			continue
		}
		k, err := readKeyArg(p.key)
		if err != nil {
			return nil, usageError("--%s: %v", p.flag, err)
		}
		config, err := proofVerifierConfig(p.name, k, maxAge, mmd)
		if err != nil {
			return nil, err
		}
		if err := add(p.name, config); err != nil {
			return nil, usageError("--%s: %v", p.flag, err)
		}
	}
	vs, skipped, err := pec.BundleVerifiers(reg, bundles)
	if err != nil {
		return nil, usageError("--cloud: %v", strings.TrimPrefix(err.Error(), "pec: "))
	}
	for _, s := range skipped {
		fmt.Fprintf(notes, "note: the bundle configures an enhancement this client does not check (%s)\n", s)
	}
	out = append(out, vs...)
	return out, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
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
}

type pecTimings struct {
	pec.Timings
	// Response is when the response's headers arrived, from the start of
	// the request.
	Response time.Duration `json:"response_ns,omitempty"`
}

func pecGet(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "pec get", "[flags] URL\n\n"+
		"A curl for PEC: fetches URL (https) through the PEC dialer. The server's chain is\n"+
		"submitted to the cloud the moment it arrives in the handshake; the request is sent only\n"+
		"after every required proof arrived and verified. Prints the verdict, the timings and the\n"+
		"response status, then the body (or writes it to -o FILE). Exit status: 0 fetched,\n"+
		"1 the connection was refused (untrusted, or inconclusive without --warn), 2 usage or\n"+
		"operational error.")
	cf := addCloudFlags(fs)
	require := fs.String("require", "", "comma-separated evidence that must pass: ca, ct, revocation, notary (default: ca and every enhancement configured)")
	ctKey := fs.String("ct-key", "", "the CT log's pinned verifier key (or @FILE): enables the ct enhancement")
	revKey := fs.String("revocation-key", "", "the revocation authority's pinned verifier key (or @FILE): enables the revocation enhancement")
	maxAge := fs.Duration("proof-max-age", check.DefaultProofMaxAge, "reject signed roots older than this (bounds replay of old proofs)")
	mmd := fs.Duration("mmd", check.DefaultMMD, "the log's maximum merge delay: an unlogged certificate passes ct only with a younger SCT")
	roots := fs.String("roots", "", "PEM file of CA roots for CA validation (default: the system's roots)")
	agility := fs.Bool("trust-agility", false, "do not require CA validation: trust on the enhancements' evidence alone")
	warn := fs.Bool("warn", false, "on an inconclusive verdict (a required proof missing at the deadline, a busy cloud) fetch anyway and say so (default: fail closed)")
	mode := fs.String("mode", pec.ModeClientServer, "client-server (the PEC extension in the ClientHello: a PEC server forwards its chain; the client submits it too after --server-grace if no proofs came) | client-only")
	grace := fs.Duration("server-grace", 0, "client-server: how long after the certificate to wait for a PEC server's proofs before submitting the chain too (0: adaptive, 10-250ms)")
	maxTime := fs.Duration("max-time", 30*time.Second, "overall time limit")
	output := fs.String("o", "", "write the body to `FILE` instead of stdout")
	resolve := addResolveFlags(fs, "the URL's host", true)
	asJSON := fs.Bool("json", false, "print the verdict, timings and status as JSON (the body only with -o)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("want exactly one URL, got %d arguments", len(pos))
	}
	if *mode != pec.ModeClientServer && *mode != pec.ModeClientOnly {
		return usageError("--mode %q: want client-server or client-only", *mode)
	}
	u, err := url.Parse(pos[0])
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return usageError("%q is not an https URL", clipArg(pos[0]))
	}
	if len(cf.clouds) == 0 {
		return usageError("--cloud BUNDLE is required: the cloud that proves the server's chain")
	}
	if *maxTime <= 0 || *maxAge <= 0 || *mmd <= 0 {
		return usageError("--max-time, --proof-max-age and --mmd must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *maxTime)
	defer cancel()

	reg := builtin.Registry()
	d := &pec.Dialer{Registry: reg, TrustAgility: *agility, Warn: *warn, ProofTimeout: *cf.budget,
		TLSConfig: &tls.Config{}, Mode: *mode, ServerGrace: *grace}
	if *roots != "" {
		if d.TLSConfig.RootCAs, err = loadRoots(*roots); err != nil {
			return usageError("--roots: %v", err)
		}
	}
	if *require != "" {
		d.Require = splitList(*require)
	}
	if !resolve.empty() {
		d.NetDial = resolve.dial
	}
	cl, bundles, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	d.Cloud = cl
	if d.Verifiers, err = cloudVerifiers(env.Stderr, reg, bundles, *ctKey, *revKey, *maxAge, *mmd); err != nil {
		return err
	}
	if len(d.Verifiers) == 0 {
		return usageError("no enhancement to check: pin --ct-key or --revocation-key, or use a cloud bundle with a notary key")
	}
	if err := d.Init(); err != nil {
		return usageError("%v", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "pec: "), "check: "))
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
		return usageError("%v", err)
	}
	req.Header.Set("User-Agent", "pkie-pec-get")
	start := time.Now()
	resp, err := hc.Do(req)
	var ve *pec.VerdictError
	switch {
	case errors.As(err, &ve):
		res.Verdict, res.Missing, res.Timings.Timings = ve.Verdict, ve.Missing, ve.Timings
		res.Error = ve.Error()
		if *asJSON {
			if err := writeJSON(env.Stdout, res); err != nil {
				return err
			}
		} else {
			printPECResult(env.Stdout, &res)
		}
		return negative()
	case err != nil:
		return fmt.Errorf("%v", err)
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
		if err := writeJSON(env.Stdout, res); err != nil {
			return err
		}
	}
	if res.Verdict != nil && res.Verdict.Result != check.Trusted {
		fmt.Fprintf(env.Stderr, "pkie pec get: %s, fetched anyway because of --warn\n", res.Verdict.Result)
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
		ms(t.Connect), ms(t.Certificate), ms(t.Handshake), ms(t.FirstProof), ms(t.LastProof), ms(t.Verification), ms(t.Total))
	if t.Response > 0 {
		fmt.Fprintf(w, ", response %s", ms(t.Response))
	}
	fmt.Fprintln(w)
	if r.Status != 0 {
		fmt.Fprintf(w, "  %s %d %s\n", r.Proto, r.Status, http.StatusText(r.Status))
	}
}

// proofVerifierConfig is the verifier configuration of the ct or
// revocation enhancement for a pinned TTP key.
func proofVerifierConfig(name, key string, maxAge, mmd time.Duration) ([]byte, error) {
	switch name {
	case "ct":
		return check.CTVerifierConfig{Key: key, MaxAge: maxAge, MMD: mmd}.JSON(), nil
	case "revocation":
		return check.RevocationVerifierConfig{Key: key, MaxAge: maxAge}.JSON(), nil
	}
	return nil, fmt.Errorf("no verifier configuration for %s", name)
}
