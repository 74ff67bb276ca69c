package serve

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/pkie/pkie/obc"
	"github.com/pkie/pkie/obc/server"
)

type obcServeStart struct {
	Listening        string `json:"listening"`
	URL              string `json:"url"`
	Mode             string `json:"mode"`
	CertFile         string `json:"cert_file"`
	Pin              string `json:"pin_sha256"`
	BinderKeyCreated bool   `json:"binder_key_created"`
}

// startOBCServe runs "pkie obc serve --json args..." in this process and
// returns its startup line and a function that stops it and returns its log.
func startOBCServe(t *testing.T, args ...string) (obcServeStart, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: logs, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- OBCServe(ctx, env, append([]string{"--json", "--addr", "127.0.0.1:0"}, args...))
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("obc serve exited (%v) before listening: %s", <-done, logs.String())
	}
	go io.Copy(io.Discard, pr)
	var st obcServeStart
	if err := json.Unmarshal([]byte(line), &st); err != nil || st.Listening == "" {
		t.Fatalf("startup line %q: %v", line, err)
	}
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("obc serve: %v: %s", err, logs.String())
			}
		}
		return logs.String()
	}
	t.Cleanup(func() { stop() })
	return st, stop
}

// obcClientCert is a self-signed client certificate, as an origin-bound
// certificate store makes.
func obcClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "obc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// obcClient returns a client that trusts the server's written certificate,
// dials addr whatever the URL's host, and presents per host the certificate
// certs maps it to ("" for any host), sharing one cookie jar.
func obcClient(t *testing.T, st obcServeStart, certs map[string]*tls.Certificate) *http.Client {
	t.Helper()
	pemBytes, err := os.ReadFile(st.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("written certificate does not parse")
	}
	rts := map[string]http.RoundTripper{}
	for host, cert := range certs {
		tc := &tls.Config{RootCAs: roots}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		d := &net.Dialer{}
		rts[host] = &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, st.Listening)
			}}
	}
	jar, _ := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
	return &http.Client{Jar: jar, Transport: hostRoutes(rts),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type hostRoutes map[string]http.RoundTripper

func (h hostRoutes) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt, ok := h[r.URL.Hostname()]; ok {
		return rt.RoundTrip(r)
	}
	if rt, ok := h[""]; ok {
		return rt.RoundTrip(r)
	}
	return nil, fmt.Errorf("no client for %s", r.URL.Host)
}

// obcDo sends a request (a form for POST) and returns the status and body.
func obcDo(t *testing.T, c *http.Client, method, u string, form url.Values, header ...string) (int, string, *http.Response) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

// TestOBCServeStolenCookie: the owner logs in and reads its session back;
// the same cookie copied to another client (another key) gets the "bound to
// another client" page and a warning naming both identities in the log,
// never the cookie; a client without a certificate is told what it lacks.
func TestOBCServeStolenCookie(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "binder.key")
	st, stop := startOBCServe(t, "--write-cert", filepath.Join(dir, "server.pem"), "--key-file", keyFile)
	if !st.BinderKeyCreated || st.Mode != "strict" || !strings.HasPrefix(st.Pin, "sha256/") {
		t.Errorf("startup: %+v", st)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("binder key file: %v %v, want mode 0600", fi, err)
	}
	owner, thief := obcClientCert(t), obcClientCert(t)
	cOwner := obcClient(t, st, map[string]*tls.Certificate{"": &owner})
	cThief := obcClient(t, st, map[string]*tls.Certificate{"": &thief})
	cNone := obcClient(t, st, map[string]*tls.Certificate{"": nil})
	ownerID, thiefID := obc.IdentityOf(owner.Leaf).String(), obc.IdentityOf(thief.Leaf).String()

	if code, body, _ := obcDo(t, cOwner, "GET", st.URL+"/", nil); code != 200 || !strings.Contains(body, ownerID) || !strings.Contains(body, "TLS 1.3") {
		t.Errorf("home: %d, want 200 showing identity %s over TLS 1.3:\n%s", code, ownerID, body)
	}
	code, _, resp := obcDo(t, cOwner, "POST", st.URL+"/login", url.Values{"user": {"alice"}})
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/whoami" {
		t.Fatalf("login: %d -> %q", code, resp.Header.Get("Location"))
	}
	var stolen *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == OBCSessionCookie {
			stolen = c
		}
	}
	if stolen == nil || !stolen.Secure || !stolen.HttpOnly || stolen.Domain != "" {
		t.Fatalf("session cookie %v: want Secure, HttpOnly, host-only", stolen)
	}
	if code, body, _ := obcDo(t, cOwner, "GET", st.URL+"/whoami", nil); code != 200 || !strings.Contains(body, "Logged in as <strong>alice</strong>") {
		t.Errorf("owner /whoami: %d\n%s", code, body)
	}
	var who obcPage
	_, body, _ := obcDo(t, cOwner, "GET", st.URL+"/whoami", nil, "Accept", "application/json")
	if err := json.Unmarshal([]byte(body), &who); err != nil || who.User != "alice" || who.Identity != ownerID || who.Mode != "strict" {
		t.Errorf("owner /whoami JSON: %+v %v", who, err)
	}

	cookie := OBCSessionCookie + "=" + stolen.Value
	code, body, _ = obcDo(t, cThief, "GET", st.URL+"/whoami", nil, "Cookie", cookie)
	if code != http.StatusForbidden || !strings.Contains(body, "this cookie is bound to another client") || strings.Contains(body, "Logged in as") {
		t.Errorf("thief /whoami: %d, want 403 \"bound to another client\":\n%s", code, body)
	}
	if code, body, _ := obcDo(t, cThief, "GET", st.URL+"/", nil, "Cookie", cookie); code != 200 || strings.Contains(body, "alice") {
		t.Errorf("thief's home page: %d shows the session:\n%s", code, body)
	}
	code, body, _ = obcDo(t, cNone, "GET", st.URL+"/whoami", nil, "Cookie", cookie)
	if code != http.StatusForbidden || body != server.NoCertificateMessage {
		t.Errorf("no certificate /whoami: %d %q", code, body)
	}
	if code, body, _ := obcDo(t, cNone, "GET", st.URL+"/", nil); code != 200 || !strings.Contains(body, "presented no TLS client certificate") {
		t.Errorf("no certificate home: %d\n%s", code, body)
	}
	// Altered (the session id inside changed): no valid binding.
	bc, err := server.ParseBound(stolen.Value)
	if err != nil {
		t.Fatal(err)
	}
	bc.Value[len(bc.Value)-1] ^= 1
	cOwnerFresh := obcClient(t, st, map[string]*tls.Certificate{"": &owner}) // its jar holds no session
	if code, body, _ := obcDo(t, cOwnerFresh, "GET", st.URL+"/whoami", nil, "Cookie", OBCSessionCookie+"="+bc.String()); code != 403 || !strings.Contains(body, "no valid binding") {
		t.Errorf("altered cookie: %d\n%s", code, body)
	}

	logs := stop()
	var warned bool
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "bound to another client") && strings.Contains(l, ownerID) && strings.Contains(l, thiefID) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no log line names both identities:\n%s", logs)
	}
	if strings.Contains(logs, stolen.Value) {
		t.Errorf("the log shows the cookie:\n%s", logs)
	}

	// Sessions live in the server's memory: after a restart on the same key
	// file the cookie still verifies (this server's key, this channel) but
	// names no session, and is told so.
	st2, _ := startOBCServe(t, "--write-cert", filepath.Join(dir, "server2.pem"), "--key-file", keyFile, "--session-ttl", "1h")
	if st2.BinderKeyCreated {
		t.Error("key file re-created")
	}
	c2 := obcClient(t, st2, map[string]*tls.Certificate{"": &owner})
	if code, body, _ := obcDo(t, c2, "GET", st2.URL+"/whoami", nil, "Cookie", cookie); code != 401 || !strings.Contains(body, "session ended") || strings.Contains(body, "alice") {
		t.Errorf("after restart: %d, want 401 \"session ended\"\n%s", code, body)
	}
	// A cookie in this server's key naming no session it started (here,
	// the format before sessions were kept on the server) opens nothing.
	key, err := server.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	forged := obcBoundCookie(t, key, owner, strconv.FormatInt(time.Now().Unix(), 10)+" alice")
	if code, body, _ := obcDo(t, c2, "GET", st2.URL+"/whoami", nil, "Cookie", forged); code != 401 || !strings.Contains(body, "session ended") {
		t.Errorf("a bound cookie naming no session: %d\n%s", code, body)
	}
}

// TestOBCServeLogout: logging out ends the session on the server. A copy
// of the session cookie kept from before logout, replayed on the same
// channel (the same client key), is refused with 401; a copy sent by
// another client cannot log its owner out; a login is refused once the
// client address holds --max-sessions-per-ip sessions, and accepted again
// after a logout frees one.
func TestOBCServeLogout(t *testing.T) {
	dir := t.TempDir()
	st, _ := startOBCServe(t, "--write-cert", filepath.Join(dir, "server.pem"), "--max-sessions-per-ip", "2")
	owner, thief, third := obcClientCert(t), obcClientCert(t), obcClientCert(t)
	cOwner := obcClient(t, st, map[string]*tls.Certificate{"": &owner})
	cThief := obcClient(t, st, map[string]*tls.Certificate{"": &thief})
	cThird := obcClient(t, st, map[string]*tls.Certificate{"": &third})
	login := func(c *http.Client) (int, string) {
		t.Helper()
		code, _, resp := obcDo(t, c, "POST", st.URL+"/login", url.Values{"user": {"alice"}})
		for _, ck := range resp.Cookies() {
			if ck.Name == OBCSessionCookie {
				return code, OBCSessionCookie + "=" + ck.Value
			}
		}
		return code, ""
	}
	code, kept := login(cOwner)
	if code != http.StatusSeeOther || kept == "" {
		t.Fatalf("login: %d, cookie %q", code, kept)
	}
	if code, body, _ := obcDo(t, cOwner, "GET", st.URL+"/whoami", nil, "Cookie", kept); code != 200 || !strings.Contains(body, "alice") {
		t.Fatalf("/whoami before logout: %d\n%s", code, body)
	}
	// The thief's logout with the copied cookie ends nothing.
	if code, body, _ := obcDo(t, cThief, "POST", st.URL+"/logout", nil, "Cookie", kept, "Accept", "application/json"); code != 200 || !strings.Contains(body, "no session to end") {
		t.Errorf("thief's logout: %d\n%s", code, body)
	}
	if code, _, _ := obcDo(t, cOwner, "GET", st.URL+"/whoami", nil, "Cookie", kept); code != 200 {
		t.Fatalf("the owner's session after the thief's logout: %d, want 200", code)
	}
	// The address now holds one session; a second key fills its share.
	if code, _ := login(cThief); code != http.StatusSeeOther {
		t.Fatalf("second login from the address: %d", code)
	}
	if code, _ := login(cThird); code != http.StatusTooManyRequests {
		t.Errorf("third login from an address allowed two sessions: %d, want 429", code)
	}

	code, body, resp := obcDo(t, cOwner, "POST", st.URL+"/logout", nil, "Cookie", kept, "Accept", "application/json")
	if code != 200 || !strings.Contains(body, "ended on the server") {
		t.Fatalf("logout: %d\n%s", code, body)
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].Name != OBCSessionCookie || cs[0].MaxAge >= 0 {
		t.Errorf("logout does not delete the cookie: %v", cs)
	}
	// The cookie kept from before logout, replayed on the same channel.
	code, body, _ = obcDo(t, cOwner, "GET", st.URL+"/whoami", nil, "Cookie", kept)
	if code != http.StatusUnauthorized || strings.Contains(body, "Logged in as") {
		t.Errorf("cookie kept from before logout: %d, want 401:\n%s", code, body)
	}
	if code, body, _ := obcDo(t, cOwner, "GET", st.URL+"/", nil, "Cookie", kept); code != 200 || strings.Contains(body, "Logged in as") {
		t.Errorf("home page with the kept cookie: %d shows the session:\n%s", code, body)
	}
	// The logout freed the address's share.
	if code, _ := login(cThird); code != http.StatusSeeOther {
		t.Errorf("login after a logout freed a session: %d, want 303", code)
	}
}

// obcBoundCookie binds value to cert's key under key, as the server would,
// by running a Binder in a loopback handshake.
func obcBoundCookie(t *testing.T, key []byte, cert tls.Certificate, value string) string {
	t.Helper()
	srvCert, err := obcServerCert(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &server.Binder{Key: key}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server.TLSConfig(&tls.Config{Certificates: []tls.Certificate{srvCert}}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := b.SetCookie(w, r, &http.Cookie{Name: OBCSessionCookie, Value: value}); err != nil {
			t.Error(err)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srvCert.Leaf)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	resp, err := c.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return OBCSessionCookie + "=" + resp.Cookies()[0].Value
}

// TestOBCServeLegacy: in legacy mode the session cookie set by
// a.example.com is a domain cookie that a client with one key for
// example.com (legacy mode) carries, accepted, to b.example.com, while a
// client with a key per origin (strict) is refused there; in strict mode
// the cookie is host-only and never reaches b.example.com.
func TestOBCServeLegacy(t *testing.T) {
	ka, kb := obcClientCert(t), obcClientCert(t)
	for _, tt := range []struct {
		server, client string
		wantDomain     string
		wantB          int
		wantBText      string
	}{
		{"legacy", "legacy", "example.com", 200, "Logged in as <strong>alice</strong>"},
		{"legacy", "strict", "example.com", 403, "this cookie is bound to another client"},
		{"strict", "legacy", "", 401, "not logged in"},
		{"strict", "strict", "", 401, "not logged in"},
	} {
		t.Run(tt.server+"-server/"+tt.client+"-client", func(t *testing.T) {
			dir := t.TempDir()
			st, _ := startOBCServe(t, "--mode", tt.server, "--name", "*.example.com", "--write-cert", filepath.Join(dir, "server.pem"))
			_, port, _ := net.SplitHostPort(st.Listening)
			forB := &kb
			if tt.client == "legacy" {
				forB = &ka
			}
			c := obcClient(t, st, map[string]*tls.Certificate{"a.example.com": &ka, "b.example.com": forB})
			a, b := "https://a.example.com:"+port, "https://b.example.com:"+port
			code, _, resp := obcDo(t, c, "POST", a+"/login", url.Values{"user": {"alice"}})
			if code != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].Domain != tt.wantDomain {
				t.Fatalf("login at a: %d, cookies %v, want Domain %q", code, resp.Cookies(), tt.wantDomain)
			}
			if code, body, _ := obcDo(t, c, "GET", a+"/whoami", nil); code != 200 || !strings.Contains(body, "alice") {
				t.Errorf("a /whoami: %d\n%s", code, body)
			}
			if code, body, _ := obcDo(t, c, "GET", b+"/whoami", nil); code != tt.wantB || !strings.Contains(body, tt.wantBText) {
				t.Errorf("b /whoami: %d, want %d %q:\n%s", code, tt.wantB, tt.wantBText, body)
			}
		})
	}
}

// TestOBCServeBounds: a login form over the size bound is refused before it
// is read whole, a bad user name is refused, and bad usage is reported
// before listening.
func TestOBCServeBounds(t *testing.T) {
	dir := t.TempDir()
	st, _ := startOBCServe(t, "--write-cert", filepath.Join(dir, "server.pem"))
	cert := obcClientCert(t)
	c := obcClient(t, st, map[string]*tls.Certificate{"": &cert})
	if code, _, _ := obcDo(t, c, "POST", st.URL+"/login", url.Values{"user": {strings.Repeat("x", 64<<10)}}); code != http.StatusRequestEntityTooLarge {
		t.Errorf("64 KiB form: %d, want 413", code)
	}
	for _, u := range []string{"", strings.Repeat("x", 65), "a\x01b", "\xff"} {
		if code, _, resp := obcDo(t, c, "POST", st.URL+"/login", url.Values{"user": {u}}); code != 400 || len(resp.Cookies()) != 0 {
			t.Errorf("user %q: %d %v, want 400 and no cookie", u, code, resp.Cookies())
		}
	}
	if code, _, _ := obcDo(t, c, "GET", st.URL+"/login", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /login: %d, want 405", code)
	}

	readable := filepath.Join(dir, "readable.key")
	os.WriteFile(readable, []byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 0o644)
	os.Chmod(readable, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--key-file", readable}, "chmod 600"},
		{[]string{"--mode", "loose"}, "--mode"},
		{[]string{"--cert", "x.pem"}, "--cert and --key go together"},
		{[]string{"--session-ttl", "0s"}, "--session-ttl"},
		{[]string{"--max-sessions", "0"}, "--max-sessions"},
		{[]string{"--max-sessions-per-ip", "-1"}, "--max-sessions"},
		{[]string{"extra"}, "no arguments"},
	} {
		env := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		// Cancelled: should a check be missing, the server stops at
		// once and the test fails instead of hanging.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := OBCServe(ctx, env, append([]string{"--addr", "127.0.0.1:0"}, tt.args...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}
