package consensus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/probe"
)

// testNotary is a small real HTTPS server speaking the Convergence wire
// API from a fixed history, signing as the specification says. It lets the
// client be tested against each way a notary can answer.
type testNotary struct {
	t       *testing.T
	key     *rsa.PrivateKey // serves TLS with a certificate for this key
	signer  *rsa.PrivateKey // signs answers (normally key)
	cert    *x509.Certificate
	ln      net.Listener
	srv     *http.Server
	mu      sync.Mutex
	history map[string][]Entry // "host+port" -> entries
	current map[string][20]byte
	mode    string // "", "503", "400", "500", "tamper", "nofp", "huge", "slow", "nosig", "anyhistory"
	hits    atomic.Int32
}

func selfSigned(t testing.TB, key *rsa.PrivateKey, cn string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startTestNotary(t *testing.T, key *rsa.PrivateKey) *testNotary {
	t.Helper()
	n := &testNotary{t: t, key: key, signer: key, cert: selfSigned(t, key, "notary.test"),
		history: map[string][]Entry{}, current: map[string][20]byte{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.ln = ln
	n.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{n.cert.Raw}, PrivateKey: key}}}}
	go n.srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { n.srv.Close() })
	return n
}

func (n *testNotary) port() int { return n.ln.Addr().(*net.TCPAddr).Port }

// sees records that the notary observes fp at target, seen for observed.
func (n *testNotary) sees(target string, fp [20]byte, observed time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now().Truncate(time.Second)
	n.history[target] = append(n.history[target], Entry{Fingerprint: fp, Start: now.Add(-observed), Finish: now})
	n.current[target] = fp
}

func (n *testNotary) bundle(t *testing.T, name string) *Bundle {
	t.Helper()
	h, err := NewHost("127.0.0.1", n.port(), 0, n.cert)
	if err != nil {
		t.Fatal(err)
	}
	return &Bundle{Version: 1, Name: name, Hosts: []Host{h}}
}

func (n *testNotary) serve(w http.ResponseWriter, r *http.Request) {
	n.hits.Add(1)
	target, ok := strings.CutPrefix(r.URL.Path, "/target/")
	if r.Method != http.MethodPost || !ok || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.Error(w, "bad request shape", http.StatusBadRequest)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fpb, err := probe.ParseColonHex(r.PostForm.Get("fingerprint"), 20)
	if err != nil || r.PostForm.Get("fingerprint") != strings.ToUpper(r.PostForm.Get("fingerprint")) {
		http.Error(w, "malformed fingerprint", http.StatusBadRequest)
		return
	}
	var fp [20]byte
	copy(fp[:], fpb)
	n.mu.Lock()
	mode, hist, cur, known := n.mode, append([]Entry(nil), n.history[target]...), n.current[target], len(n.history[target]) > 0
	n.mu.Unlock()
	switch mode {
	case "503", "400", "500":
		code := map[string]int{"503": 503, "400": 400, "500": 500}[mode]
		http.Error(w, "forced "+mode, code)
		return
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		// Never answer: returning normally would send an empty 200.
		panic(http.ErrAbortHandler)
	}
	if !known {
		http.Error(w, "cannot reach target", http.StatusServiceUnavailable)
		return
	}
	if mode == "nofp" {
		hist = nil
	}
	var list bytes.Buffer
	list.WriteString("[")
	for i, e := range hist {
		if i > 0 {
			list.WriteString(",")
		}
		fmt.Fprintf(&list, `{"timestamp":{"start":"%d","finish":"%d"},"fingerprint":"%s"}`, e.Start.Unix(), e.Finish.Unix(), probe.ColonHex(e.Fingerprint[:]))
	}
	list.WriteString("]")
	body := independentSign(n.t, n.signer, list.String())
	switch mode {
	case "tamper":
		body = bytes.Replace(body, []byte(`"start":"`), []byte(`"start":"1`), 1)
	case "huge":
		body = append(bytes.Repeat([]byte(" "), maxAnswerBody), body...)
	case "nosig":
		body = []byte(`{"fingerprintList":` + list.String() + `}`)
	}
	w.Header().Set("Content-Type", "application/json")
	if mode == "anyhistory" {
		// A notary that says 200 for any certificate it ever saw.
		for _, e := range hist {
			if e.Fingerprint == fp {
				cur = fp
			}
		}
	}
	if cur == fp {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusConflict)
	}
	w.Write(body)
}

func TestQuery(t *testing.T) {
	k, other := rsaKeys(t)
	n := startTestNotary(t, k)
	good := [20]byte{0xAA, 1}
	bad := [20]byte{0xBB, 2}
	n.sees("site.test+443", good, 48*time.Hour)
	c := &Client{}
	defer c.CloseIdleConnections()

	tests := []struct {
		name       string
		mode       string
		signer     *rsa.PrivateKey
		host       string
		fp         [20]byte
		want       Vote
		wantStatus int
		wantReason string
	}{
		{"yes", "", k, "site.test", good, Yes, 200, "same certificate"},
		{"no", "", k, "site.test", bad, No, 409, "different certificate"},
		{"notary cannot reach target", "", k, "unknown.test", good, StandAside, 503, "503"},
		{"overloaded", "503", k, "site.test", good, StandAside, 503, "503"},
		{"bad request", "400", k, "site.test", good, StandAside, 400, "rejected the request (400)"},
		{"server error", "500", k, "site.test", good, StandAside, 500, "unexpected status 500"},
		{"tampered answer", "tamper", k, "site.test", good, StandAside, 200, "does not verify"},
		{"signed by another key", "", other, "site.test", good, StandAside, 200, "does not verify"},
		{"missing signature", "nosig", k, "site.test", good, StandAside, 200, "no signature"},
		{"200 without the fingerprint", "nofp", k, "site.test", good, StandAside, 200, "does not list the fingerprint"},
		{"oversized answer", "huge", k, "site.test", good, StandAside, 200, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n.mu.Lock()
			n.mode, n.signer = tt.mode, tt.signer
			n.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := c.Query(ctx, n.bundle(t, "n1"), tt.host, 443, tt.fp)
			if a.Vote != tt.want || a.Status != tt.wantStatus || !strings.Contains(a.Reason, tt.wantReason) {
				t.Fatalf("Query = %s %d %q; want %s %d containing %q", a.Vote, a.Status, a.Reason, tt.want, tt.wantStatus, tt.wantReason)
			}
			if a.Notary != "n1" || a.RoundTrip <= 0 {
				t.Fatalf("answer metadata: %+v", a)
			}
			if a.Vote == Yes && (a.Observed < 47*time.Hour || len(a.History) != 1) {
				t.Fatalf("yes without the observed span: %+v", a)
			}
			if (a.Vote != StandAside || tt.mode == "tamper") && a.SigCheck <= 0 {
				t.Fatalf("signature check not timed: %+v", a)
			}
		})
	}
}

// TestQueryCurrentObservation: a Convergence 200 is a yes only when the
// client's fingerprint is among the notary's current observations (the
// entries with the newest finish), not when the signed history lists it as
// an old, superseded entry.
func TestQueryCurrentObservation(t *testing.T) {
	k, _ := rsaKeys(t)
	n := startTestNotary(t, k)
	n.mu.Lock()
	n.mode = "anyhistory"
	old, cur, twin := [20]byte{0x01}, [20]byte{0x02}, [20]byte{0x03}
	now := time.Now().Truncate(time.Second)
	day := 24 * time.Hour
	n.history["site.test+443"] = []Entry{
		{Fingerprint: old, Start: now.Add(-400 * day), Finish: now.Add(-300 * day)},
		{Fingerprint: cur, Start: now.Add(-300 * day), Finish: now},
	}
	n.current["site.test+443"] = cur
	// Sent out of order; twin and cur were both seen in the last second
	// (a balancer serving two certificates), and cur was also seen long ago.
	n.history["lb.test+443"] = []Entry{
		{Fingerprint: twin, Start: now.Add(-2 * day), Finish: now},
		{Fingerprint: cur, Start: now.Add(-90 * day), Finish: now.Add(-80 * day)},
		{Fingerprint: old, Start: now.Add(-30 * day), Finish: now.Add(-10 * day)},
		{Fingerprint: cur, Start: now.Add(-5 * day), Finish: now},
	}
	n.current["lb.test+443"] = cur
	n.mu.Unlock()
	c := &Client{}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		name     string
		host     string
		fp       [20]byte
		want     Vote
		observed time.Duration
		reason   string
	}{
		{"superseded fingerprint", "site.test", old, No, 0, "different current certificate"},
		{"current fingerprint", "site.test", cur, Yes, 300 * day, "same certificate"},
		{"current, also seen long ago", "lb.test", cur, Yes, 5 * day, "same certificate"},
		{"tied for current", "lb.test", twin, Yes, 2 * day, "same certificate"},
		{"superseded among several", "lb.test", old, No, 0, "different current certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := c.Query(ctx, n.bundle(t, "n1"), tc.host, 443, tc.fp)
			if a.Status != 200 || a.Vote != tc.want || a.Observed != tc.observed || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("Query = %s (status %d, observed %s) %q; want %s observed %s containing %q", a.Vote, a.Status, a.Observed, a.Reason, tc.want, tc.observed, tc.reason)
			}
		})
	}
}

func TestQueryPinAndReplicas(t *testing.T) {
	k, other := rsaKeys(t)
	n := startTestNotary(t, k)
	fp := [20]byte{7}
	n.sees("site.test+8443", fp, time.Hour)
	c := &Client{}
	defer c.CloseIdleConnections()
	ctx := context.Background()

	t.Run("pin mismatch", func(t *testing.T) {
		wrong, err := NewHost("127.0.0.1", n.port(), 0, selfSigned(t, other, "impostor.test"))
		if err != nil {
			t.Fatal(err)
		}
		a := c.Query(ctx, &Bundle{Version: 1, Name: "pinned", Hosts: []Host{wrong}}, "site.test", 8443, fp)
		if a.Vote != StandAside || !strings.Contains(a.Reason, "pin mismatch") || n.hits.Load() != 0 {
			t.Fatalf("Query through a wrong pin = %s %q (notary hits %d)", a.Vote, a.Reason, n.hits.Load())
		}
	})
	t.Run("first replica down", func(t *testing.T) {
		dead, _ := net.Listen("tcp", "127.0.0.1:0")
		deadPort := dead.Addr().(*net.TCPAddr).Port
		dead.Close()
		h1, _ := NewHost("127.0.0.1", deadPort, 0, n.cert)
		h2, _ := NewHost("127.0.0.1", n.port(), 0, n.cert)
		a := c.Query(ctx, &Bundle{Version: 1, Name: "replicated", Hosts: []Host{h1, h2}}, "site.test", 8443, fp)
		if a.Vote != Yes || a.Host != h2.SSLAddr() {
			t.Fatalf("Query = %s from %s (%q), want yes from %s", a.Vote, a.Host, a.Reason, h2.SSLAddr())
		}
	})
	t.Run("all replicas down", func(t *testing.T) {
		dead, _ := net.Listen("tcp", "127.0.0.1:0")
		deadPort := dead.Addr().(*net.TCPAddr).Port
		dead.Close()
		h1, _ := NewHost("127.0.0.1", deadPort, 0, n.cert)
		a := c.Query(ctx, &Bundle{Version: 1, Name: "down", Hosts: []Host{h1}}, "site.test", 8443, fp)
		if a.Vote != StandAside || !strings.Contains(a.Reason, "unreachable") {
			t.Fatalf("Query = %s %q", a.Vote, a.Reason)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		n.mu.Lock()
		n.mode = "slow"
		n.mu.Unlock()
		defer func() { n.mu.Lock(); n.mode = ""; n.mu.Unlock() }()
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		a := c.Query(ctx, n.bundle(t, "slow"), "site.test", 8443, fp)
		if a.Vote != StandAside || !strings.Contains(a.Reason, "timed out") {
			t.Fatalf("Query = %s %q, want a timed-out stand-aside", a.Vote, a.Reason)
		}
	})
}

// connectRelay is a minimal Convergence bouncer: CONNECT to allowed
// addresses only. It records the targets it relayed.
type connectRelay struct {
	ln      net.Listener
	allowed string
	mu      sync.Mutex
	relayed []string
}

func startRelay(t *testing.T, allowed string) *connectRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &connectRelay{ln: ln, allowed: allowed}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.handle(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *connectRelay) handle(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect || req.Host != r.allowed {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	r.mu.Lock()
	r.relayed = append(r.relayed, req.Host)
	r.mu.Unlock()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go io.Copy(up, c)
	io.Copy(c, up)
}

func TestQueryBounced(t *testing.T) {
	k, other := rsaKeys(t)
	b := startTestNotary(t, k) // the notary queried
	fp := [20]byte{9}
	b.sees("site.test+443", fp, time.Hour)
	bBundle := b.bundle(t, "B")
	relay := startRelay(t, bBundle.Hosts[0].SSLAddr())
	aHost, err := NewHost("127.0.0.1", 1, relay.ln.Addr().(*net.TCPAddr).Port, selfSigned(t, other, "a.test"))
	if err != nil {
		t.Fatal(err)
	}
	aBundle := &Bundle{Version: 1, Name: "A", Hosts: []Host{aHost}}

	c := &Client{BounceVia: aBundle}
	defer c.CloseIdleConnections()
	a := c.Query(context.Background(), bBundle, "site.test", 443, fp)
	if a.Vote != Yes || !a.Bounced {
		t.Fatalf("bounced Query = %s bounced=%v %q", a.Vote, a.Bounced, a.Reason)
	}
	relay.mu.Lock()
	got := append([]string(nil), relay.relayed...)
	relay.mu.Unlock()
	if len(got) != 1 || got[0] != bBundle.Hosts[0].SSLAddr() {
		t.Fatalf("relay saw %v, want one CONNECT to %s", got, bBundle.Hosts[0].SSLAddr())
	}

	// A relay that refuses the CONNECT makes the notary stand aside.
	refusing := startRelay(t, "127.0.0.1:1")
	aHost.HTTPPort = refusing.ln.Addr().(*net.TCPAddr).Port
	c2 := &Client{BounceVia: &Bundle{Version: 1, Name: "A", Hosts: []Host{aHost}}}
	defer c2.CloseIdleConnections()
	a = c2.Query(context.Background(), bBundle, "site.test", 443, fp)
	if a.Vote != StandAside || !strings.Contains(a.Reason, "refused CONNECT") {
		t.Fatalf("Query through a refusing relay = %s %q", a.Vote, a.Reason)
	}

	// The bounce notary itself is queried directly.
	if c.bounceHost(aBundle) != nil {
		t.Fatal("the bounce notary would bounce through itself")
	}
}

// TestQueryConvergenceAge: a Convergence answer is aged as a v1 answer is,
// by the newest observation in its signed history (the API signs no time
// of its own). One whose newest finish is older than AnswerMaxAge, or
// dated more than MaxClockSkew ahead, stands aside as stale (or from the
// future), whatever its status; one within the age votes as before.
func TestQueryConvergenceAge(t *testing.T) {
	k, _ := rsaKeys(t)
	n := startTestNotary(t, k)
	fp, other := [20]byte{0x70}, [20]byte{0x71}
	now := time.Now().Truncate(time.Second)
	day := 24 * time.Hour
	n.mu.Lock()
	for host, finish := range map[string]time.Time{
		"old.test+443":    now.Add(-700 * day),
		"edge.test+443":   now.Add(-23 * time.Hour),
		"future.test+443": now.Add(2 * time.Hour),
	} {
		n.history[host] = []Entry{{Fingerprint: fp, Start: finish.Add(-300 * day), Finish: finish}}
		n.current[host] = fp
	}
	n.mu.Unlock()
	c := &Client{}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		name   string
		host   string
		fp     [20]byte
		status int
		want   Vote
		reason string
	}{
		{"700 days old, the client's certificate", "old.test", fp, 200, StandAside, "stale answer: the notary's newest observation"},
		{"700 days old, another certificate", "old.test", other, 409, StandAside, "stale answer"},
		{"within the age", "edge.test", fp, 200, Yes, "same certificate"},
		{"within the age, another certificate", "edge.test", other, 409, No, "different certificate"},
		{"dated in the future", "future.test", fp, 200, StandAside, "answer from the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := c.Query(ctx, n.bundle(t, "n1"), tc.host, 443, tc.fp)
			if a.Status != tc.status || a.Vote != tc.want || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("Query = %s (status %d) %q; want %s (status %d) containing %q", a.Vote, a.Status, a.Reason, tc.want, tc.status, tc.reason)
			}
		})
	}
	t.Run("the client's max age decides", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		long := &Client{AnswerMaxAge: 800 * day}
		defer long.CloseIdleConnections()
		if a := long.Query(ctx, n.bundle(t, "n1"), "old.test", 443, fp); a.Vote != Yes {
			t.Fatalf("with an 800-day max age: %s %q, want yes", a.Vote, a.Reason)
		}
		short := &Client{AnswerMaxAge: time.Hour}
		defer short.CloseIdleConnections()
		if a := short.Query(ctx, n.bundle(t, "n1"), "edge.test", 443, fp); a.Vote != StandAside || !strings.Contains(a.Reason, "stale") {
			t.Fatalf("with a one-hour max age: %s %q, want a stale stand-aside", a.Vote, a.Reason)
		}
	})
}

// TestQueryFreshNotNewest: a notary vouches for every certificate it saw at
// a target within its freshness window (a site may serve several at once),
// so a 200 whose signed history lists the client's fingerprint seen within
// the client's AnswerMaxAge counts as a yes even though another certificate
// was seen more recently, with the span of the client's entry; one last
// seen longer ago is a no.
func TestQueryFreshNotNewest(t *testing.T) {
	k, _ := rsaKeys(t)
	n := startTestNotary(t, k)
	edgeA, edgeB, gone := [20]byte{0x0A}, [20]byte{0x0B}, [20]byte{0x0C}
	now := time.Now().Truncate(time.Second)
	day := 24 * time.Hour
	n.mu.Lock()
	n.mode = "anyhistory"
	n.history["cdn.test+443"] = []Entry{
		{Fingerprint: gone, Start: now.Add(-90 * day), Finish: now.Add(-30 * day)},
		{Fingerprint: edgeA, Start: now.Add(-10 * day), Finish: now.Add(-2 * time.Hour)},
		{Fingerprint: edgeB, Start: now.Add(-3 * day), Finish: now},
	}
	n.current["cdn.test+443"] = edgeB
	n.mu.Unlock()
	c := &Client{AnswerMaxAge: 6 * time.Hour}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		name     string
		fp       [20]byte
		want     Vote
		observed time.Duration
		reason   string
	}{
		{"newest", edgeB, Yes, 3 * day, "same certificate"},
		{"not the newest, seen within the max age", edgeA, Yes, 10*day - 2*time.Hour, "same certificate"},
		{"not the newest, seen before the max age", gone, No, 0, "different current certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := c.Query(ctx, n.bundle(t, "n1"), "cdn.test", 443, tc.fp)
			if a.Status != 200 || a.Vote != tc.want || a.Observed != tc.observed || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("Query = %s (status %d, observed %s) %q; want %s observed %s containing %q", a.Vote, a.Status, a.Observed, a.Reason, tc.want, tc.observed, tc.reason)
			}
		})
	}
}
