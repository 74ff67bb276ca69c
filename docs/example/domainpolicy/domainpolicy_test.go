package domainpolicy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/cloud"
	"github.com/pkie/pkie/pec"

	"example.com/domainpolicy/domainpolicy"
)

// world: a policy authority on loopback whose policy for www.example.test
// allows the key of the site's real certificate, a mis-issued certificate
// for the same name (another key, a trusted CA), and the registry with the
// example beside the built-ins.
type world struct {
	auth        *domainpolicy.Authority
	url, vkey   string
	ca          *testCA
	real, rogue *leaf
	reg         *pkie.Registry // the client's: the built-ins' verifiers and the example
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
	w.ca = newCA(t, "Policy Test CA")
	w.real = w.ca.issue(t, "www.example.test")
	w.rogue = w.ca.issue(t, "www.example.test")
	if err := w.auth.Set("www.example.test", domainpolicy.SPKIHash(w.real.Cert)); err != nil {
		t.Fatal(err)
	}
	w.reg = check.BuiltinRegistry()
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

func subject(name string, l *leaf) pkie.Subject {
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
		leaf   *leaf
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

// TestThroughCloud is the example end to end, from outside pkie's module
// as an operator and an application would build it: a cloud binary's
// main (cloud.Run with cloud.BuiltinRegistry and the example registered
// beside the built-ins) initialised with the example's prover
// configuration, serving on loopback; its bundle from its own bundle
// command; and an application's pec.Dialer (client-only mode, over QUIC
// and over TLS/TCP) that fetches from the site only once the example's
// proof, pushed by the cloud, verified under the key the client pinned. A
// mis-issued certificate for the same name is refused. Nothing in the
// cloud or the client knows the example beyond its registered Kind.
func TestThroughCloud(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "cloud")

	// The operator's binary: the built-ins and the example.
	reg := cloud.BuiltinRegistry()
	if err := reg.Register(domainpolicy.Kind()); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, stdout io.Writer, args ...string) {
		t.Helper()
		var stderr strings.Builder
		if code := cloud.Run(ctx, args, stdout, &stderr, reg); code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr.String())
		}
	}
	cfg, _ := json.Marshal(domainpolicy.ProverConfig{URL: w.url, Key: w.vkey})
	cfgFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	run(ctx, io.Discard, "init", "--data", data, "--name", "example-cloud", "--pkie", domainpolicy.Name+"="+cfgFile)

	// serve prints its addresses as one JSON line, then runs until ctx ends.
	pr, pw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer pw.Close()
		var stderr strings.Builder
		args := []string{"serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "", "--json"}
		if code := cloud.Run(ctx, args, pw, &stderr, reg); code != 0 {
			t.Errorf("serve: exit %d: %s", code, stderr.String())
		}
	}()
	defer func() { cancel(); <-served }()
	var info struct {
		Listening map[string]string `json:"listening"`
		PKIEs     []string          `json:"pkies"`
	}
	line, err := bufio.NewReader(pr).ReadBytes('\n')
	if err != nil {
		t.Fatalf("serve printed no startup line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	if err := json.Unmarshal(line, &info); err != nil || info.Listening["quic"] == "" || info.Listening["tcp"] == "" {
		t.Fatalf("serve's startup line %q: %v", line, err)
	}
	if fmt.Sprint(info.PKIEs) != "["+domainpolicy.Name+"]" {
		t.Fatalf("the cloud hosts %v, want the example alone", info.PKIEs)
	}
	var out bytes.Buffer
	run(ctx, &out, "bundle", "--data", data, "--point", info.Listening["quic"]+","+info.Listening["tcp"], "--json")
	var b struct {
		Bundle json.RawMessage `json:"bundle"`
	}
	if err := json.Unmarshal(out.Bytes(), &b); err != nil {
		t.Fatalf("bundle --json: %v: %s", err, out.Bytes())
	}
	bundle, err := pec.ParseBundle(b.Bundle)
	if err != nil {
		t.Fatal(err)
	}

	// The site, serving the real certificate, then a mis-issued one.
	sites := map[*leaf]string{w.real: w.ca.serve(t, w.real), w.rogue: w.ca.serve(t, w.rogue)}

	// The application: the example's verifier under the key it pins
	// itself, never one the cloud's bundle names.
	v := w.verifier(t, w.vkey)
	for _, transport := range []string{pec.TransportQUIC, pec.TransportTCP} {
		client, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{bundle}, Transport: transport})
		if err != nil {
			t.Fatalf("%s: %v", transport, err)
		}
		defer client.Close()
		for _, tc := range []struct {
			leaf    *leaf
			trusted bool
		}{{w.real, true}, {w.rogue, false}} {
			t.Run(fmt.Sprintf("%s/trusted=%v", transport, tc.trusted), func(t *testing.T) {
				addr := sites[tc.leaf]
				d := &pec.Dialer{Cloud: client, Registry: w.reg, Verifiers: []pkie.Verifier{v}, Mode: pec.ModeClientOnly,
					Require: []string{"ca", domainpolicy.Name}, TLSConfig: &tls.Config{RootCAs: w.ca.pool},
					ProofTimeout: 10 * time.Second,
					NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, network, addr)
					}}
				dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
				defer dcancel()
				conn, err := d.Dial(dctx, "tcp", "www.example.test:443")
				if !tc.trusted {
					var refused *pec.VerdictError
					if !errors.As(err, &refused) {
						t.Fatalf("a mis-issued certificate: %v, want a refusal", err)
					}
					a, _ := refused.Verdict.Source(domainpolicy.Name)
					if refused.Verdict.Result != check.Untrusted || a.Status != check.Fail || !strings.Contains(a.Detail, "not the leaf's") {
						t.Fatalf("refused as %s, %s: %s %q", refused.Verdict.Result, a.Source, a.Status, a.Detail)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				a, _ := conn.Verdict().Source(domainpolicy.Name)
				if conn.Verdict().Result != check.Trusted || a.Status != check.Pass || !strings.Contains(a.Detail, "policy.example.test") {
					t.Fatalf("verdict %s, %s: %s %q", conn.Verdict().Result, a.Source, a.Status, a.Detail)
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
	subj := subject("www.example.test", newCA(f, "Fuzz CA").issue(f, "www.example.test"))
	f.Add([]byte("policy.example.test\npkie example domain-policy v1\nname www.example.test\n\n— policy.example.test AAAA\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		a := v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: &pkie.Proof{ID: domainpolicy.ID, Version: 1, Body: body}})
		if a.Status == pkie.Pass {
			t.Fatalf("unsigned body passed: %q", a.Reason)
		}
	})
}
