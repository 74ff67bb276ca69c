package notary_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// world is a site and a notary that reaches it.
type world struct {
	ca     *testbed.CA
	site   *testbed.Site
	path   *testbed.Resolver
	notary *testbed.Notary
	client *http.Client
}

func newWorld(t *testing.T, cfg notary.Config) *world {
	t.Helper()
	ca, err := testbed.NewRootCA("Test Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("site.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	path := testbed.NewResolver()
	path.Set("site.test", site.Addr)
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "n1", Path: path, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &world{ca: ca, site: site, path: path, notary: n, client: pinnedClient(n.Identity.Cert)}
}

// pinnedClient trusts exactly the notary's certificate, as a Convergence
// client does.
func pinnedClient(cert *x509.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], cert.Raw) {
				return fmt.Errorf("notary certificate does not match the pinned one")
			}
			return nil
		},
	}}}
}

func sha1Colon(der []byte) string { s := sha1.Sum(der); return probe.ColonHex(s[:]) }

func (w *world) post(t *testing.T, target, body string) (int, []byte) {
	t.Helper()
	resp, err := w.client.Post("https://"+w.notary.Addr.String()+"/target/"+target, "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// convergenceVerify checks a response the way existing Convergence clients
// do, independently of the notary package: cut the body before
// `, "signature":`, append `}`, verify SHA1withRSA with the bundle's
// certificate, then read the list.
func convergenceVerify(t *testing.T, body []byte, cert *x509.Certificate) []string {
	t.Helper()
	i := bytes.LastIndex(body, []byte(`, "signature":`))
	if i < 0 {
		t.Fatalf("no signature in %s", body)
	}
	signed := append(append([]byte(nil), body[:i]...), '}')
	var whole struct {
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(body, &whole); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	sig, err := base64.StdEncoding.DecodeString(whole.Signature)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(signed)
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA1, sum[:], sig); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	var list struct {
		FingerprintList []struct {
			Timestamp   struct{ Start, Finish string } `json:"timestamp"`
			Fingerprint string                         `json:"fingerprint"`
		} `json:"fingerprintList"`
	}
	if err := json.Unmarshal(signed, &list); err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, e := range list.FingerprintList {
		if e.Timestamp.Start == "" || e.Timestamp.Finish < e.Timestamp.Start {
			t.Errorf("bad timestamps %+v", e.Timestamp)
		}
		fps = append(fps, e.Fingerprint)
	}
	return fps
}

func TestConvergenceMatchMismatchAndCache(t *testing.T) {
	w := newWorld(t, notary.Config{})
	good := sha1Colon(w.site.Leaf().Cert.Raw)
	bad := sha1Colon([]byte("forged"))

	code, body := w.post(t, "site.test+443", "fingerprint="+good)
	if code != http.StatusOK {
		t.Fatalf("matching fingerprint: status %d: %s", code, body)
	}
	if fps := convergenceVerify(t, body, w.notary.Identity.Cert); len(fps) != 1 || fps[0] != good {
		t.Fatalf("list = %v, want [%s]", fps, good)
	}

	// A cached match needs no probe: with the site gone, still 200.
	w.site.Close()
	code, body = w.post(t, "site.test+443", "fingerprint="+strings.ToLower(good))
	if code != http.StatusOK {
		t.Fatalf("cached match: status %d: %s", code, body)
	}
	// A mismatch always probes; the site is down, so the notary cannot vouch.
	code, body = w.post(t, "site.test+443", "fingerprint="+bad)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("mismatch with site down: status %d: %s", code, body)
	}

	// Site back with a renewed certificate: the old fingerprint is a
	// mismatch (409, signed), the new one matches.
	leaf2, _ := w.ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	site2, err := testbed.StartSite("site.test", leaf2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site2.Close()
	w.path.Set("site.test", site2.Addr)
	code, body = w.post(t, "site.test+443", "fingerprint="+sha1Colon(w.site.Leaf().Cert.Raw)+"&x=1")
	// The stored fingerprint matches and is fresh, so the notary answers
	// from its cache: Convergence semantics.
	if code != http.StatusOK {
		t.Fatalf("stale-but-cached: status %d: %s", code, body)
	}
	code, body = w.post(t, "site.test+443", "fingerprint="+bad)
	if code != http.StatusConflict {
		t.Fatalf("mismatch: status %d: %s", code, body)
	}
	fps := convergenceVerify(t, body, w.notary.Identity.Cert)
	if len(fps) != 2 || fps[1] != sha1Colon(leaf2.Cert.Raw) {
		t.Fatalf("history after renewal = %v", fps)
	}
	code, _ = w.post(t, "site.test+443", "fingerprint="+sha1Colon(leaf2.Cert.Raw))
	if code != http.StatusOK {
		t.Fatalf("renewed fingerprint: status %d", code)
	}

	// GET returns the signed history.
	resp, err := w.client.Get("https://" + w.notary.Addr.String() + "/target/site.test+443")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(convergenceVerify(t, body, w.notary.Identity.Cert)) != 2 {
		t.Fatalf("GET history: %d %s", resp.StatusCode, body)
	}
}

func TestMaxAgeForcesProbe(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	w := newWorld(t, notary.Config{MaxAge: time.Hour, Now: clock})
	good := sha1Colon(w.site.Leaf().Cert.Raw)
	if code, _ := w.post(t, "site.test+443", "fingerprint="+good); code != 200 {
		t.Fatal(code)
	}
	w.site.Close()
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	// The cached observation is too old to vouch with; the probe fails.
	if code, body := w.post(t, "site.test+443", "fingerprint="+good); code != http.StatusServiceUnavailable {
		t.Fatalf("expired cache: status %d: %s", code, body)
	}
}

func TestBadInputs(t *testing.T) {
	w := newWorld(t, notary.Config{})
	// A listener that accepts and never speaks: probes time out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	w.path.Set("silent.test", silent.Addr().(*net.TCPAddr).AddrPort())
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().(*net.TCPAddr).AddrPort()
	closed.Close()
	w.path.Set("refused.test", closedAddr)

	// A second notary without the allow-private option.
	strict := newStrictNotary(t)

	good := "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)
	tests := []struct {
		name, method, path, body string
		client                   *world
		code                     int
		msg                      string
	}{
		{"no port", "POST", "/target/site.test", good, w, 400, "is not <host>+<port>"},
		{"dot path, no redirect", "POST", "/target/.", good, w, 400, "is not <host>+<port>"},
		{"dot host", "POST", "/target/..+443", good, w, 400, "empty or over-long label"},
		{"port out of range", "POST", "/target/site.test+70000", good, w, 400, "out of range"},
		{"port zero", "POST", "/target/site.test+0", good, w, 400, "out of range"},
		{"port not a number", "POST", "/target/site.test+https", good, w, 400, "out of range"},
		{"empty host", "POST", "/target/+443", good, w, 400, "host is empty"},
		{"bad host char", "POST", "/target/si%20te.test+443", good, w, 400, "cannot"},
		{"missing fingerprint", "POST", "/target/site.test+443", "", w, 400, "missing fingerprint"},
		{"malformed fingerprint", "POST", "/target/site.test+443", "fingerprint=AB:CD", w, 400, "malformed fingerprint"},
		{"non-hex fingerprint", "POST", "/target/site.test+443", "fingerprint=" + strings.Repeat("ZZ:", 19) + "ZZ", w, 400, "not hex"},
		{"oversized body", "POST", "/target/site.test+443", good + "&pad=" + strings.Repeat("a", 5000), w, 413, "exceeds"},
		{"wrong method", "PUT", "/target/site.test+443", good, w, 405, "not allowed"},
		{"unresolvable host", "POST", "/target/nowhere.test+443", good, w, 503, "cannot resolve"},
		{"refused connection", "POST", "/target/refused.test+443", good, w, 503, "cannot connect to the target"},
		{"timeout", "POST", "/target/silent.test+443", good, w, 503, "timed out"},
		{"private address refused", "POST", "/target/127.0.0.1+443", good, strict, 403, "not public"},
		{"GET unknown", "GET", "/target/never.test+443", "", w, 404, "no observations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "https://"+tc.client.notary.Addr.String()+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := tc.client.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Errorf("status %d body %s; want %d containing %q", resp.StatusCode, b, tc.code, tc.msg)
			}
		})
	}
}

// TestConvergenceClientForms sends the requests real Convergence clients
// send: the maintained fork appends the address it connected to
// ("/target/h+p/<ip>"), and the original notary took the fingerprint from
// the query string as readily as from the form (Twisted merges the two).
func TestConvergenceClientForms(t *testing.T) {
	w := newWorld(t, notary.Config{})
	good := sha1Colon(w.site.Leaf().Cert.Raw)
	// An address the client claims to have connected to; the notary must
	// never dial it (it is not the site) nor record under it.
	decoy := "192.0.2.7"
	tests := []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"fork appends the client's address", "/target/site.test+443/" + decoy, "fingerprint=" + good, 200, ""},
		{"fork, IPv6 address", "/target/site.test+443/2001:db8::7", "fingerprint=" + good, 200, ""},
		{"fingerprint in the query", "/target/site.test+443?fingerprint=" + good, "", 200, ""},
		{"fork path and query", "/target/site.test+443/" + decoy + "?fingerprint=" + good, "", 200, ""},
		{"same fingerprint in both", "/target/site.test+443?fingerprint=" + strings.ToLower(good), "fingerprint=" + good, 200, ""},
		{"conflicting fingerprints", "/target/site.test+443?fingerprint=" + sha1Colon([]byte("x")), "fingerprint=" + good, 400, "conflicting fingerprints"},
		{"malformed query fingerprint", "/target/site.test+443?fingerprint=AB", "", 400, "malformed fingerprint"},
		{"trailing segment not an address", "/target/site.test+443/evil.test", "fingerprint=" + good, 400, "not an IP address"},
		{"two trailing segments", "/target/site.test+443/" + decoy + "/x", "fingerprint=" + good, 400, "not an IP address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := w.client.Post("https://"+w.notary.Addr.String()+tc.path, "application/x-www-form-urlencoded", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Fatalf("status %d body %s; want %d containing %q", resp.StatusCode, b, tc.code, tc.msg)
			}
			if tc.code == 200 {
				if fps := convergenceVerify(t, b, w.notary.Identity.Cert); !slices.Contains(fps, good) {
					t.Fatalf("signed list %v lacks %s", fps, good)
				}
			}
		})
	}
	// The appended address was ignored: what the notary saw is the name's
	// history, and nothing was recorded under the address.
	ctx := context.Background()
	if recs, err := w.notary.History.Lookup(ctx, store.Key{Host: "site.test", Port: 443}); err != nil || len(recs) != 1 {
		t.Fatalf("name history = %v, %v; want one record", recs, err)
	}
	if recs, err := w.notary.History.Lookup(ctx, store.Key{Host: "site.test", Port: 443, IP: netip.MustParseAddr(decoy)}); err != nil || len(recs) != 0 {
		t.Fatalf("history under the client's address = %v, %v; want none", recs, err)
	}
}

func newStrictNotary(t *testing.T) *world {
	t.Helper()
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	// StartNotary allows private targets (the testbed lives on loopback);
	// build a strict one by hand on the same history.
	strict, err := notary.New(notary.Config{Identity: n.Identity, History: n.History, Prober: probe.New(probe.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { strict.ServeTLS(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	n.Addr = ln.Addr().(*net.TCPAddr).AddrPort()
	return &world{notary: n, client: pinnedClient(n.Identity.Cert)}
}

func TestCoalescingAndOverload(t *testing.T) {
	w := newWorld(t, notary.Config{MaxProbes: 1, MaxQueue: 1})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for i := 0; i < 4; i++ {
		w.path.Set(fmt.Sprintf("slow%d.test", i), silent.Addr().(*net.TCPAddr).AddrPort())
	}
	good := "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)
	var wg sync.WaitGroup
	codes := make([]int, 4)
	start := make(chan struct{})
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			codes[i], _ = w.post(t, fmt.Sprintf("slow%d.test+443", i), good)
		}(i)
	}
	close(start)
	wg.Wait()
	// One probe runs, one waits, the other two are refused at once.
	n503 := 0
	for _, c := range codes {
		if c == http.StatusServiceUnavailable {
			n503++
		}
	}
	if n503 != 4 {
		t.Fatalf("codes %v: every slow probe should end in 503 (timeouts or overload)", codes)
	}
	m := metricsText(t, w)
	if !strings.Contains(m, "pkie_notary_overloaded_total") {
		t.Fatal("no overload metric")
	}

	// Identical concurrent requests coalesce into one probe.
	before := probeCount(t, w)
	codes = make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], _ = w.post(t, "site.test+443", "fingerprint="+sha1Colon([]byte("x")))
		}(i)
	}
	wg.Wait()
	for _, c := range codes {
		if c != http.StatusConflict {
			t.Fatalf("codes %v, want all 409", codes)
		}
	}
	if got := probeCount(t, w) - before; got < 1 || got > 8 {
		t.Fatalf("%d probes for 8 identical requests", got)
	}
}

func metricsText(t *testing.T, w *world) string {
	resp, err := w.client.Get("https://" + w.notary.Addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func probeCount(t *testing.T, w *world) int {
	for _, line := range strings.Split(metricsText(t, w), "\n") {
		if strings.HasPrefix(line, "pkie_notary_probe_duration_seconds_count") {
			var n int
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%d", &n)
			return n
		}
	}
	return 0
}

func TestV1(t *testing.T) {
	w := newWorld(t, notary.Config{})
	leaf := w.site.Leaf().Cert.Raw
	sum := sha256Hex(leaf)
	pub := w.notary.Identity.V1.Public()
	tests := []struct {
		name  string
		req   string
		code  int
		match *bool
	}{
		{"match", `{"host":"site.test","port":443,"sha256":"` + sum + `"}`, 200, ptr(true)},
		{"cached match", `{"host":"site.test","port":443,"sha256":"` + sum + `"}`, 200, ptr(true)},
		{"mismatch", `{"host":"site.test","port":443,"sha256":"` + strings.Repeat("00", 32) + `"}`, 200, ptr(false)},
		{"no fingerprint", `{"host":"site.test","port":443,"sni":"site.test"}`, 200, nil},
		{"bad sha", `{"host":"site.test","port":443,"sha256":"xyz"}`, 400, nil},
		{"unknown field", `{"host":"site.test","port":443,"bogus":1}`, 400, nil},
		{"bad port", `{"host":"site.test","port":0}`, 400, nil},
		{"trailing", `{"host":"site.test","port":443} {}`, 400, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := w.client.Post("https://"+w.notary.Addr.String()+"/v1/check", "application/json", strings.NewReader(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if tc.code != 200 {
				return
			}
			// The client's own verifier: signature, subject, freshness,
			// and a match that agrees with the signed current certificate.
			var req notarywire.Request
			if err := json.Unmarshal([]byte(tc.req), &req); err != nil {
				t.Fatal(err)
			}
			q := consensus.V1Question{Host: req.Host, Port: req.Port, SNI: req.SNI}
			if req.SHA256 != "" {
				var fp [32]byte
				hex.Decode(fp[:], []byte(req.SHA256))
				q.SHA256 = &fp
			}
			a, err := consensus.VerifyV1(b, pub.(ed25519Pub), q, time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if (a.Match == nil) != (tc.match == nil) || a.Match != nil && *a.Match != *tc.match {
				t.Fatalf("match = %v, want %v", a.Match, tc.match)
			}
			if a.Current != sum || len(a.History) == 0 {
				t.Fatalf("answer %+v", a)
			}
			// Tampering with the answer breaks the signature.
			tampered := bytes.Replace(b, []byte(`"port":443`), []byte(`"port":444`), 1)
			if _, err := consensus.VerifyV1(tampered, pub.(ed25519Pub), q, time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "signature") {
				t.Fatalf("tampered answer: %v", err)
			}
		})
	}
}

func TestBouncer(t *testing.T) {
	w := newWorld(t, notary.Config{})
	b := notary.NewBouncer([]string{w.notary.Addr.String()}, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go notary.ServeBouncer(ctx, ln, b)
	proxyURL, _ := url.Parse("http://" + ln.Addr().String())
	c := pinnedClient(w.notary.Identity.Cert)
	c.Transport.(*http.Transport).Proxy = http.ProxyURL(proxyURL)
	resp, err := c.Post("https://"+w.notary.Addr.String()+"/target/site.test+443", "application/x-www-form-urlencoded",
		strings.NewReader("fingerprint="+sha1Colon(w.site.Leaf().Cert.Raw)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("bounced request: %d", resp.StatusCode)
	}
	// CONNECT elsewhere is refused.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", w.site.Addr, w.site.Addr)
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	if !strings.Contains(string(buf[:n]), "403") {
		t.Fatalf("CONNECT to a non-notary: %q", buf[:n])
	}
}

// TestBouncerTriesEveryReplica speaks to the bouncer as Convergence
// clients do: the request line names one replica, X-Convergence-Notary
// headers ("host+port") name the others; the bouncer relays to the first
// that answers and says which, and refuses the whole request when any
// destination is not a configured notary.
func TestBouncerTriesEveryReplica(t *testing.T) {
	w := newWorld(t, notary.Config{})
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	live := w.notary.Addr
	b := notary.NewBouncer([]string{deadAddr, live.String()}, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- notary.ServeBouncer(ctx, ln, b) }()
	t.Cleanup(func() { cancel(); <-done })
	plus := func(ap string) string { h, p, _ := net.SplitHostPort(ap); return h + "+" + p }

	connect := func(t *testing.T, target string, headers ...string) (net.Conn, *http.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
		for _, h := range headers {
			req += "X-Convergence-Notary: " + h + "\r\n"
		}
		io.WriteString(conn, req+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return conn, resp
	}

	t.Run("first replica down, second answers", func(t *testing.T) {
		conn, resp := connect(t, deadAddr, plus(live.String()))
		if resp.StatusCode != 200 || resp.Status != "200 Connection Established" {
			t.Fatalf("status %q; want 200 Connection Established", resp.Status)
		}
		if resp.Header.Get("Proxy-Agent") == "" || resp.Header.Get("X-Convergence-Notary") != plus(live.String()) {
			t.Fatalf("headers %v; want Proxy-Agent and X-Convergence-Notary: %s", resp.Header, plus(live.String()))
		}
		// The tunnel reaches the notary: a pinned TLS query through it.
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.ConnectionState().PeerCertificates[0].Raw, w.notary.Identity.Cert.Raw) {
			t.Fatal("tunnel reached something other than the notary")
		}
	})
	t.Run("destination not allowed", func(t *testing.T) {
		_, resp := connect(t, live.String(), plus(w.site.Addr.String()))
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %q; want 403", resp.Status)
		}
	})
	t.Run("every destination down", func(t *testing.T) {
		_, resp := connect(t, deadAddr)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %q; want 502", resp.Status)
		}
	})
}

func FuzzParseTargetPath(f *testing.F) {
	for _, s := range []string{"/target/example.com+443", "/target/+", "/target/[::1]+8443", "/target/a+b+443", "/target/x+0443", "/target/example.com+443/192.0.2.1", "/target/example.com+443/[2001:db8::1]", "/target/a+1/b+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		host, port, err := notary.ParseTargetPath(path)
		if err != nil {
			return
		}
		if port < 1 || port > 65535 || host == "" || notary.ValidHost(host) != nil {
			t.Fatalf("accepted %q as %q %d", path, host, port)
		}
	})
}

// offlineNotary is a notary on a throwaway SQLite history whose prober
// can resolve nothing, for fuzzing its handlers without network traffic.
func offlineNotary(f *testing.F) http.Handler {
	id, err := notary.NewIdentity("fuzz", nil)
	if err != nil {
		f.Fatal(err)
	}
	h, err := store.OpenSQLite(context.Background(), filepath.Join(f.TempDir(), "h.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	nowhere := func(context.Context, string, int) ([]netip.AddrPort, error) {
		return nil, fmt.Errorf("no network in fuzzing")
	}
	n, err := notary.New(notary.Config{Identity: id, History: h, Prober: probe.New(probe.Options{Lookup: nowhere})})
	if err != nil {
		f.Fatal(err)
	}
	return n.Handler()
}

// FuzzConvergenceRequest feeds arbitrary paths and form bodies to the
// Convergence handler. Its prober can reach nothing, so every request ends
// without network traffic; the handler must answer, never panic, and only
// with the statuses the API defines.
func FuzzConvergenceRequest(f *testing.F) {
	handler := offlineNotary(f)
	f.Add("POST", "/target/example.com+443", "fingerprint=AB:CD")
	f.Add("POST", "/target/example.com+443", "fingerprint="+strings.Repeat("AB:", 19)+"AB")
	f.Add("GET", "/target/a+1", "")
	f.Add("POST", "/target/a+1", "fingerprint=%zz&fingerprint=")
	f.Add("POST", "/target/example.com+443/192.0.2.1", "fingerprint="+strings.Repeat("AB:", 19)+"AB")
	f.Add("POST", "/target/example.com+443?fingerprint="+strings.Repeat("AB:", 19)+"AB", "fingerprint="+strings.Repeat("CD:", 19)+"CD")
	allowed := map[int]bool{200: true, 400: true, 403: true, 404: true, 405: true, 409: true, 413: true, 503: true}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if method != "GET" && method != "POST" && method != "PUT" {
			method = "POST"
		}
		u, err := url.Parse("https://notary" + path)
		if err != nil || !strings.HasPrefix(u.Path, "/target/") {
			return
		}
		req := httptest.NewRequest(method, "https://notary/", strings.NewReader(body))
		req.URL = u
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("%s %q %q: status %d", method, path, body, rec.Code)
		}
	})
}
