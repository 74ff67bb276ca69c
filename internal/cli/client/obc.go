package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/obc"
)

// defaultOBCStore is where the store lives unless --store says otherwise:
// the user's configuration directory, which is per user and, unlike a
// cache directory, not cleaned behind the user's back (losing the keys
// logs the user out of every site that bound a session to them).
func defaultOBCStore() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "pkie", "obc.db")
}

// obcStoreFlags are the flags every obc subcommand opening the store takes.
type obcStoreFlags struct {
	path *string
	mode *string
}

func addOBCStoreFlags(fsAdd func(name, value, usage string) *string) *obcStoreFlags {
	return &obcStoreFlags{
		path: fsAdd("store", defaultOBCStore(), "the store's SQLite `FILE` (created 0600, its directory 0700)"),
		mode: fsAdd("mode", "", "strict (a key per origin) | legacy (a key per registrable domain, paper §7.1); fixed when the store is created (default: the store's, strict for a new one)"),
	}
}

// open opens the store with opts completed from the flags.
func (f *obcStoreFlags) open(ctx context.Context, opts obc.StoreOptions) (*obc.Store, error) {
	if *f.path == "" {
		return nil, command.UsageError("no --store given and no user configuration directory to put one in")
	}
	if *f.mode == "" {
		opts.UseStoredMode = true
	} else {
		m, err := obc.ParseMode(*f.mode)
		if err != nil {
			return nil, command.UsageError("--mode: %v", strings.TrimPrefix(err.Error(), "obc: "))
		}
		opts.Mode = m
	}
	st, err := obc.Open(ctx, *f.path, opts)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// obcGetResult is what "pkie obc get --json" prints.
type obcGetResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Proto  string `json:"proto"`
	// Presented is false when the server did not ask for a client
	// certificate (and none was made or used).
	Presented bool   `json:"presented"`
	Scope     string `json:"scope"`
	Mode      string `json:"mode"`
	Identity  string `json:"identity,omitempty"`
	Alg       string `json:"alg,omitempty"`
	// Created is true when this fetch made the key and certificate.
	Created  bool       `json:"created"`
	FromPool bool       `json:"from_pool,omitempty"`
	Timings  obcTimings `json:"timings"`
	Body     int64      `json:"body_bytes"`
	// Method is the request's method; Redirects the same-origin URLs
	// followed, in order; NotFollowed a redirect that was not (to
	// another origin, or past the limit).
	Method      string   `json:"method"`
	Redirects   []string `json:"redirects,omitempty"`
	NotFollowed string   `json:"redirect_not_followed,omitempty"`
}

// obcMaxRedirects bounds the same-origin redirects "obc get" follows.
const obcMaxRedirects = 10

// obcTimings are a fetch's phases. The TLS handshake includes Key and
// Cert when the certificate was made during it (a first visit).
type obcTimings struct {
	Key       time.Duration `json:"key_ns"`
	Cert      time.Duration `json:"cert_ns"`
	DNS       time.Duration `json:"dns_ns"`
	Connect   time.Duration `json:"connect_ns"`
	TLS       time.Duration `json:"tls_ns"`
	FirstByte time.Duration `json:"first_byte_ns"` // from the start to the response's first byte
	Total     time.Duration `json:"total_ns"`      // from the start to the body's end
}

func OBCGet(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "obc get", "[flags] URL\n\n"+
		"Fetches URL (https) presenting the origin-bound certificate of its origin (made on\n"+
		"first use and stored) when the server asks for a client certificate. Prints the\n"+
		"status, the scope, the identity the server sees (SHA-256 of the key), whether the\n"+
		"certificate was made now, and the timings; then the body (or writes it to -o FILE).\n"+
		"Redirects within the origin are followed (at most 10), others not. With\n"+
		"--cookie-jar, cookies are kept per origin in FILE and sent back to their origin.\n"+
		"Exit status: 0 a 2xx answer, 1 any other answer, 2 usage or operational error.")
	sf := addOBCStoreFlags(fs.String)
	alg := fs.String("alg", string(obc.DefaultAlg), "algorithm of a new key: ecdsa-p256 | ed25519 | rsa-2048 | rsa-1024 (existing keys keep theirs)")
	poolSize := fs.Int("pool", 0, "precompute `N` keys before fetching, as a long-running client does in the background, so that a first visit only signs a certificate")
	cacert := fs.String("cacert", "", "PEM `FILE` of CA roots to verify the server with (default: the system's roots)")
	resolve := command.AddResolveFlags(fs, "the URL's host", true)
	maxTime := fs.Duration("max-time", 30*time.Second, "overall time limit")
	output := fs.String("o", "", "write the body to `FILE` instead of stdout")
	asJSON := fs.Bool("json", false, "print the result as JSON (the body only with -o)")
	var method, data string
	dataSet := false
	fs.StringVar(&method, "X", "", "request `METHOD` (default GET, or POST with -d)")
	fs.StringVar(&method, "method", "", "same as -X")
	dataFlag := func(s string) error { data, dataSet = s, true; return nil }
	fs.Func("d", "send `DATA` as the body, as an HTML form does (application/x-www-form-urlencoded), e.g. user=alice", dataFlag)
	fs.Func("data", "same as -d", dataFlag)
	jarPath := fs.String("cookie-jar", "", "keep cookies in `FILE` (JSON, 0600), per origin: read before the request, written after it")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want exactly one URL, got %d arguments", len(pos))
	}
	u, err := url.Parse(pos[0])
	if err != nil || u.Host == "" {
		return command.UsageError("%q is not an https URL", command.ClipArg(pos[0]))
	}
	origin, err := obc.OriginOf(u)
	if err != nil {
		return command.UsageError("%v", strings.TrimPrefix(err.Error(), "obc: "))
	}
	a, err := obc.ParseAlg(*alg)
	if err != nil {
		return command.UsageError("--alg: %v", strings.TrimPrefix(err.Error(), "obc: "))
	}
	if *poolSize < 0 {
		return command.UsageError("--pool %d is negative", *poolSize)
	}
	if *maxTime <= 0 {
		return command.UsageError("--max-time must be positive")
	}
	if method == "" {
		method = http.MethodGet
		if dataSet {
			method = http.MethodPost
		}
	}
	if !validMethod(method) {
		return command.UsageError("-X %q is not an HTTP method (upper-case letters, at most 16)", command.ClipArg(method))
	}
	var jar *obcJar
	if *jarPath != "" {
		if jar, err = openOBCJar(*jarPath, time.Now); err != nil {
			return command.UsageError("--cookie-jar: %v", err)
		}
	}
	tlsCfg := &tls.Config{}
	if *cacert != "" {
		if tlsCfg.RootCAs, err = LoadRoots(*cacert); err != nil {
			return command.UsageError("--cacert: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *maxTime)
	defer cancel()

	st, err := sf.open(ctx, obc.StoreOptions{Alg: a, PoolSize: *poolSize})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.WaitPool(ctx); err != nil {
		return fmt.Errorf("filling the key pool: %w", err)
	}
	scope, err := st.Scope(origin)
	if err != nil {
		return err
	}

	// The store's own configuration, with the certificate callback
	// wrapped to learn what was presented: only the server's request
	// makes or uses a key.
	var (
		mu        sync.Mutex
		presented *obc.Result
	)
	cfg := st.ClientConfig(origin)
	cfg.RootCAs = tlsCfg.RootCAs
	cfg.ServerName = ""
	cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		r, err := st.Get(cri.Context(), origin)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		presented = r
		mu.Unlock()
		return r.Cert, nil
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}
	if !resolve.Empty() {
		tr.DialContext = resolve.Dial
	}
	defer tr.CloseIdleConnections()
	var redirects []string
	notFollowed := ""
	hc := &http.Client{Transport: tr, CheckRedirect: func(next *http.Request, via []*http.Request) error {
		// Another origin would see this origin's cookies' effects and get
		// its own key presented; the user asked for this origin.
		if o, err := obc.OriginOf(next.URL); err != nil || o != origin {
			notFollowed = next.URL.Redacted() + " (another origin)"
			return http.ErrUseLastResponse
		}
		if len(via) > obcMaxRedirects {
			notFollowed = next.URL.Redacted() + fmt.Sprintf(" (more than %d redirects)", obcMaxRedirects)
			return http.ErrUseLastResponse
		}
		redirects = append(redirects, next.URL.Redacted())
		return nil
	}}
	if jar != nil {
		hc.Jar = jar
	}

	var tm obcTimings
	var dnsStart, connStart, tlsStart time.Time
	trace := &httptrace.ClientTrace{
		DNSStart:          func(httptrace.DNSStartInfo) { dnsStart = time.Now() },
		DNSDone:           func(httptrace.DNSDoneInfo) { tm.DNS = time.Since(dnsStart) },
		ConnectStart:      func(string, string) { connStart = time.Now() },
		ConnectDone:       func(string, string, error) { tm.Connect = time.Since(connStart) },
		TLSHandshakeStart: func() { tlsStart = time.Now() },
		TLSHandshakeDone:  func(tls.ConnectionState, error) { tm.TLS = time.Since(tlsStart) },
	}
	var reqBody io.Reader
	if dataSet {
		reqBody = strings.NewReader(data)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, u.String(), reqBody)
	if err != nil {
		return command.UsageError("%v", err)
	}
	req.Header.Set("User-Agent", "pkie-obc-get")
	if dataSet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	start := time.Now()
	trace.GotFirstResponseByte = func() { tm.FirstByte = time.Since(start) }
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()

	if jar != nil {
		// The cookies are the user's session even if the body fails.
		if err := jar.save(); err != nil {
			return err
		}
	}
	res := obcGetResult{URL: u.Redacted(), Status: resp.StatusCode, Proto: resp.Proto, Scope: scope, Mode: st.Mode().String(),
		Method: method, Redirects: redirects, NotFollowed: notFollowed}
	mu.Lock()
	if p := presented; p != nil {
		res.Presented, res.Identity, res.Alg = true, p.Identity.String(), string(p.Alg)
		res.Created, res.FromPool = p.Created, p.FromPool
		tm.Key, tm.Cert = p.KeyTime, p.CertTime
	}
	mu.Unlock()

	var body io.Writer = env.Stdout
	var file *os.File
	if *output != "" {
		if file, err = os.Create(*output); err != nil {
			return err
		}
		defer file.Close()
		body = file
	} else if *asJSON {
		body = io.Discard
	}
	n, err := io.Copy(body, resp.Body)
	tm.Total = time.Since(start)
	res.Body, res.Timings = n, tm
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return err
		}
	}
	// The body went first (unless -o): a person reads the summary last,
	// at the prompt.
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, res); err != nil {
			return err
		}
	} else {
		if *output == "" && n > 0 {
			fmt.Fprintln(env.Stdout)
		}
		printOBCGet(env.Stdout, &res)
	}
	if res.Status < 200 || res.Status > 299 {
		msg := fmt.Sprintf("%s answered %d %s", res.URL, res.Status, http.StatusText(res.Status))
		if res.NotFollowed != "" {
			msg += "; redirect to " + res.NotFollowed + " not followed"
		}
		return &command.ExitError{Code: command.ExitNegative, Msg: termtext.Escape(msg)}
	}
	return nil
}

// validMethod reports whether m is a method obc get sends: an HTTP token
// of upper-case letters, as every registered method is.
func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func printOBCGet(w io.Writer, r *obcGetResult) {
	fmt.Fprintf(w, "%s %s  %d %s  (%s)\n", r.Method, termtext.Escape(r.URL), r.Status, http.StatusText(r.Status), r.Proto)
	for _, to := range r.Redirects {
		fmt.Fprintf(w, "  redirected to %s\n", termtext.Escape(to))
	}
	if r.NotFollowed != "" {
		fmt.Fprintf(w, "  redirect to %s not followed\n", termtext.Escape(r.NotFollowed))
	}
	fmt.Fprintf(w, "  scope     %s (%s mode)\n", termtext.Escape(r.Scope), r.Mode)
	if !r.Presented {
		fmt.Fprintln(w, "  no client certificate presented: the server did not ask for one")
	} else {
		how := "reused (made on an earlier visit)"
		if r.Created {
			how = "created now, key generated during the handshake"
			if r.FromPool {
				how = "created now, key from the pool"
			}
		}
		fmt.Fprintf(w, "  identity  %s (%s)\n", r.Identity, r.Alg)
		fmt.Fprintf(w, "  cert      %s\n", how)
	}
	t := r.Timings
	fmt.Fprintf(w, "  timings   key %s  cert %s  dns %s  connect %s  tls %s  first byte %s  total %s\n",
		fmtDur(t.Key), fmtDur(t.Cert), fmtDur(t.DNS), fmtDur(t.Connect), fmtDur(t.TLS), fmtDur(t.FirstByte), fmtDur(t.Total))
	if r.Created {
		fmt.Fprintln(w, "            (the tls handshake includes key and cert: they were made during it)")
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	}
	return d.Round(10 * time.Microsecond).String()
}

// obcRecord is one line of "pkie obc list --json".
type obcRecord struct {
	Scope    string    `json:"scope"`
	Alg      string    `json:"alg"`
	Identity string    `json:"identity,omitempty"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	Problem  string    `json:"problem,omitempty"`
}

func toOBCRecord(r obc.Record) obcRecord {
	out := obcRecord{Scope: r.Scope, Alg: string(r.Alg), Created: r.Created.UTC(), LastUsed: r.LastUsed.UTC(), Problem: r.Problem}
	if r.Problem == "" {
		out.Identity = r.Identity.String()
	}
	return out
}

func OBCList(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "obc list", "[flags]\n\n"+
		"Lists the stored origin-bound keys: scope, algorithm, the identity servers see\n"+
		"(SHA-256 of the key), when each was made and last used.")
	sf := addOBCStoreFlags(fs.String)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return command.UsageError("takes no arguments, got %d", len(pos))
	}
	if _, err := os.Stat(*sf.path); errors.Is(err, os.ErrNotExist) {
		// Listing must not create a store.
		return command.UsageError("no store at %s (pkie obc get makes it)", *sf.path)
	}
	st, err := sf.open(ctx, obc.StoreOptions{})
	if err != nil {
		return err
	}
	defer st.Close()
	recs, err := st.List(ctx)
	if err != nil {
		return err
	}
	out := make([]obcRecord, len(recs))
	for i, r := range recs {
		out[i] = toOBCRecord(r)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, out)
	}
	fmt.Fprintf(env.Stdout, "%s: %d keys, %s mode\n", termtext.Escape(st.Path()), len(out), st.Mode())
	if len(out) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tALG\tIDENTITY\tCREATED\tLAST USED")
	for _, r := range out {
		id := r.Identity
		if r.Problem != "" {
			id = r.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termtext.Escape(r.Scope), termtext.Escape(r.Alg), termtext.Escape(id),
			r.Created.Format(time.RFC3339), r.LastUsed.Format(time.RFC3339))
	}
	return tw.Flush()
}

func OBCForget(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "obc forget", "[flags] ORIGIN|SCOPE\n\n"+
		"Deletes the key of an origin (https://host[:port], mapped to its scope in the\n"+
		"store's mode) or of a scope as \"pkie obc list\" prints it. The site then sees a new\n"+
		"client: every session it bound to the old key is lost. Exit status: 0 deleted,\n"+
		"1 the store has no such key, 2 usage or operational error.")
	sf := addOBCStoreFlags(fs.String)
	asJSON := fs.Bool("json", false, "print what was deleted as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want exactly one ORIGIN or SCOPE, got %d arguments", len(pos))
	}
	if _, err := os.Stat(*sf.path); errors.Is(err, os.ErrNotExist) {
		return command.UsageError("no store at %s", *sf.path)
	}
	st, err := sf.open(ctx, obc.StoreOptions{})
	if err != nil {
		return err
	}
	defer st.Close()
	scope := pos[0]
	if strings.Contains(scope, "://") {
		o, err := obc.ParseOrigin(scope)
		if err != nil {
			return command.UsageError("%v", strings.TrimPrefix(err.Error(), "obc: "))
		}
		if scope, err = st.Scope(o); err != nil {
			return err
		}
	}
	r, err := st.Forget(ctx, scope)
	if errors.Is(err, obc.ErrNotFound) {
		return &command.ExitError{Code: command.ExitNegative, Msg: fmt.Sprintf("no key for %q in %s (pkie obc list shows the scopes)", scope, st.Path())}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, toOBCRecord(r))
	}
	id := r.Identity.String()
	if r.Problem != "" {
		id = r.Problem
	}
	fmt.Fprintf(env.Stdout, "forgot %s: %s key, identity %s, created %s, last used %s\n", termtext.Escape(r.Scope), termtext.Escape(string(r.Alg)),
		termtext.Escape(id), r.Created.UTC().Format(time.RFC3339), r.LastUsed.UTC().Format(time.RFC3339))
	return nil
}
