package check

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// world is a small testbed: a CA, two sites, three notaries on honest paths
// (one at continental distance) and a MitM that can be put on the client's
// path.
type world struct {
	ca         *testbed.CA
	bank, shop *testbed.Site
	honest     *testbed.Resolver // the real network
	intercept  *testbed.Resolver // the client's path through the MitM
	mitm       *testbed.MitM
	notaries   []*testbed.Notary
	dir        string // .notary bundles
	bundles    []*Bundle
}

func newWorld(t testing.TB, far time.Duration) *world {
	t.Helper()
	w := &world{honest: testbed.NewResolver(), dir: t.TempDir()}
	var err error
	if w.ca, err = testbed.NewRootCA("Test Root", testbed.ECDSAP256); err != nil {
		t.Fatal(err)
	}
	site := func(name string) *testbed.Site {
		leaf, err := w.ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		w.honest.Set(name, s.Addr)
		return s
	}
	w.bank, w.shop = site("bank.test"), site("shop.test")
	forger, err := testbed.NewRootCA("Forger", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if w.mitm, err = testbed.StartMitM(forger, w.honest); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.mitm.Close() })
	w.intercept = w.honest.Clone()
	w.intercept.Set("bank.test", w.mitm.Addr)

	for i, name := range []string{"n1", "n2", "n3"} {
		o := testbed.NotaryOptions{Name: name, Path: w.honest.Clone()}
		if i == 2 {
			o.RTT = far
		}
		n, err := testbed.StartNotary(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if _, err := n.WriteBundle(w.dir); err != nil {
			t.Fatal(err)
		}
		w.notaries = append(w.notaries, n)
	}
	if w.bundles, err = LoadNotaries(w.dir); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) config(t testing.TB, path *testbed.Resolver) Config {
	return Config{
		Notaries:      w.bundles,
		Lookup:        path.Lookup,
		AllowPrivate:  true,
		Roots:         w.ca.Pool(),
		NotaryTimeout: 10 * time.Second,
		CachePath:     filepath.Join(t.TempDir(), "cache.db"),
	}
}

func newChecker(t testing.TB, cfg Config) *Checker {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func votes(v *Verdict) string {
	var s []string
	for _, a := range v.Notaries {
		s = append(s, a.Notary+"="+a.Vote.String())
	}
	return strings.Join(s, " ")
}

func target(host string) probe.Target { return probe.Target{Host: host, Port: 443} }

func TestCheckEndToEnd(t *testing.T) {
	w := newWorld(t, testbed.ContinentalRTT)
	ctx := context.Background()

	t.Run("honest path trusted, then from cache", func(t *testing.T) {
		cfg := w.config(t, w.honest)
		c := newChecker(t, cfg)
		v, err := c.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Trusted || v.FromCache || votes(v) != "n1=yes n2=yes n3=yes" {
			t.Fatalf("first check = %s from cache %v, votes %s; reasons %q", v.Result, v.FromCache, votes(v), v.Reasons)
		}
		if ca, ok := v.Source("ca"); !ok || ca.Status != Pass {
			t.Fatalf("ca assertion = %+v", ca)
		}
		if v.Timings.Probe <= 0 || v.Timings.Notaries <= 0 || v.Timings.SignatureChecks <= 0 || v.Timings.Total < v.Timings.Notaries {
			t.Fatalf("timings missing: %+v", v.Timings)
		}
		if v.SHA256 == "" || v.Decision == nil || v.Decision.Yes != 3 {
			t.Fatalf("verdict incomplete: %+v", v)
		}
		// The far notary was reached through its delay proxy.
		if got, want := v.Notaries[2].Host, w.notaries[2].Addr.String(); got != want || w.notaries[2].Addr == w.notaries[2].Direct {
			t.Fatalf("n3 answered from %s, want its delay proxy %s", got, want)
		}

		v2, err := c.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v2.Result != Trusted || !v2.FromCache || len(v2.Notaries) != 0 || v2.Decision != nil {
			t.Fatalf("second check = %s from cache %v with %d notary answers", v2.Result, v2.FromCache, len(v2.Notaries))
		}

		// A checker on the same cache whose notaries cannot be reached at
		// all still answers from the cache: the hit never touches them.
		var dials atomic.Int32
		cfg.NotaryDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("no network")
		}
		c2 := newChecker(t, cfg)
		v3, err := c2.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v3.Result != Trusted || !v3.FromCache || dials.Load() != 0 {
			t.Fatalf("cache hit = %s from cache %v after %d notary dials", v3.Result, v3.FromCache, dials.Load())
		}
		// Other sites are not in the cache: with no notaries, nobody votes.
		v4, err := c2.Check(ctx, target("shop.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v4.Result != Inconclusive || v4.FromCache || dials.Load() == 0 {
			t.Fatalf("uncached check without notaries = %s (%q), %d dials", v4.Result, v4.Reasons, dials.Load())
		}

		// An entry older than the maximum age goes back to the notaries.
		cfg.NotaryDial = nil
		cfg.CacheMaxAge = time.Hour
		cfg.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		c3 := newChecker(t, cfg)
		v5, err := c3.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v5.Result != Trusted || v5.FromCache || len(v5.Notaries) != 3 || !strings.Contains(strings.Join(v5.Reasons, "\n"), "old (max 1h0m0s)") {
			t.Fatalf("stale cache entry = %s from cache %v, %d answers; %q", v5.Result, v5.FromCache, len(v5.Notaries), v5.Reasons)
		}

		// An entry accepted under one policy does not answer for another.
		cfg.Now, cfg.CacheMaxAge = nil, 0
		cfg.Policy = Policy{Kind: "consensus"}
		c4 := newChecker(t, cfg)
		v6, err := c4.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v6.FromCache || len(v6.Notaries) != 3 {
			t.Fatalf("cache under another policy = from cache %v; %q", v6.FromCache, v6.Reasons)
		}
		if v7, _ := c4.Check(ctx, target("bank.test")); !v7.FromCache {
			t.Fatalf("second consensus check not from cache: %q", v7.Reasons)
		}
	})

	t.Run("MitM on the client's path is caught", func(t *testing.T) {
		c := newChecker(t, w.config(t, w.intercept))
		v, err := c.Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Untrusted || votes(v) != "n1=no n2=no n3=no" {
			t.Fatalf("intercepted check = %s, votes %s; %q", v.Result, votes(v), v.Reasons)
		}
		forged, _ := w.mitm.Forged("bank.test")
		if v.SHA1 != probe.ColonHex(sha1Of(forged.Cert.Raw)) {
			t.Fatal("the client did not see the forged certificate: the test proves nothing")
		}
		if ca, _ := v.Source("ca"); ca.Status != Fail {
			t.Fatalf("ca on a forged chain = %+v", ca)
		}
		// An untrusted verdict is never cached.
		v2, _ := c.Check(ctx, target("bank.test"))
		if v2.FromCache {
			t.Fatal("untrusted verdict was cached")
		}
		// The honest site on the same path is trusted.
		v3, err := c.Check(ctx, target("shop.test"))
		if err != nil || v3.Result != Trusted {
			t.Fatalf("uninterrupted site = %v, %v", v3, err)
		}
	})

	t.Run("changed certificate goes back to the notaries", func(t *testing.T) {
		c := newChecker(t, w.config(t, w.honest))
		if v, err := c.Check(ctx, target("shop.test")); err != nil || v.Result != Trusted {
			t.Fatalf("before rotation: %v %v", v, err)
		}
		if v, _ := c.Check(ctx, target("shop.test")); !v.FromCache {
			t.Fatal("second check not from cache")
		}
		old := w.shop.Leaf()
		renewed, err := w.ca.Issue(testbed.LeafOptions{DNSNames: []string{"shop.test"}})
		if err != nil {
			t.Fatal(err)
		}
		w.shop.SetLeaf(renewed)
		defer w.shop.SetLeaf(old)
		v, err := c.Check(ctx, target("shop.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.FromCache || len(v.Notaries) != 3 || v.Result != Trusted {
			t.Fatalf("after rotation = %s from cache %v, votes %s; %q", v.Result, v.FromCache, votes(v), v.Reasons)
		}
		if v.SHA1 != probe.ColonHex(sha1Of(renewed.Cert.Raw)) {
			t.Fatal("the client did not see the renewed certificate")
		}
	})

	t.Run("unreachable notary stands aside", func(t *testing.T) {
		dead := deadNotary(t, w)
		cfg := w.config(t, w.honest)
		cfg.CachePath = ""
		cfg.Notaries = append(append([]*Bundle(nil), w.bundles...), dead)
		v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Trusted || votes(v) != "n1=yes n2=yes n3=yes dead=stand-aside" || !strings.Contains(v.Notaries[3].Reason, "unreachable") {
			t.Fatalf("with a dead notary = %s, votes %s; %q", v.Result, votes(v), v.Notaries[3].Reason)
		}
		cfg.Policy = Policy{Kind: "consensus", UnreachableIsFailure: true}
		v, err = newChecker(t, cfg).Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Untrusted {
			t.Fatalf("consensus with unreachable-is-failure = %s; %q", v.Result, v.Reasons)
		}
	})

	t.Run("one deadline for all notaries", func(t *testing.T) {
		hole := blackHole(t, w)
		cfg := w.config(t, w.honest)
		cfg.CachePath = ""
		cfg.Notaries = append(append([]*Bundle(nil), w.bundles[:2]...), hole)
		cfg.NotaryTimeout = 1500 * time.Millisecond
		v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Trusted || !strings.Contains(v.Notaries[2].Reason, "timed out") {
			t.Fatalf("with a silent notary = %s, votes %s; %q", v.Result, votes(v), v.Notaries[2].Reason)
		}
	})

	t.Run("bounced through another notary", func(t *testing.T) {
		relay := startBouncer(t, w.notaries[1].Addr.String(), w.notaries[2].Addr.String())
		via := *w.bundles[0]
		via.Hosts = append([]Host(nil), via.Hosts...)
		via.Hosts[0].HTTPPort = relay
		cfg := w.config(t, w.honest)
		cfg.CachePath = ""
		cfg.BounceVia = &via
		v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Trusted || v.Notaries[0].Bounced || !v.Notaries[1].Bounced || !v.Notaries[2].Bounced {
			t.Fatalf("bounced check = %s, votes %s, bounced %v %v %v; %q", v.Result, votes(v),
				v.Notaries[0].Bounced, v.Notaries[1].Bounced, v.Notaries[2].Bounced, v.Reasons)
		}
	})

	t.Run("Converge", func(t *testing.T) {
		cfg := w.config(t, w.honest)
		c := newChecker(t, cfg)
		real := probe.ColonHex(sha1Of(w.bank.Leaf().Cert.Raw))
		ok, v, err := c.Converge(ctx, "bank.test", 443, real)
		if err != nil || !ok || v.Result != Trusted || votes(v) != "n1=yes n2=yes n3=yes" {
			t.Fatalf("Converge(real) = %v %v %v", ok, v, err)
		}
		if ca, _ := v.Source("ca"); ca.Status != Unknown {
			t.Fatalf("ca without a chain = %+v", ca)
		}
		// Plain lowercase hex works too, and now comes from the cache.
		ok, v, err = c.Converge(ctx, "bank.test", 443, strings.ToLower(strings.ReplaceAll(real, ":", "")))
		if err != nil || !ok || !v.FromCache {
			t.Fatalf("Converge(real, again) = %v %+v %v", ok, v, err)
		}
		forged, _ := w.mitm.Forged("bank.test")
		ok, v, err = c.Converge(ctx, "bank.test", 443, probe.ColonHex(sha1Of(forged.Cert.Raw)))
		if err != nil || ok || v.Result != Untrusted || votes(v) != "n1=no n2=no n3=no" {
			t.Fatalf("Converge(forged) = %v %v %v", ok, v, err)
		}
		for _, bad := range []string{"", "AA:BB", "zz" + strings.Repeat("0", 38), strings.Repeat("A", 64)} {
			if _, _, err := c.Converge(ctx, "bank.test", 443, bad); err == nil {
				t.Errorf("Converge(%q) accepted a malformed fingerprint", bad)
			}
		}
		if _, _, err := c.Converge(ctx, "bank.test", 0, real); err == nil {
			t.Error("Converge accepted port 0")
		}
		// Requiring the CA makes Converge inconclusive: it has no chain.
		cfg.Require = []string{"ca"}
		cfg.CachePath = ""
		ok, v, err = newChecker(t, cfg).Converge(ctx, "bank.test", 443, real)
		if err != nil || ok || v.Result != Inconclusive {
			t.Fatalf("Converge with ca required = %v %v %v", ok, v, err)
		}
	})

	t.Run("required sources", func(t *testing.T) {
		cfg := w.config(t, w.honest)
		cfg.CachePath = ""
		cfg.Roots = x509.NewCertPool() // no roots: the site's CA is unknown
		cfg.Require = []string{"ca"}
		v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Result != Untrusted || !strings.Contains(strings.Join(v.Reasons, "\n"), "ca (required) failed") {
			t.Fatalf("required ca failing = %s; %q", v.Result, v.Reasons)
		}
		// Required by default, named or not.
		cfg.Require = nil
		if v, _ := newChecker(t, cfg).Check(ctx, target("bank.test")); v.Result != Untrusted || !strings.HasPrefix(v.Headline, "CA validation failed") {
			t.Fatalf("ca failing, required by default = %s %q; %q", v.Result, v.Headline, v.Reasons)
		}
		cfg.TrustAgility = true
		if v, _ := newChecker(t, cfg).Check(ctx, target("bank.test")); v.Result != Trusted {
			t.Fatalf("ca failing under trust agility = %s; %q", v.Result, v.Reasons)
		}
		cfg.TrustAgility = false
		cfg.Roots = w.ca.Pool()
		cfg.Sources = []Source{fixedSource{"ct", Unknown}}
		cfg.Require = []string{"ca", "ct"}
		v, _ = newChecker(t, cfg).Check(ctx, target("bank.test"))
		if v.Result != Inconclusive || len(v.Sources) != 2 || !v.Sources[1].Required {
			t.Fatalf("required ct unknown = %s; %+v", v.Result, v.Sources)
		}
		cfg.Sources = []Source{fixedSource{"ct", Fail}}
		v, _ = newChecker(t, cfg).Check(ctx, target("bank.test"))
		if v.Result != Untrusted {
			t.Fatalf("required ct failing = %s", v.Result)
		}
	})

	t.Run("operational errors", func(t *testing.T) {
		c := newChecker(t, w.config(t, w.honest))
		if _, err := c.Check(ctx, target("nowhere.test")); err == nil || !errors.Is(err, probe.ErrResolve) {
			t.Fatalf("Check(unresolvable) error = %v", err)
		}
		cfg := w.config(t, w.honest)
		cfg.AllowPrivate = false
		if _, err := newChecker(t, cfg).Check(ctx, target("bank.test")); !errors.Is(err, probe.ErrForbiddenAddress) {
			t.Fatalf("Check(loopback without allow-private) error = %v", err)
		}
	})
}

// TestNotaryAnswerIndependentlyVerified asks a real notary the way
// Convergence clients do and verifies its answer with code that shares
// nothing with package consensus: cut before `, "signature":`, append "}",
// SHA1withRSA against the bundle certificate.
func TestNotaryAnswerIndependentlyVerified(t *testing.T) {
	w := newWorld(t, 0)
	n := w.notaries[0]
	block, _ := pem.Decode([]byte(w.bundles[0].Hosts[0].Certificate))
	pin, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if !cs.PeerCertificates[0].Equal(pin) {
				return errors.New("pin mismatch")
			}
			return nil
		}}}}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		fp   []byte
		code int
	}{{sha1Of(w.bank.Leaf().Cert.Raw), 200}, {make([]byte, 20), 409}} {
		resp, err := hc.PostForm("https://"+n.Addr.String()+"/target/bank.test+443", url.Values{"fingerprint": {probe.ColonHex(tc.fp)}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
		}
		s := string(body)
		i := strings.Index(s, `, "signature":`)
		if i < 0 {
			t.Fatalf("no signature in %s", s)
		}
		signed := s[:i] + "}"
		sigText := strings.TrimSpace(s[i+len(`, "signature":`):])
		sigText = strings.Trim(strings.TrimSuffix(sigText, "}"), `"`)
		sig, err := base64.StdEncoding.DecodeString(sigText)
		if err != nil {
			t.Fatal(err)
		}
		h := sha1.Sum([]byte(signed))
		if err := rsa.VerifyPKCS1v15(pin.PublicKey.(*rsa.PublicKey), crypto.SHA1, h[:], sig); err != nil {
			t.Fatalf("independent verification failed: %v", err)
		}
		if !strings.Contains(signed, probe.ColonHex(sha1Of(w.bank.Leaf().Cert.Raw))) {
			t.Fatalf("signed history does not list the site's certificate: %s", signed)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "no notaries") {
		t.Fatalf("New(empty) error = %v", err)
	}
	b, err := ReadBundle(filepath.Join("..", "internal", "consensus", "testdata", "notary-b.notary"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown required source", Config{Notaries: []*Bundle{b}, Require: []string{"ct"}}, `required source "ct" is not configured (have ca)`},
		{"duplicate source", Config{Notaries: []*Bundle{b}, Sources: []Source{fixedSource{"ca", Pass}}}, `two sources are named "ca"`},
		{"bad quorum", Config{Notaries: []*Bundle{b}, Policy: Policy{Kind: "quorum", Quorum: 2}}, "not a number in (0, 1]"},
		{"unknown policy", Config{Notaries: []*Bundle{b}, Policy: Policy{Kind: "plurality"}}, "unknown policy"},
		{"bundle without hosts", Config{Notaries: []*Bundle{{Name: "x"}}}, `notary 0 (x): bundle "x" lists no hosts`},
		{"bundle with a bad pin", Config{Notaries: []*Bundle{{Name: "y", Hosts: []Host{{Host: "n.test", SSLPort: 443, Certificate: "junk"}}}}}, "certificate is not PEM"},
		{"cache path unusable", Config{Notaries: []*Bundle{b}, CachePath: "/dev/null/cache.db"}, "cache"},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestParseSHA1(t *testing.T) {
	want := [20]byte{0xAB, 0xCD}
	for _, s := range []string{
		"AB:CD:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",
		"ab:cd:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",
		"abcd000000000000000000000000000000000000",
		" ABCD000000000000000000000000000000000000 ",
	} {
		if got, err := ParseSHA1(s); err != nil || got != want {
			t.Errorf("ParseSHA1(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "AB", "AB-CD-00", strings.Repeat("0", 39), strings.Repeat("g", 40), strings.Repeat("00:", 32)[:95]} {
		if _, err := ParseSHA1(s); err == nil {
			t.Errorf("ParseSHA1(%q) accepted", s)
		}
	}
}

// fixedSource is a Source with a fixed finding, standing in for a future
// PKI enhancement to exercise the Require wiring.
type fixedSource struct {
	name   string
	status Status
}

func (s fixedSource) Name() string { return s.name }
func (s fixedSource) Assess(context.Context, *probe.Observation) Assertion {
	return Assertion{Status: s.status, Detail: "fixed " + string(s.status)}
}

func sha1Of(der []byte) []byte { s := sha1.Sum(der); return s[:] }

// deadNotary returns a bundle for a notary whose port refuses connections.
func deadNotary(t *testing.T, w *world) *Bundle {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := *w.bundles[0]
	b.Name = "dead"
	b.Hosts = append([]Host(nil), b.Hosts...)
	b.Hosts[0].SSLPort = port
	return &b
}

// blackHole returns a bundle for a notary that accepts connections and
// never says anything.
func blackHole(t *testing.T, w *world) *Bundle {
	sil, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sil.Close() })
	b := *w.bundles[0]
	b.Name = "silent"
	b.Hosts = append([]Host(nil), b.Hosts...)
	b.Hosts[0].SSLPort = int(sil.Addr.Port())
	return &b
}

// startBouncer serves the real notary bouncer on loopback, allowing CONNECT
// to the given notary addresses, and returns its port.
func startBouncer(t *testing.T, allowed ...string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		notary.ServeBouncer(ctx, ln, notary.NewBouncer(allowed, 0))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCacheKeyedByNotaries: a verdict that lying notaries gave stays in the
// cache only as long as they are configured. Two notaries whose path runs
// through the MitM vouch for its forged certificate and outvote an honest
// one; once they are removed, the same certificate goes back to the
// notaries that remain instead of answering from the cache.
func TestCacheKeyedByNotaries(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	liarDir := t.TempDir()
	for _, name := range []string{"liar1", "liar2"} {
		n, err := testbed.StartNotary(testbed.NotaryOptions{Name: name, Path: w.intercept.Clone()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if _, err := n.WriteBundle(liarDir); err != nil {
			t.Fatal(err)
		}
	}
	liars, err := LoadNotaries(liarDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := w.config(t, w.intercept)
	// The forger's root is not trusted: without trust agility CA
	// validation alone would refuse the forged certificate, and the
	// notaries' vote (what this test is about) would not matter.
	cfg.TrustAgility = true
	cfg.Notaries = append(liars, w.bundles[0])
	v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != Trusted || v.FromCache || votes(v) != "liar1=yes liar2=yes n1=no" {
		t.Fatalf("with the liars = %s from cache %v, votes %s; %q", v.Result, v.FromCache, votes(v), v.Reasons)
	}
	// Listed in another order, the same notaries still answer from the
	// cache.
	cfg.Notaries = []*Bundle{w.bundles[0], liars[1], liars[0]}
	if v, _ := newChecker(t, cfg).Check(ctx, target("bank.test")); !v.FromCache || v.Result != Trusted {
		t.Fatalf("same notaries reordered = %s from cache %v; %q", v.Result, v.FromCache, v.Reasons)
	}

	cfg.Notaries = w.bundles
	v, err = newChecker(t, cfg).Check(ctx, target("bank.test"))
	if err != nil {
		t.Fatal(err)
	}
	if v.FromCache || v.Result != Untrusted || votes(v) != "n1=no n2=no n3=no" {
		t.Fatalf("after removing the liars = %s from cache %v, votes %s; %q", v.Result, v.FromCache, votes(v), v.Reasons)
	}
}
