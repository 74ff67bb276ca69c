package check

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// provers is a ProofSource that asks enhancement provers in process, as the
// PEC cloud does for its clients: a dialer's collected proofs look the same
// to the Checker.
type provers struct {
	ps    map[pkie.ID]pkie.Prover
	calls atomic.Int32
	reqs  atomic.Int32
}

func (s *provers) Proofs(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult {
	s.calls.Add(1)
	s.reqs.Add(int32(len(reqs)))
	subj, err := subjectOf(obs)
	out := map[pkie.ID]ProofResult{}
	for _, r := range reqs {
		p, ok := s.ps[r.ID]
		if !ok {
			continue
		}
		if err != nil {
			out[r.ID] = ProofResult{Err: err}
			continue
		}
		pr, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subj, Params: r.Params})
		out[r.ID] = ProofResult{Proof: pr, Err: err, From: "in-process cloud"}
	}
	return out
}

func mustVerifier(t *testing.T, reg *pkie.Registry, name string, config json.RawMessage) pkie.Verifier {
	t.Helper()
	k, ok := reg.ByName(name)
	if !ok {
		t.Fatalf("no %s in the registry", name)
	}
	v, err := k.NewVerifier(config)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVerifiersInVerdict runs "--require ca,ct,revocation,notary" through
// Config.Verifiers: the built-in verifiers, configured from their JSON, on
// proofs from the built-in provers (log, authority and sites real, on
// loopback), with and without notaries of the client's own.
func TestVerifiersInVerdict(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	// A man in the middle with a certificate from a CA the client trusts
	// (a mis-issuance): CA validation passes, the cloud's notary, probing
	// from its own path, sees the real one.
	rogue, _ := testbed.NewRootCA("Rogue but trusted CA", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{w.ca, rogue}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	mitm, err := testbed.StartMitM(rogue, w.honest)
	if err != nil {
		t.Fatal(err)
	}
	defer mitm.Close()
	forged, err := mitm.Forged("bank.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, chain := range [][][]byte{w.bank.Leaf().Chain, w.shop.Leaf().Chain, forged.Chain} {
		if _, err := ttp.LogChain(ctx, chain); err != nil { // even the forgery is logged: only the notary sees it
			t.Fatal(err)
		}
	}
	if err := ttp.Revoke(ctx, w.ca, w.shop.Leaf().Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reg := builtin.Registry()
	env := func() pkie.ProverEnv { return pkie.ProverEnv{DataDir: t.TempDir()} }
	ctP, err := ctprover.NewProver(ctx, env(), ttp.CTProverConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	revP, err := revprover.NewProver(ctx, env(), revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	notEnv, notConf := env(), notaryprover.ProverConfig{Name: "cloud notary", AllowPrivate: true,
		Resolve: map[string]string{"bank.test": w.bank.Addr.String(), "shop.test": w.shop.Addr.String()}}
	if _, err := notaryprover.Init(notEnv.DataDir, notConf.JSON()); err != nil {
		t.Fatal(err)
	}
	notP, err := notaryprover.NewProverFrom(ctx, notEnv, notConf)
	if err != nil {
		t.Fatal(err)
	}
	defer notP.Close()
	src := &provers{ps: map[pkie.ID]pkie.Prover{pkie.CT: ctP, pkie.Revocation: revP, pkie.Notary: notP}}
	verifiers := []pkie.Verifier{
		mustVerifier(t, reg, "ct", ttp.CTVerifierConfig().JSON()),
		mustVerifier(t, reg, "revocation", pkierev.VerifierConfig{Key: ttp.RevocationKey}.JSON()),
		mustVerifier(t, reg, "notary", pkienotary.VerifierConfig{Key: notP.PublicKey()}.JSON()),
	}
	roots := w.ca.Pool()
	roots.AddCert(rogue.Cert)
	clientPath := w.honest.Clone()
	clientPath.Set("evil.test", mitm.Addr) // the client reaches "bank.test" through the MitM under this name

	for _, notaries := range []bool{true, false} {
		cfg := w.config(t, w.honest)
		cfg.Roots, cfg.CachePath = roots, ""
		cfg.Verifiers, cfg.Proofs = verifiers, src
		cfg.Require = []string{"ca", "ct", "revocation", "notary"}
		if !notaries {
			cfg.Notaries = nil
		}
		c := newChecker(t, cfg)
		t.Run(fmt.Sprintf("notaries=%v", notaries), func(t *testing.T) {
			calls := src.calls.Load()
			v, err := c.Check(ctx, target("bank.test"))
			if err != nil {
				t.Fatal(err)
			}
			if v.Result != Trusted || len(v.Sources) != 4 {
				t.Fatalf("bank.test: %s %q %+v", v.Result, v.Reasons, v.Sources)
			}
			if n := src.calls.Load() - calls; n != 1 {
				t.Errorf("proof source asked %d times for one check, want once for all", n)
			}
			for name, want := range map[string]string{
				"ct":         "logged: in the sorted tree under pkie.test/mirror's head signed",
				"revocation": "not revoked: absent under pkie.test/revocation's head signed",
				"notary":     `notary "cloud notary" sees the same certificate`,
			} {
				a, ok := v.Source(name)
				if !ok || a.Status != Pass || !a.Required || !strings.Contains(a.Detail, want) || !strings.Contains(a.Detail, "(proof from in-process cloud)") {
					t.Errorf("%s: %+v", name, a)
				}
			}
			if !notaries && !strings.Contains(v.Headline, "ca, ct, revocation, notary passed") {
				t.Errorf("headline %q", v.Headline)
			}

			v, err = c.Check(ctx, target("shop.test"))
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := v.Source("revocation"); v.Result != Untrusted || a.Status != Fail || !strings.Contains(v.Headline, "the revocation check failed: revoked: listed under pkie.test/revocation's head signed") {
				t.Fatalf("revoked shop.test: %s %q %+v", v.Result, v.Headline, v.Sources)
			}

			// The client's own path leads through the MitM.
			obs, err := probe.New(probe.Options{AllowPrivate: true, Lookup: clientPath.Lookup}).Probe(ctx, probe.Target{Host: "evil.test", Port: 443, ServerName: "bank.test"})
			if err != nil {
				t.Fatal(err)
			}
			v, err = c.CheckObservation(ctx, obs)
			if err != nil {
				t.Fatal(err)
			}
			ca, _ := v.Source("ca")
			a, _ := v.Source("notary")
			if v.Result != Untrusted || ca.Status != Pass || a.Status != Fail ||
				!strings.Contains(a.Detail, `notary "cloud notary" sees another certificate at bank.test port 443`) ||
				!strings.Contains(v.Headline, "the cloud's notary failed") {
				t.Fatalf("MitM with a trusted CA's certificate: %s %q; ca %+v; notary %+v", v.Result, v.Headline, ca, a)
			}
		})
	}
}

// TestProofSourceFailures: a missing, busy or erring delivery makes the
// verifier's source Unknown with the reason and where it came from; a
// required one makes the verdict inconclusive, never trusted.
func TestProofSourceFailures(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reg := builtin.Registry()
	busy := ProofSourceFunc(func(_ context.Context, _ *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult {
		return map[pkie.ID]ProofResult{pkie.CT: {Err: fmt.Errorf("%w: 3 jobs in flight", pkie.ErrBusy), From: "cloud pec.test via quic"}}
	})
	cfg := w.config(t, w.honest)
	cfg.CachePath = ""
	cfg.Verifiers = []pkie.Verifier{
		mustVerifier(t, reg, "ct", ttp.CTVerifierConfig().JSON()),
		mustVerifier(t, reg, "revocation", pkierev.VerifierConfig{Key: ttp.RevocationKey}.JSON()),
	}
	cfg.Proofs = busy
	cfg.Require = []string{"ct"}
	c := newChecker(t, cfg)
	v, err := c.Check(ctx, target("bank.test"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := v.Source("ct")
	if v.Result != Inconclusive || a.Status != Unknown || a.Detail != "no proof from cloud pec.test via quic: pkie: prover busy: 3 jobs in flight" {
		t.Fatalf("busy cloud: %s; ct %+v", v.Result, a)
	}
	if r, _ := v.Source("revocation"); r.Status != Unknown || r.Detail != "no proof" || r.Required {
		t.Errorf("undelivered revocation proof: %+v", r)
	}
}

func TestVerifierConfigErrors(t *testing.T) {
	w := newWorld(t, 0)
	reg := builtin.Registry()
	mirrorKey, logKey := testCTKeys(t)
	v, err := ct.NewVerifierFrom(ct.VerifierConfig{Key: mirrorKey, LogKey: logKey})
	if err != nil {
		t.Fatal(err)
	}
	none := ProofSourceFunc(func(context.Context, *probe.Observation, []pkie.Request) map[pkie.ID]ProofResult { return nil })
	other := &privateVerifier{}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		err  string
	}{
		{"no proof source", func(c *Config) { c.Verifiers = []pkie.Verifier{v} }, "without a proof source"},
		{"named twice", func(c *Config) {
			c.Verifiers, c.Proofs = []pkie.Verifier{v}, none
			s, _ := NewCTSource(ProofOptions{ProverURL: "http://127.0.0.1:1", TTPKey: mirrorKey, LogKey: logKey})
			c.Sources = []Source{s}
		}, `two sources are named "ct"`},
		{"no notaries, nothing required", func(c *Config) { c.Notaries, c.Verifiers, c.Proofs = nil, []pkie.Verifier{v}, none }, "no enhancement required"},
		{"unregistered name", func(c *Config) {
			c.Verifiers, c.Proofs, c.Registry, c.Require = []pkie.Verifier{other}, none, reg, []string{"private"}
		}, `required source "private" is not configured (have 0xff01, ca)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := w.config(t, w.honest)
			tc.mod(&cfg)
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("New: %v, want %q", err, tc.err)
			}
		})
	}
}

type privateVerifier struct{}

func (*privateVerifier) ID() pkie.ID { return 0xFF01 }
func (*privateVerifier) Verify(context.Context, *pkie.VerifyRequest) pkie.Assertion {
	return pkie.Assertion{Status: pkie.Fail, Reason: "never"}
}

// TestHTTPProofsRevocationKey: the HTTP source computes the revocation key
// from the verified path only; with none it asks nothing and says why.
func TestHTTPProofsRevocationKey(t *testing.T) {
	root, _ := testbed.NewRootCA("K Root", testbed.ECDSAP256)
	inter, _ := root.NewIntermediate("K CA", testbed.ECDSAP256)
	leaf, _ := inter.Issue(testbed.LeafOptions{DNSNames: []string{"k.test"}, OmitAKI: true})
	h := &HTTPProofs{Revocation: "http://127.0.0.1:1"}
	obs := &probe.Observation{Target: target("k.test"), Chain: leaf.Chain}
	res := h.Proofs(context.Background(), obs, []pkie.Request{{ID: pkie.Revocation}, {ID: pkie.Notary}})
	if r := res[pkie.Revocation]; r.Proof != nil || r.Err == nil || !strings.Contains(r.Err.Error(), "issuer cannot be established") {
		t.Errorf("no verified path: %+v", r)
	}
	if r := res[pkie.Notary]; r.Proof != nil || r.Err == nil || !strings.Contains(r.Err.Error(), "no HTTP prover for enhancement 0x0003") {
		t.Errorf("notary over HTTP: %+v", r)
	}
	ctx := withVerifiedChains(context.Background(), [][]*x509.Certificate{{leaf.Cert, inter.Cert, root.Cert}})
	res = h.Proofs(ctx, obs, []pkie.Request{{ID: pkie.Revocation}})
	if r := res[pkie.Revocation]; r.Err == nil || errors.Is(r.Err, context.Canceled) || !strings.Contains(r.From, "prover http://127.0.0.1:1") {
		t.Errorf("with a verified path the prover is asked: %+v", r)
	}
}

func TestNewVerifiers(t *testing.T) {
	mirrorKey, logKey := testCTKeys(t)
	_, revKey, _ := checkpoint.GenerateKey("pkie.test/revocation")
	ctc := ct.VerifierConfig{Key: mirrorKey, LogKey: logKey}.JSON()
	vs, err := NewVerifiers(nil, map[string]json.RawMessage{
		"revocation": pkierev.VerifierConfig{Key: revKey}.JSON(),
		"0x0001":     ctc,
	})
	if err != nil || len(vs) != 2 || vs[0].ID() != pkie.CT || vs[1].ID() != pkie.Revocation {
		t.Fatalf("%v %v", vs, err)
	}
	for _, tc := range []struct {
		cfg map[string]json.RawMessage
		err string
	}{
		{map[string]json.RawMessage{"nope": nil}, `unknown enhancement "nope"`},
		{map[string]json.RawMessage{"ct": json.RawMessage(`{"key":"x"}`)}, "ct verifier"},
		{map[string]json.RawMessage{"ct": ctc, "0x0001": ctc}, "configured twice"},
		{map[string]json.RawMessage{"ct": ct.VerifierConfig{Key: mirrorKey}.JSON()}, "log_key"},
	} {
		if _, err := NewVerifiers(builtin.Registry(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("NewVerifiers(%v) = %v, want %q", tc.cfg, err, tc.err)
		}
	}
}

// testCTKeys returns a ct mirror's head key and a log's RFC 6962 note key
// (ECDSA P-256), as a client pins them.
func testCTKeys(t *testing.T) (mirrorKey, logKey string) {
	t.Helper()
	_, mirrorKey, err := checkpoint.GenerateKey("mirror.pkie.test/ct")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if logKey, err = fnote.RFC6962VerifierString("pkie.test/log", k.Public()); err != nil {
		t.Fatal(err)
	}
	return mirrorKey, logKey
}

// sctRecorder is a ct verifier that records what it is given and passes a
// certificate that came with SCTs, proof or not: a verifier that decides
// on the handshake's evidence, as the ct verifier with a log list does.
type sctRecorder struct{ got *pkie.VerifyRequest }

func (*sctRecorder) ID() pkie.ID { return pkie.CT }
func (r *sctRecorder) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	r.got = req
	if len(req.SCTs) == 0 {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no SCT"}
	}
	return pkie.Assertion{Status: pkie.Pass, Reason: fmt.Sprintf("%d SCTs", len(req.SCTs))}
}

// TestSCTsReachVerifier: the SCTs and OCSP response a probe saw reach the
// verifier in its Subject, the ct request's parameters carry the SCTs
// (ct.RequestParams) and no other request's do, and a verifier is asked
// even when no proof came: its finding stands, with why no proof came.
func TestSCTsReachVerifier(t *testing.T) {
	root, _ := testbed.NewRootCA("S Root", testbed.ECDSAP256)
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"s.test"}})
	sctOf := func(b byte) []byte {
		raw := append([]byte{0}, make([]byte, 32)...)
		raw[1] = b
		return append(raw, 0, 0, 1, 0x9a, 0, 0, 0, 0, 0, 0, 4, 3, 0, 4, 0x30, 2, 2, 1)
	}
	obs := &probe.Observation{Target: target("s.test"), Chain: leaf.Chain, SCTs: [][]byte{sctOf(1), sctOf(2)}, OCSPResponse: []byte("stapled")}
	var asked []pkie.Request
	none := ProofSourceFunc(func(_ context.Context, _ *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult {
		asked = append(asked, reqs...)
		return map[pkie.ID]ProofResult{pkie.CT: {Err: errors.New("cloud unreachable"), From: "cloud pec.test"}}
	})
	rec := &sctRecorder{}
	src, err := NewVerifierSource("ct", rec, none)
	if err != nil {
		t.Fatal(err)
	}
	a := src.Assess(context.Background(), obs)
	want := ct.RequestParams(&pkie.Subject{SCTs: obs.SCTs, Certs: []*x509.Certificate{leaf.Cert}})
	switch {
	case len(asked) != 1 || asked[0].ID != pkie.CT || want == nil || string(asked[0].Params) != string(want):
		t.Errorf("requests %+v, want the ct request with params %x", asked, want)
	case rec.got == nil || len(rec.got.SCTs) != 2 || string(rec.got.OCSPResponse) != "stapled" || string(rec.got.Params) != string(want):
		t.Errorf("the verifier got %+v", rec.got)
	case a.Status != Pass || a.Detail != "2 SCTs (no proof from cloud pec.test: cloud unreachable)":
		t.Errorf("assertion %+v", a)
	}
	if r := requestFor(pkie.Revocation, obs); r.Params != nil {
		t.Errorf("revocation request with params %x", r.Params)
	}
	obs.SCTs, obs.OCSPResponse = nil, nil
	if a := src.Assess(context.Background(), obs); a.Status != Unknown || a.Detail != "no proof from cloud pec.test: cloud unreachable" {
		t.Errorf("no SCT, no proof: %+v", a)
	}
}
