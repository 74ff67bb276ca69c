package domainpolicy_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/docs/example/domainpolicy"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/testbed"
)

// world: a policy authority on loopback whose policy for www.example.test
// allows the key of the site's real certificate, a mis-issued certificate
// for the same name (another key, a trusted CA), and the registry with the
// example beside the built-ins.
type world struct {
	auth        *domainpolicy.Authority
	url, vkey   string
	real, rogue *testbed.Leaf
	reg         *pkie.Registry
}

func newWorld(t *testing.T) *world {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "policy.example.test")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{vkey: vkey}
	if w.auth, err = domainpolicy.NewAuthority(skey, nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.auth.Handler())
	t.Cleanup(srv.Close)
	w.url = srv.URL
	ca, _ := testbed.NewRootCA("Policy Test CA", testbed.ECDSAP256)
	w.real, _ = ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	w.rogue, _ = ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	if err := w.auth.Set("www.example.test", domainpolicy.SPKIHash(w.real.Cert)); err != nil {
		t.Fatal(err)
	}
	w.reg = builtin.Registry()
	if err := w.reg.Register(domainpolicy.Kind()); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) prover(t *testing.T) pkie.Prover {
	t.Helper()
	k, ok := w.reg.ByName(domainpolicy.Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg, _ := json.Marshal(domainpolicy.ProverConfig{URL: w.url, Key: w.vkey})
	p, err := k.NewProver(context.Background(), pkie.ProverEnv{DataDir: t.TempDir()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (w *world) verifier(t *testing.T, key string) pkie.Verifier {
	t.Helper()
	k, _ := w.reg.Lookup(domainpolicy.ID)
	cfg, _ := json.Marshal(domainpolicy.VerifierConfig{Key: key, MaxAge: domainpolicy.Duration(time.Hour)})
	v, err := k.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func subject(name string, l *testbed.Leaf) pkie.Subject {
	certs := make([]*x509.Certificate, len(l.Chain))
	for i, der := range l.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: name, Port: 443, Chain: l.Chain, Certs: certs}
}

// TestProverVerifier runs both halves in process.
func TestProverVerifier(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if k, ok := w.reg.ByName("ct"); !ok || k.ID != pkie.CT {
		t.Fatal("the built-ins are not beside the example")
	}
	p := w.prover(t)
	v := w.verifier(t, w.vkey)
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subject("www.example.test", w.real)})
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := note.GenerateKey(rand.Reader, "policy.example.test")
	forged := &pkie.Proof{ID: proof.ID, Version: proof.Version, Body: []byte(strings.Replace(string(proof.Body), "name www", "name wwx", 1))}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		v      pkie.Verifier
		host   string
		leaf   *testbed.Leaf
		proof  *pkie.Proof
		now    time.Time
		status pkie.Status
		reason string
	}{
		{"allowed key", v, "www.example.test", w.real, proof, now, pkie.Pass, "the policy of www.example.test signed by policy.example.test at"},
		{"mis-issued certificate", v, "www.example.test", w.rogue, proof, now, pkie.Fail, "not the leaf's"},
		{"no proof", v, "www.example.test", w.real, nil, now, pkie.Unknown, "no domain policy"},
		{"forged", v, "www.example.test", w.real, forged, now, pkie.Fail, "not signed by the pinned key"},
		{"stale", v, "www.example.test", w.real, proof, now.Add(2 * time.Hour), pkie.Fail, "old (max 1h0m0s)"},
		{"other key", w.verifier(t, otherKey), "www.example.test", w.real, proof, now, pkie.Fail, "not signed by the pinned key"},
		{"other domain", v, "mail.example.test", w.real, proof, now, pkie.Fail, "policy of www.example.test, not mail.example.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(tc.host, tc.leaf), Proof: tc.proof, Now: tc.now})
			if a.Status != tc.status || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("%s %q, want %s with %q", a.Status, a.Reason, tc.status, tc.reason)
			}
		})
	}
	if _, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subject("nopolicy.example.test", w.real)}); !errors.Is(err, pkie.ErrUnsupported) {
		t.Errorf("a domain without a policy: %v", err)
	}
}

// TestThroughCloud is the example end to end: a real cloud (internal/cloud)
// hosting the example's prover, a client registering over QUIC or TCP,
// submitting the chain it saw, and verifying the proof the cloud pushes.
// Nothing in the cloud knows the example: it was registered beside the
// built-ins and its prover built from its JSON configuration.
func TestThroughCloud(t *testing.T) {
	w := newWorld(t)
	cert, _, _, err := cloud.NewCertificate("example-cloud")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloud.New(cloud.Config{Certificate: cert, Provers: []pkie.Prover{w.prover(t)}, Registry: w.reg})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { c.ServeQUIC(ctx, pc); done <- struct{}{} }()
	go func() { c.ServeTCP(ctx, ln); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done; c.Wait() }()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pin := pecwire.SPKIHash(leaf)
	v := w.verifier(t, w.vkey)

	for _, transport := range []string{pecwire.QUIC, pecwire.TCP} {
		for _, tc := range []struct {
			leaf   *testbed.Leaf
			status pkie.Status
		}{{w.real, pkie.Pass}, {w.rogue, pkie.Fail}} {
			t.Run(transport+"/"+string(tc.status), func(t *testing.T) {
				dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
				defer dcancel()
				var conn *pecwire.Conn
				if transport == pecwire.QUIC {
					conn, err = pecwire.DialQUIC(dctx, pc.LocalAddr().String(), pecwire.ClientTLS(pin), nil)
				} else {
					conn, err = pecwire.DialTCP(dctx, ln.Addr().String(), pecwire.ClientTLS(pin))
				}
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				deadline := time.Now().Add(10 * time.Second)
				if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, deadline); err != nil {
					t.Fatal(err)
				}
				m, err := conn.Recv(deadline)
				if err != nil {
					t.Fatal(err)
				}
				reg, ok := m.(*pecwire.Registered)
				if !ok {
					t.Fatalf("got %T, want Registered", m)
				}
				nonce := pecwire.Nonce{1, 2, 3, 4, 5, 6, 7, 8}
				sub := &pecwire.Submit{ClientID: reg.ClientID, Nonce: nonce, Budget: 5 * time.Second,
					ServerName: "www.example.test", Port: 443, Chain: tc.leaf.Chain,
					Requests: []pkie.Request{{ID: domainpolicy.ID}}}
				if err := conn.Send(sub, deadline); err != nil {
					t.Fatal(err)
				}
				m, err = conn.Recv(deadline)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := m.(*pecwire.Proof)
				if !ok || got.Nonce != nonce || got.ID != domainpolicy.ID || got.Status != pecwire.ProofOK {
					t.Fatalf("pushed %T %+v", m, m)
				}
				a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject("www.example.test", tc.leaf), Proof: got.Proof})
				if a.Status != tc.status || !strings.Contains(a.Reason, "policy.example.test") {
					t.Fatalf("verified the pushed proof: %s %q, want %s", a.Status, a.Reason, tc.status)
				}
			})
		}
	}
}

// FuzzParsePolicy: whatever parses renders back to the same text.
func FuzzParsePolicy(f *testing.F) {
	p := domainpolicy.Policy{Origin: "policy.example.test", Name: "www.example.test", SPKI: [][32]byte{{1}, {2}}, Time: time.UnixMilli(1700000000000)}
	f.Add(p.Body())
	f.Add([]byte("a\npkie example domain-policy v1\nname x\ntimestamp 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := domainpolicy.ParsePolicy(b)
		if err != nil {
			return
		}
		if got := p.Body(); string(got) != string(b) {
			t.Fatalf("round trip:\n%q\n%q", b, got)
		}
	})
}

// FuzzVerify: no body the pinned key did not sign passes.
func FuzzVerify(f *testing.F) {
	_, vkey, _ := note.GenerateKey(rand.Reader, "policy.example.test")
	v, err := domainpolicy.NewVerifier([]byte(`{"key":"` + vkey + `"}`))
	if err != nil {
		f.Fatal(err)
	}
	ca, _ := testbed.NewRootCA("Fuzz CA", testbed.ECDSAP256)
	leaf, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	subj := subject("www.example.test", leaf)
	f.Add([]byte("policy.example.test\npkie example domain-policy v1\nname www.example.test\n\n— policy.example.test AAAA\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		a := v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: &pkie.Proof{ID: domainpolicy.ID, Version: 1, Body: body}})
		if a.Status == pkie.Pass {
			t.Fatalf("unsigned body passed: %q", a.Reason)
		}
	})
}
