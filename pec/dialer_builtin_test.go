package pec

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/pkies/revocation"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// builtinWorld is a CT log, a revocation authority, a cloud hosting the
// built-in provers (ct and revocation synced from them, a notary probing
// from the cloud's path) and four sites on loopback: good.test (logged,
// not revoked), revoked.test (logged, then revoked), unlogged.test (never
// logged), and bank.test, which the client reaches through an attacker
// presenting a chain from the same CA, logged too: only the cloud's notary,
// which reaches the real bank.test, can tell.
type builtinWorld struct {
	ttp      *testbed.TTPs
	root     *testbed.CA
	bundle   *Bundle
	reg      *pkie.Registry
	addr     map[string]string // what the client dials for each name
	leaves   map[string]*testbed.Leaf
	verifier []pkie.Verifier
}

func newBuiltinWorld(t testing.TB) *builtinWorld {
	t.Helper()
	ctx := context.Background()
	root, err := testbed.NewRootCA("PEC Dialer Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("PEC Dialer CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	w := &builtinWorld{ttp: ttp, root: root, reg: builtin.Registry(), addr: map[string]string{}, leaves: map[string]*testbed.Leaf{}}
	resolve := map[string]string{}
	start := func(name string, leaf *testbed.Leaf) string {
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Addr.String()
	}
	for _, name := range []string{"good.test", "revoked.test", "unlogged.test", "bank.test"} {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		w.leaves[name] = leaf
		w.addr[name] = start(name, leaf)
		_, port, _ := net.SplitHostPort(w.addr[name])
		resolve[name+":"+port] = w.addr[name]
		if name != "unlogged.test" {
			if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The attacker on the client's path: another certificate for
	// bank.test from the same CA, logged as well. The cloud's notary
	// resolves bank.test, on the port the client used, to the real site.
	forged, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ttp.LogChain(ctx, forged.Chain); err != nil {
		t.Fatal(err)
	}
	mitm := start("bank.test", forged)
	_, mitmPort, _ := net.SplitHostPort(mitm)
	resolve["bank.test:"+mitmPort] = w.addr["bank.test"]
	w.addr["bank.test"] = mitm
	if err := ttp.Revoke(ctx, ca, w.leaves["revoked.test"].Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	env := func() pkie.ProverEnv { return pkie.ProverEnv{DataDir: t.TempDir()} }
	ctP, err := ctprover.NewProver(ctx, env(), ttp.CTProverConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	revP, err := revprover.NewProver(ctx, env(), revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	notEnv, notConf := env(), notaryprover.ProverConfig{Name: "dialer-test-notary", Resolve: resolve, AllowPrivate: true}
	if _, err := notaryprover.Init(notEnv.DataDir, notConf.JSON()); err != nil {
		t.Fatal(err)
	}
	notP, err := notaryprover.NewProverFrom(ctx, notEnv, notConf)
	if err != nil {
		t.Fatal(err)
	}
	w.bundle = startCloud(t, w.reg, ctP, revP, notP)
	w.bundle.Verifiers = map[string]json.RawMessage{"notary": notary.VerifierConfig{Key: notP.PublicKey()}.JSON()}

	ctV, err := ct.NewVerifier(ttp.CTVerifierConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	revV, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	bv, skipped, err := BundleVerifiers(w.reg, []*Bundle{w.bundle})
	if err != nil || len(bv) != 1 || len(skipped) != 0 {
		t.Fatalf("bundle verifiers %v, skipped %v, %v", bv, skipped, err)
	}
	w.verifier = []pkie.Verifier{ctV, revV, bv[0]}
	return w
}

func (w *builtinWorld) dialer(cl *Client) *Dialer {
	return &Dialer{Cloud: cl, Verifiers: w.verifier, Registry: w.reg,
		TLSConfig: &tls.Config{RootCAs: w.root.Pool()}, ProofTimeout: 15 * time.Second}
}

// TestDialerBuiltinEnhancements runs client-only handshakes with each
// built-in enhancement end to end, over QUIC and over TCP: a good site is
// trusted on ca, ct, revocation and the cloud's notary; a revoked
// certificate, an unlogged one and a man in the middle on the client's path
// are each refused, with the evidence that caught them failing.
func TestDialerBuiltinEnhancements(t *testing.T) {
	w := newBuiltinWorld(t)
	for _, transport := range []string{pecwire.QUIC, pecwire.TCP} {
		cl := dialCloud(t, w.bundle, transport)
		for _, tt := range []struct {
			site   string
			want   check.Result
			failed string
			reason string
		}{
			{site: "good.test", want: check.Trusted},
			{site: "revoked.test", want: check.Untrusted, failed: "revocation", reason: "revoked"},
			{site: "unlogged.test", want: check.Untrusted, failed: "ct", reason: "absent from the log's sorted tree"},
			{site: "bank.test", want: check.Untrusted, failed: "notary"},
		} {
			t.Run(transport+"/"+tt.site, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				d := w.dialer(cl)
				d.TLSConfig.ServerName = tt.site
				c, err := d.Dial(ctx, "tcp", w.addr[tt.site])
				var v *check.Verdict
				if tt.want == check.Trusted {
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					v = c.Verdict()
				} else {
					var ve *VerdictError
					if !errors.As(err, &ve) {
						t.Fatalf("got %v, %v; want a *VerdictError", c, err)
					}
					v = ve.Verdict
				}
				if v.Result != tt.want {
					t.Fatalf("verdict %s: %s; want %s\n%s", v.Result, v.Headline, tt.want, strings.Join(v.Reasons, "\n"))
				}
				for _, name := range []string{"ca", "ct", "revocation", "notary"} {
					a, ok := v.Source(name)
					want := check.Pass
					if name == tt.failed {
						want = check.Fail
					}
					if !ok || a.Status != want || !a.Required {
						t.Errorf("%s: %+v, want %s and required", name, a, want)
					}
					if name == tt.failed && !strings.Contains(a.Detail, tt.reason) {
						t.Errorf("%s failed with %q, want it to say %q", name, a.Detail, tt.reason)
					}
				}
			})
		}
	}
	// A resumed connection reuses the full handshake's proofs: re-verified
	// by every verifier, with no submission.
	cl := dialCloud(t, w.bundle, pecwire.TCP)
	d := w.dialer(cl)
	d.TLSConfig.ServerName = "good.test"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		c, err := d.Dial(ctx, "tcp", w.addr["good.test"])
		if err != nil {
			t.Fatal(err)
		}
		// A request and its response: crypto/tls reads the TLS 1.3
		// session tickets on the way.
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(c); !strings.Contains(string(b), "200 OK") {
			t.Fatalf("response %q", b)
		}
		c.Close()
		ev, v := c.Evidence(), c.Verdict()
		if resumed := i == 1; ev.Resumed != resumed || ev.Reused != resumed || ev.Submitted == resumed || v.Result != check.Trusted {
			t.Fatalf("dial %d: evidence %+v, verdict %s", i+1, ev, v.Headline)
		}
		for _, name := range []string{"ct", "revocation", "notary"} {
			if a, _ := v.Source(name); a.Status != check.Pass {
				t.Errorf("dial %d: %s %+v", i+1, name, a)
			}
		}
	}

	// Through net/http, as an application would: the URL names the site,
	// the dialer connects to its loopback address.
	for site, wantOK := range map[string]bool{"good.test": true, "revoked.test": false} {
		d := w.dialer(cl)
		d.NetDial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, w.addr[site])
		}
		hc := &http.Client{Transport: &http.Transport{DialTLSContext: d.DialContext}, Timeout: 30 * time.Second}
		resp, err := hc.Get("https://" + net.JoinHostPort(site, port(w.addr[site])) + "/")
		if !wantOK {
			var ve *VerdictError
			if !errors.As(err, &ve) {
				t.Fatalf("GET %s: %v, want a *VerdictError", site, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), site) {
			t.Fatalf("GET %s: %d %q", site, resp.StatusCode, body)
		}
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// BenchmarkDialer measures a connection to a site checked with ca, ct,
// revocation and the cloud's notary, the cloud on loopback over QUIC, all
// in TLS 1.2: plain crypto/tls (its own CA validation) for reference, a
// full handshake through the dialer, and a resumed one reusing (and
// re-verifying) the session's proofs. handshake-µs is when the TLS
// handshake completed, wait-µs how long after it the dialer waited for the
// last proof, verify-µs the check's time, all per connection.
func BenchmarkDialer(b *testing.B) {
	w := newBuiltinWorld(b)
	cl := dialCloud(b, w.bundle, pecwire.QUIC)
	ctx := context.Background()
	b.Run("tls", func(b *testing.B) {
		conf := &tls.Config{RootCAs: w.root.Pool(), ServerName: "good.test", MaxVersion: tls.VersionTLS12}
		for b.Loop() {
			c, err := (&tls.Dialer{Config: conf}).DialContext(ctx, "tcp", w.addr["good.test"])
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	for _, mode := range []string{"full", "reuse"} {
		b.Run(mode, func(b *testing.B) {
			d := w.dialer(cl)
			d.Mode = ModeClientOnly // the sites are stock servers; BenchmarkClientServer has the PEC server
			d.TLSConfig.ServerName = "good.test"
			d.TLSConfig.MaxVersion = tls.VersionTLS12 // tickets arrive in the handshake: no read needed to resume
			d.TLSConfig.SessionTicketsDisabled = mode == "full"
			if c, err := d.Dial(ctx, "tcp", w.addr["good.test"]); err != nil {
				b.Fatal(err)
			} else {
				c.Close()
			}
			var hs, wait, verify time.Duration
			for b.Loop() {
				c, err := d.Dial(ctx, "tcp", w.addr["good.test"])
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
				tm := c.Timings()
				if ev := c.Evidence(); ev.Reused != (mode == "reuse") {
					b.Fatalf("evidence %+v", ev)
				}
				hs += tm.Handshake
				wait += max(0, tm.LastProof-tm.Handshake)
				verify += tm.Verification
			}
			n := float64(b.N)
			b.ReportMetric(float64(hs.Microseconds())/n, "handshake-µs")
			b.ReportMetric(float64(wait.Microseconds())/n, "wait-µs")
			b.ReportMetric(float64(verify.Microseconds())/n, "verify-µs")
		})
	}
}
