package server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/publicsuffix"

	"github.com/pkie/pkie/obc"
)

const sessionCookie = "session"

// demoHandler: POST /login?user=NAME sets a bound session cookie, GET
// /whoami answers with the session's value or the binding error.
func demoHandler(b *Binder) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if err := b.SetCookie(w, r, &http.Cookie{Name: sessionCookie, Value: r.URL.Query().Get("user"), Path: "/", HttpOnly: true}); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		fmt.Fprintln(w, "logged in")
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		v, err := b.Cookie(r, sessionCookie)
		switch {
		case errors.Is(err, http.ErrNoCookie):
			http.Error(w, "not logged in", http.StatusUnauthorized)
		case errors.Is(err, ErrMismatch):
			http.Error(w, "mismatch", http.StatusForbidden)
		case errors.Is(err, ErrUnbound):
			http.Error(w, "unbound", http.StatusForbidden)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			fmt.Fprintf(w, "user=%s", v)
		}
	})
	return mux
}

func newKey(t testing.TB, fill byte) []byte { return bytes.Repeat([]byte{fill}, 32) }

func do(t *testing.T, c *http.Client, method, url string, cookie string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), resp
}

// TestStolenCookieRefused: a cookie set for client A and replayed by client
// B (another key), by a client without a certificate, altered, or set under
// another server key is refused; A's own requests pass; the mismatch is
// logged with both identities and never the cookie's value.
func TestStolenCookieRefused(t *testing.T) {
	logger, logs := testLogger()
	b := &Binder{Key: newKey(t, 1), Mode: obc.Strict, Logger: logger}
	srvCert := selfSigned(t, "127.0.0.1")
	addr := serveTLS(t, demoHandler(b), TLSConfig(&tls.Config{Certificates: []tls.Certificate{srvCert}}))
	base := "https://" + addr
	certA, certB := selfSigned(t), selfSigned(t)
	clientA := &http.Client{Transport: transportTo(addr, poolOf(srvCert), &certA)}
	clientB := &http.Client{Transport: transportTo(addr, poolOf(srvCert), &certB)}
	clientNone := &http.Client{Transport: transportTo(addr, poolOf(srvCert), nil)}

	code, _, resp := do(t, clientA, "POST", base+"/login?user=alice-secret-value", "")
	if code != 200 {
		t.Fatalf("login: %d", code)
	}
	var stolen *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			stolen = c
		}
	}
	if stolen == nil {
		t.Fatal("login set no session cookie")
	}
	if !stolen.Secure || stolen.Domain != "" {
		t.Errorf("strict cookie: Secure=%v Domain=%q, want Secure and host-only", stolen.Secure, stolen.Domain)
	}
	if strings.Contains(stolen.Value, "alice") {
		t.Errorf("cookie value %q shows the value in the clear; want it base64url", stolen.Value)
	}
	idA, idB := obc.IdentityOf(certA.Leaf), obc.IdentityOf(certB.Leaf)
	if strings.Contains(stolen.Value, idA.String()) {
		t.Error("cookie carries the identity in the clear")
	}
	cookie := sessionCookie + "=" + stolen.Value

	if code, body, _ := do(t, clientA, "GET", base+"/whoami", cookie); code != 200 || body != "user=alice-secret-value" {
		t.Errorf("owner: %d %q, want 200 user=alice-secret-value", code, body)
	}
	if code, body, _ := do(t, clientB, "GET", base+"/whoami", cookie); code != 403 || body != "mismatch" {
		t.Errorf("stolen cookie from another client: %d %q, want 403 mismatch", code, body)
	}
	l := logs.String()
	if !strings.Contains(l, "bound_to="+idA.String()) || !strings.Contains(l, "channel="+idB.String()) {
		t.Errorf("mismatch log lacks both identities:\n%s", l)
	}
	if strings.Contains(l, "alice") || strings.Contains(l, stolen.Value) {
		t.Errorf("log shows the cookie's value:\n%s", l)
	}
	if code, body, _ := do(t, clientNone, "GET", base+"/whoami", cookie); code != 403 || body != "mismatch" {
		t.Errorf("stolen cookie without a client certificate: %d %q, want 403 mismatch", code, body)
	}
	if !strings.Contains(logs.String(), "channel=none") {
		t.Errorf("no-certificate mismatch not logged:\n%s", logs.String())
	}

	// Altered: every part of the value, flipped one character at a time.
	parts := strings.Split(stolen.Value, ".")
	for i := 1; i < len(parts); i++ {
		p := []byte(parts[i])
		if p[0] == 'A' {
			p[0] = 'B'
		} else {
			p[0] = 'A'
		}
		alt := append(append([]string{}, parts[:i]...), string(p))
		alt = append(alt, parts[i+1:]...)
		if code, body, _ := do(t, clientA, "GET", base+"/whoami", sessionCookie+"="+strings.Join(alt, ".")); code != 403 || body != "unbound" {
			t.Errorf("altered part %d: %d %q, want 403 unbound", i, code, body)
		}
	}
	// Another server's key: the cookie is not a mismatch, it was never ours.
	other := &Binder{Key: newKey(t, 2), Mode: obc.Strict, Logger: logger}
	foreign := other.bind(sessionCookie, []byte("alice"), idA).String()
	if code, body, _ := do(t, clientA, "GET", base+"/whoami", sessionCookie+"="+foreign); code != 403 || body != "unbound" {
		t.Errorf("cookie bound under another key: %d %q, want 403 unbound", code, body)
	}
	// Another cookie name: the name is bound too.
	renamed := b.bind("other", []byte("alice"), idA).String()
	if code, body, _ := do(t, clientA, "GET", base+"/whoami", sessionCookie+"="+renamed); code != 403 || body != "unbound" {
		t.Errorf("cookie bound under another name: %d %q, want 403 unbound", code, body)
	}
	if code, body, _ := do(t, clientA, "GET", base+"/whoami", sessionCookie+"=plain"); code != 403 || body != "unbound" {
		t.Errorf("unbound cookie: %d %q, want 403 unbound", code, body)
	}
	if code, _, _ := do(t, clientA, "GET", base+"/whoami", ""); code != 401 {
		t.Errorf("no cookie: %d, want 401", code)
	}
	// A second, foreign cookie of the same name does not hide the owner's.
	if code, body, _ := do(t, clientA, "GET", base+"/whoami", sessionCookie+"=plain; "+cookie); code != 200 || body != "user=alice-secret-value" {
		t.Errorf("owner's cookie behind a foreign one: %d %q", code, body)
	}
	// Setting a cookie needs a client certificate.
	if code, _, _ := do(t, clientNone, "POST", base+"/login?user=x", ""); code != 403 {
		t.Errorf("login without a client certificate: %d, want 403", code)
	}
}

// routeByHost sends each request through the transport of its URL's host:
// a client that presents a different key per host (strict mode) or one key
// to all (legacy mode), sharing one cookie jar.
type routeByHost map[string]http.RoundTripper

func (r routeByHost) RoundTrip(req *http.Request) (*http.Response, error) {
	rt, ok := r[req.URL.Hostname()]
	if !ok {
		return nil, fmt.Errorf("no transport for %s", req.URL.Host)
	}
	return rt.RoundTrip(req)
}

// TestLegacyDomainCookies: with a legacy-mode server, a cookie set by
// a.example.com is a domain cookie for example.com that a legacy-mode client
// (one key for the registrable domain) presents, accepted, at b.example.com;
// a strict-mode client (a key per origin) presents it at b.example.com with
// another key and is refused. A strict-mode server sets a host-only cookie
// that never reaches b.example.com.
func TestLegacyDomainCookies(t *testing.T) {
	srvCert := selfSigned(t, "*.example.com", "example.com")
	roots := poolOf(srvCert)
	keyForA, keyForB := selfSigned(t), selfSigned(t)
	for _, tt := range []struct {
		server, client obc.Mode
		wantDomain     string
		wantB          int
		wantBBody      string
	}{
		{obc.Legacy, obc.Legacy, "example.com", 200, "user=alice"},
		{obc.Legacy, obc.Strict, "example.com", 403, "mismatch"},
		{obc.Strict, obc.Legacy, "", 401, "not logged in"},
		{obc.Strict, obc.Strict, "", 401, "not logged in"},
	} {
		t.Run(tt.server.String()+"-server/"+tt.client.String()+"-client", func(t *testing.T) {
			logger, logs := testLogger()
			b := &Binder{Key: newKey(t, 3), Mode: tt.server, Logger: logger}
			addr := serveTLS(t, demoHandler(b), TLSConfig(&tls.Config{Certificates: []tls.Certificate{srvCert}}))
			_, port, _ := strings.Cut(addr, ":")
			bCert := &keyForB
			if tt.client == obc.Legacy {
				bCert = &keyForA
			}
			jar, _ := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
			c := &http.Client{Jar: jar, Transport: routeByHost{
				"a.example.com": transportTo(addr, roots, &keyForA),
				"b.example.com": transportTo(addr, roots, bCert),
			}}
			code, _, resp := do(t, c, "POST", "https://a.example.com:"+port+"/login?user=alice", "")
			if code != 200 {
				t.Fatalf("login at a: %d", code)
			}
			if got := resp.Cookies()[0].Domain; got != tt.wantDomain {
				t.Errorf("cookie Domain %q, want %q", got, tt.wantDomain)
			}
			if code, body, _ := do(t, c, "GET", "https://a.example.com:"+port+"/whoami", ""); code != 200 || body != "user=alice" {
				t.Errorf("a: %d %q, want 200 user=alice", code, body)
			}
			if code, body, _ := do(t, c, "GET", "https://b.example.com:"+port+"/whoami", ""); code != tt.wantB || body != tt.wantBBody {
				t.Errorf("b: %d %q, want %d %q", code, body, tt.wantB, tt.wantBBody)
			}
			if tt.wantB == 403 && !strings.Contains(logs.String(), "host=b.example.com") {
				t.Errorf("refusal at b not logged:\n%s", logs.String())
			}
		})
	}
}

func TestRegistrableDomain(t *testing.T) {
	for in, want := range map[string]string{
		"a.example.com:8443":  "example.com",
		"example.com":         "example.com",
		"x.y.example.co.uk":   "example.co.uk",
		"A.Example.COM.":      "example.com",
		"127.0.0.1:8443":      "",
		"[::1]:8443":          "",
		"localhost:8443":      "",
		"github.io":           "",
		"":                    "",
		"user.github.io:443":  "user.github.io",
		"a.b.user.github.io":  "user.github.io",
		"xn--bcher-kva.ch:80": "xn--bcher-kva.ch",
	} {
		if got := registrableDomain(in); got != want {
			t.Errorf("registrableDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetCookieRefusals(t *testing.T) {
	srvCert := selfSigned(t, "127.0.0.1")
	cert := selfSigned(t)
	for _, tt := range []struct {
		name   string
		binder *Binder
		cookie *http.Cookie
		want   string
	}{
		{"short key", &Binder{Key: make([]byte, 31)}, &http.Cookie{Name: "s", Value: "v"}, "31 bytes"},
		{"strict domain", &Binder{Key: newKey(t, 1)}, &http.Cookie{Name: "s", Value: "v", Domain: "example.com"}, "strict mode"},
		{"too large", &Binder{Key: newKey(t, 1)}, &http.Cookie{Name: "s", Value: strings.Repeat("v", 3000)}, "more than the 4096"},
		{"bad name", &Binder{Key: newKey(t, 1)}, &http.Cookie{Name: "s;x", Value: "v"}, "invalid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got error
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = tt.binder.SetCookie(w, r, tt.cookie) })
			addr := serveTLS(t, h, TLSConfig(&tls.Config{Certificates: []tls.Certificate{srvCert}}))
			c := &http.Client{Transport: transportTo(addr, poolOf(srvCert), &cert)}
			resp, err := c.Get("https://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got == nil || !strings.Contains(strings.ToLower(got.Error()), strings.ToLower(tt.want)) {
				t.Errorf("SetCookie error %v, want one containing %q", got, tt.want)
			}
			if len(resp.Cookies()) != 0 {
				t.Errorf("a refused cookie was set: %v", resp.Cookies())
			}
		})
	}
}

func TestParseBound(t *testing.T) {
	b := &Binder{Key: newKey(t, 7)}
	good := b.bind("n", []byte("hello; world"), obc.Identity{1, 2, 3}).String()
	bc, err := ParseBound(good)
	if err != nil {
		t.Fatalf("ParseBound(%q): %v", good, err)
	}
	if string(bc.Value) != "hello; world" || bc.String() != good {
		t.Errorf("round trip: %q, %q", bc.Value, bc.String())
	}
	if id, ok := b.boundTo("n", bc); !ok || id != (obc.Identity{1, 2, 3}) {
		t.Errorf("boundTo = %v %v", id, ok)
	}
	parts := strings.Split(good, ".")
	for _, bad := range []string{
		"",
		"v1",
		"v1.",
		"v2." + strings.Join(parts[1:], "."),
		strings.Join(parts[:3], "."),
		good + ".",
		good + "=",
		"v1." + parts[1] + "=." + parts[2] + "." + parts[3],
		"v1." + parts[1] + "." + parts[2][:42] + "." + parts[3],
		"v1." + parts[1] + "." + parts[2] + "AAAA." + parts[3],
		"v1." + parts[1] + "." + parts[2] + "." + parts[3][:42] + "B", // stray bits
		"v1." + parts[1] + "\n." + parts[2] + "." + parts[3],
		"v1." + parts[1] + "+." + parts[2] + "." + parts[3],
		"v1." + strings.Repeat("A", MaxCookieSize) + "." + parts[2] + "." + parts[3],
	} {
		if _, err := ParseBound(bad); err == nil {
			t.Errorf("ParseBound(%q) accepted", bad)
		}
	}
}

func FuzzParseBound(f *testing.F) {
	b := &Binder{Key: bytes.Repeat([]byte{9}, 32)}
	f.Add(b.bind("session", []byte("alice"), obc.Identity{4}).String())
	f.Add(b.bind("session", nil, obc.Identity{}).String())
	f.Add("v1...")
	f.Add("v1.AA.AA.AA")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, s string) {
		bc, err := ParseBound(s)
		if err != nil {
			return
		}
		// One binding, one spelling.
		if got := bc.String(); got != s {
			t.Fatalf("ParseBound(%q) re-encodes as %q", s, got)
		}
		// Whatever the bytes, verification neither panics nor accepts
		// a binding it did not make, bar a MAC forgery.
		if _, ok := b.boundTo("session", bc); ok {
			if want := b.bind("session", bc.Value, mustID(b, bc)).String(); want != s {
				t.Fatalf("accepted %q, which the binder would spell %q", s, want)
			}
		}
	})
}

func mustID(b *Binder, bc Bound) obc.Identity {
	id, _ := b.boundTo("session", bc)
	return id
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "binder.key")
	k1, created, err := LoadOrCreateKeyFile(p)
	if err != nil || !created || len(k1) != MinKeySize {
		t.Fatalf("create: %d bytes, created=%v, %v", len(k1), created, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %#o, want 0600", fi.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKeyFile(p)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Fatalf("reload: created=%v, same=%v, %v", created, bytes.Equal(k1, k2), err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o644} {
		os.Chmod(p, mode)
		if _, _, err := LoadOrCreateKeyFile(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %#o: %v, want a refusal", mode, err)
		}
	}
	os.Chmod(p, 0o600)
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("AAAA\n"), 0o600)
	if _, err := LoadKeyFile(short); err == nil || !strings.Contains(err.Error(), "3 bytes") {
		t.Errorf("short key: %v", err)
	}
	junk := filepath.Join(dir, "junk.key")
	os.WriteFile(junk, []byte("not base64!\n"), 0o600)
	if _, err := LoadKeyFile(junk); err == nil {
		t.Error("junk key accepted")
	}
	if _, err := LoadKeyFile(dir); err == nil {
		t.Error("a directory accepted as a key file")
	}
}
