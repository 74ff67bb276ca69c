package notary_test

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// siteWorld is a world whose site is shaped by o (several certificates, old
// protocols) instead of StartSite's one modern certificate.
func siteWorld(t *testing.T, cfg notary.Config, o testbed.SiteOptions) *world {
	t.Helper()
	site, err := testbed.StartSiteWith("site.test", o)
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
	return &world{site: site, path: path, notary: n, client: pinnedClient(n.Identity.Cert)}
}

func issue(t *testing.T, ca *testbed.CA, alg testbed.KeyAlg) *testbed.Leaf {
	t.Helper()
	l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}, Alg: alg})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newCA(t *testing.T, name string) *testbed.CA {
	t.Helper()
	ca, err := testbed.NewRootCA(name, testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestNotaryObservesOldServers: a site that speaks only RSA key exchange,
// or only TLS 1.0 or 1.1, is observed (200), not unreachable (503).
func TestNotaryObservesOldServers(t *testing.T) {
	ca := newCA(t, "Root")
	for _, tc := range []struct {
		name     string
		min, max uint16
		suites   []uint16
	}{
		{"tls1.2 rsa key exchange only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256}},
		{"tls1.0 only", tls.VersionTLS10, tls.VersionTLS10, nil},
		{"tls1.1 only", tls.VersionTLS11, tls.VersionTLS11, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := issue(t, ca, testbed.RSA2048)
			w := siteWorld(t, notary.Config{}, testbed.SiteOptions{Leaves: []*testbed.Leaf{leaf}, MinVersion: tc.min, MaxVersion: tc.max, CipherSuites: tc.suites})
			if code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(leaf.Cert.Raw)); code != http.StatusOK {
				t.Fatalf("Convergence: %d %s", code, body)
			}
			code, _, body := w.v1(t, fmt.Sprintf(`{"host":"site.test","port":443,"sha256":"%s"}`, sha256Hex(leaf.Cert.Raw)))
			if code != http.StatusOK || !*w.v1Answer(t, body).Match {
				t.Fatalf("v1: %d %s", code, body)
			}
		})
	}
}

// TestSeveralCertificatesAtOnce: a site that serves two certificates in
// turn, one per connection (CDN edges, a balancer, a rotation), is vouched
// for whichever one a client saw, over both APIs and by the consensus
// client, although the notary's first probe sees the other; a MitM's
// certificate is still refused, after a bounded round of reprobes.
func TestSeveralCertificatesAtOnce(t *testing.T) {
	ca := newCA(t, "Root")
	a, b := issue(t, ca, testbed.ECDSAP256), issue(t, ca, testbed.ECDSAP256)
	forged := issue(t, newCA(t, "Rogue"), testbed.ECDSAP256)
	const maxReprobes = 3
	// The site's first connection shows b: the client saw a, the notary
	// sees b first.
	w := siteWorld(t, notary.Config{MaxReprobes: maxReprobes, ReprobeInterval: time.Hour},
		testbed.SiteOptions{Leaves: []*testbed.Leaf{b, a}})

	code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(a.Cert.Raw))
	if code != http.StatusOK {
		t.Fatalf("Convergence, the certificate the notary's first probe did not see: %d %s; want 200", code, body)
	}
	fps := convergenceVerify(t, body, w.notary.Identity.Cert)
	if !slices.Contains(fps, sha1Colon(a.Cert.Raw)) || !slices.Contains(fps, sha1Colon(b.Cert.Raw)) {
		t.Fatalf("signed list %v lacks one of the two certificates", fps)
	}
	probes := probeCount(t, w)
	// Both are now vouched for from the history, without a probe.
	for _, l := range []*testbed.Leaf{a, b} {
		if code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(l.Cert.Raw)); code != http.StatusOK {
			t.Fatalf("Convergence, a certificate seen in the window: %d %s", code, body)
		}
		code, _, body := w.v1(t, fmt.Sprintf(`{"host":"site.test","port":443,"sha256":"%s"}`, sha256Hex(l.Cert.Raw)))
		if code != http.StatusOK {
			t.Fatalf("v1: %d %s", code, body)
		}
		pub := w.notary.Identity.V1.Public().(ed25519Pub)
		sum := sha256.Sum256(l.Cert.Raw)
		ans, err := consensus.VerifyV1(body, pub, consensus.V1Question{Host: "site.test", Port: 443, SHA256: &sum}, time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("the v1 answer fails the client's checks: %v", err)
		}
		set := ans.CurrentSet
		if !*ans.Match || ans.Current != sha256Hex(l.Cert.Raw) || !slices.Contains(set, sha256Hex(a.Cert.Raw)) || !slices.Contains(set, sha256Hex(b.Cert.Raw)) {
			t.Fatalf("v1 answer: match %v current %s current_set %v", *ans.Match, ans.Current, set)
		}
	}
	if got := probeCount(t, w); got != probes {
		t.Fatalf("%d probes for certificates in the window; want none", got-probes)
	}

	t.Run("consensus client", func(t *testing.T) {
		nb, err := w.notary.Bundle.MarshalIndent()
		if err != nil {
			t.Fatal(err)
		}
		bundle, err := consensus.ParseBundle(nb)
		if err != nil {
			t.Fatal(err)
		}
		for _, api := range []consensus.API{consensus.APIV1, consensus.APIConvergence} {
			c := &consensus.Client{API: api}
			for _, l := range []*testbed.Leaf{a, b} {
				s1, s256 := sha1.Sum(l.Cert.Raw), sha256.Sum256(l.Cert.Raw)
				ans := c.Ask(context.Background(), bundle, consensus.Request{Host: "site.test", Port: 443, SHA1: &s1, SHA256: &s256})
				if ans.Vote != consensus.Yes {
					t.Errorf("%s: the client's vote for one of the site's two certificates: %v (%s)", api, ans.Vote, ans.Reason)
				}
			}
		}
	})

	t.Run("consensus client, seen an hour apart", func(t *testing.T) {
		// The notary saw b an hour ago and a since: both are in its
		// window, though the signed Convergence list shows b superseded.
		w := siteWorld(t, notary.Config{}, testbed.SiteOptions{Leaves: []*testbed.Leaf{a}})
		k := store.Key{Host: "site.test", Port: 443}
		if err := w.notary.History.Observe(context.Background(), k, sha256.Sum256(b.Cert.Raw), sha1.Sum(b.Cert.Raw), time.Now().Add(-time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		nb, _ := w.notary.Bundle.MarshalIndent()
		bundle, err := consensus.ParseBundle(nb)
		if err != nil {
			t.Fatal(err)
		}
		for _, api := range []consensus.API{consensus.APIV1, consensus.APIConvergence} {
			c := &consensus.Client{API: api}
			for _, l := range []*testbed.Leaf{a, b} {
				s1, s256 := sha1.Sum(l.Cert.Raw), sha256.Sum256(l.Cert.Raw)
				ans := c.Ask(context.Background(), bundle, consensus.Request{Host: "site.test", Port: 443, SHA1: &s1, SHA256: &s256})
				if ans.Vote != consensus.Yes {
					t.Errorf("%s: the client's vote for one of the site's two certificates: %v (%s)", api, ans.Vote, ans.Reason)
				}
			}
		}
	})

	t.Run("MitM", func(t *testing.T) {
		// A notary whose target has not had its round yet.
		w := siteWorld(t, notary.Config{MaxReprobes: maxReprobes, ReprobeInterval: time.Hour},
			testbed.SiteOptions{Leaves: []*testbed.Leaf{b, a}})
		before := probeCount(t, w)
		code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(forged.Cert.Raw))
		if code != http.StatusConflict {
			t.Fatalf("the MitM's certificate: %d %s; want 409", code, body)
		}
		if n := probeCount(t, w) - before; n != 1+maxReprobes {
			t.Fatalf("%d probes for a mismatch; want 1 and %d reprobes", n, maxReprobes)
		}
		// Within the reprobe interval, the target gets no second round:
		// fingerprints nobody serves cost one probe each, as before.
		before = probeCount(t, w)
		code, _, body = w.v1(t, fmt.Sprintf(`{"host":"site.test","port":443,"sha256":"%s"}`, sha256Hex(forged.Cert.Raw)))
		if code != http.StatusOK || *w.v1Answer(t, body).Match {
			t.Fatalf("v1, the MitM's certificate: %d %s; want a mismatch", code, body)
		}
		if n := probeCount(t, w) - before; n != 1 {
			t.Fatalf("%d probes for a second mismatch within the reprobe interval; want 1", n)
		}
		if !strings.Contains(metricsText(t, w), "pkie_notary_reprobes_limited_total 1\n") {
			t.Error("the limited round is not counted in pkie_notary_reprobes_limited_total")
		}
	})
}

// TestReplacedCertificateLeavesTheWindow: after a site replaces a
// certificate (a compromise, say), the notary stops vouching for the old
// one once it was last seen longer than MaxAge ago, although it is still
// in the history.
func TestReplacedCertificateLeavesTheWindow(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ca := newCA(t, "Root")
	old, cur := issue(t, ca, testbed.ECDSAP256), issue(t, ca, testbed.ECDSAP256)
	w := siteWorld(t, notary.Config{MaxAge: time.Hour, Now: clock, ReprobeInterval: time.Nanosecond}, testbed.SiteOptions{Leaves: []*testbed.Leaf{old}})
	if code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(old.Cert.Raw)); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	w.site.SetLeaf(cur)
	advance(30 * time.Minute)
	if code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(cur.Cert.Raw)); code != http.StatusOK {
		t.Fatalf("the new certificate: %d %s", code, body)
	}
	// Within the window the old one is still vouched for: the notary
	// cannot tell a replaced certificate from one a second edge serves.
	if code, _ := w.post(t, "site.test+443", "fingerprint="+sha1Colon(old.Cert.Raw)); code != http.StatusOK {
		t.Fatalf("the old certificate within the window: %d", code)
	}
	advance(31 * time.Minute)
	code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(old.Cert.Raw))
	if code != http.StatusConflict {
		t.Fatalf("the old certificate past the window: %d %s; want 409", code, body)
	}
	if fps := convergenceVerify(t, body, w.notary.Identity.Cert); !slices.Contains(fps, sha1Colon(old.Cert.Raw)) {
		t.Fatalf("the history %v no longer lists the old certificate; the test needs it there", fps)
	}
	code, _, body = w.v1(t, fmt.Sprintf(`{"host":"site.test","port":443,"sha256":"%s"}`, sha256Hex(old.Cert.Raw)))
	a := w.v1Answer(t, body)
	if code != http.StatusOK || *a.Match || slices.Contains(a.CurrentSet, sha256Hex(old.Cert.Raw)) || a.Current != sha256Hex(cur.Cert.Raw) {
		t.Fatalf("v1 past the window: %d match %v current %s current_set %v", code, *a.Match, a.Current, a.CurrentSet)
	}
}

// TestReprobeRoundsAreLimitedPerTarget: fingerprints nobody serves, from
// one client or many, get a target one round of reprobes per interval.
func TestReprobeRoundsAreLimitedPerTarget(t *testing.T) {
	ca := newCA(t, "Root")
	leaf := issue(t, ca, testbed.ECDSAP256)
	w := siteWorld(t, notary.Config{MaxReprobes: 2, ReprobeInterval: time.Hour}, testbed.SiteOptions{Leaves: []*testbed.Leaf{leaf}})
	// Random fingerprints from one client, and from others: one round for
	// the target in all.
	const n = 6
	for i := range n {
		ww := w.from(fmt.Sprintf("127.0.0.%d", 10+i))
		fp := sha1.Sum([]byte{byte(i)})
		if code, body := ww.post(t, "site.test+443", "fingerprint="+strings.ToUpper(colon(fp[:]))); code != http.StatusConflict {
			t.Fatalf("%d %s", code, body)
		}
	}
	if got := probeCount(t, w); got != n+2 {
		t.Fatalf("%d probes for %d random fingerprints; want %d (one round of 2 reprobes per interval)", got, n, n+2)
	}
}

func colon(b []byte) string { return probe.ColonHex(b) }

// TestProbeFailuresAreLogged: the operator learns why a probe failed (a
// refused non-public address, with the address and the flag that allows
// it; a resolve error; a timeout), while the client is told only the kind.
func TestProbeFailuresAreLogged(t *testing.T) {
	silent, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	path := testbed.NewResolver()
	path.Set("private.test", silent.Addr)
	path.Set("slow.test", silent.Addr)
	for _, tc := range []struct {
		name, host   string
		allowPrivate bool
		code         int
		log          []string
	}{
		{"refused address", "private.test", false, http.StatusForbidden, []string{`reason="refused non-public address"`, "refused_addr=127.0.0.1", "--allow-private"}},
		{"resolve error", "nowhere.test", true, http.StatusServiceUnavailable, []string{`reason="resolve error"`, "no such host"}},
		{"timeout", "slow.test", true, http.StatusServiceUnavailable, []string{`reason="handshake timeout"`, "took="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := notary.NewIdentity("logs", []string{"127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			h, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "history.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			logs := new(syncBuffer)
			n, err := notary.New(notary.Config{Identity: id, History: h, Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Prober: probe.New(probe.Options{AllowPrivate: tc.allowPrivate, Lookup: path.Lookup, Timeout: 300 * time.Millisecond})})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go n.ServeTLS(ctx, ln)
			w := &world{notary: &testbed.Notary{Notary: n, Addr: ln.Addr().(*net.TCPAddr).AddrPort(), Identity: id}, client: pinnedClient(id.Cert)}
			code, body := w.post(t, tc.host+"+443", "fingerprint="+sha1Colon([]byte("x")))
			if code != tc.code {
				t.Fatalf("status %d %s; want %d", code, body, tc.code)
			}
			if strings.Contains(string(body), "127.0.0.1") {
				t.Errorf("the client is told the address: %s", body)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `msg="probe failed"`) && !strings.Contains(l, "api=") {
					line = l
				}
			}
			for _, want := range tc.log {
				if !strings.Contains(line, want) {
					t.Errorf("the probe's log line %q lacks %q; log:\n%s", line, want, logs.String())
				}
			}
		})
	}
}
