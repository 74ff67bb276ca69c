package revocation_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

func subject(chain [][]byte) pkie.Subject {
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: "bank.test", Port: 443, Chain: chain, Certs: certs}
}

func startTTPs(t *testing.T) *testbed.TTPs {
	t.Helper()
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	return ttp
}

func newProver(t *testing.T, ttp *testbed.TTPs) pkie.Prover {
	t.Helper()
	p, err := revprover.NewProver(context.Background(), pkie.ProverEnv{DataDir: t.TempDir()},
		revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func prove(t *testing.T, p pkie.Prover, chain [][]byte) *pkie.Proof {
	t.Helper()
	pr, err := p.Prove(context.Background(), &pkie.ProveRequest{Subject: subject(chain)})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	ttp := startTTPs(t)
	root, _ := testbed.NewRootCA("Rev Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("Rev CA", testbed.ECDSAP256)
	good, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	revoked, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err := ttp.Revoke(ctx, ca, revoked.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := newProver(t, ttp)
	other := startTTPs(t) // same authority name, another key
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey, MaxAge: revocation.Duration(time.Hour)}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	okProof := prove(t, p, good.Chain)
	flipped := func(i int) *pkie.Proof {
		b := append([]byte(nil), okProof.Body...)
		b[i] ^= 0x80
		return &pkie.Proof{ID: okProof.ID, Version: okProof.Version, Body: b}
	}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		chain  [][]byte
		proof  *pkie.Proof
		now    time.Time
		status pkie.Status
		reason []string
	}{
		{"not revoked", good.Chain, okProof, now, pkie.Pass, []string{"not revoked: absent under pkie.test/revocation's head signed", "keys, root"}},
		{"revoked", revoked.Chain, prove(t, p, revoked.Chain), now, pkie.Fail, []string{"revoked: listed under pkie.test/revocation's head signed"}},
		{"no proof", good.Chain, nil, now, pkie.Unknown, []string{"no revocation proof"}},
		{"forged head", good.Chain, flipped(2 + 32 + 2 + 20), now, pkie.Fail, []string{"revocation authority pkie.test/revocation", "head rejected"}},
		{"forged claim", good.Chain, flipped(1), now, pkie.Fail, []string{"revocation authority pkie.test/revocation", "unknown flags"}},
		{"forged proof", good.Chain, flipped(len(okProof.Body) - 1), now, pkie.Fail, []string{"revocation authority pkie.test/revocation"}},
		{"stale", good.Chain, okProof, now.Add(61 * time.Minute), pkie.Fail, []string{"revocation authority pkie.test/revocation", "older than the maximum age"}},
		{"other key", good.Chain, prove(t, newProver(t, other), good.Chain), now, pkie.Fail, []string{"revocation authority pkie.test/revocation", "head rejected", "signature"}},
		// The "not revoked" proof of another certificate, replayed for the
		// revoked one.
		{"wrong certificate", revoked.Chain, okProof, now, pkie.Fail, []string{"proves key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(tc.chain), Proof: tc.proof, Now: tc.now})
			if a.Status != tc.status {
				t.Fatalf("status %s, want %s: %s", a.Status, tc.status, a.Reason)
			}
			for _, s := range tc.reason {
				if !strings.Contains(a.Reason, s) {
					t.Errorf("reason %q lacks %q", a.Reason, s)
				}
			}
		})
	}
}

// TestIssuerFromVerifiedPath: for a leaf without an authority key
// identifier the prover can only guess the issuer from what the server
// sent; the verifier recomputes the key from its own verified path and
// refuses the guess when the server put an unrelated certificate second.
func TestIssuerFromVerifiedPath(t *testing.T) {
	ctx := context.Background()
	ttp := startTTPs(t)
	root, _ := testbed.NewRootCA("Old Root", testbed.ECDSAP256)
	inter, _ := root.NewIntermediate("Old CA", testbed.ECDSAP256)
	leaf, _ := inter.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}, OmitAKI: true, OmitIntermediates: true})
	if len(leaf.Cert.AuthorityKeyId) != 0 {
		t.Fatal("testbed issued the leaf with an authority key identifier")
	}
	otherRoot, _ := testbed.NewRootCA("Unrelated Root", testbed.ECDSAP256)
	// An unrelated CA that signed nothing here, but whose key it re-used
	// to sign a copy of the leaf would be the attacker's: here it is simply
	// a certificate the server sends second.
	unrelated, _ := otherRoot.NewIntermediate("Unrelated CA", testbed.ECDSAP256)
	if err := ttp.Revoke(ctx, inter, leaf.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := newProver(t, ttp)
	v, _ := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON())
	verified := [][]*x509.Certificate{{leaf.Cert, inter.Cert, root.Cert}}

	// The server sends the issuer: prover and verifier agree, revoked.
	withIssuer := [][]byte{leaf.Cert.Raw, inter.Cert.Raw}
	a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(withIssuer), Proof: prove(t, p, withIssuer), VerifiedChains: verified})
	if a.Status != pkie.Fail || !strings.Contains(a.Reason, "revoked: listed") {
		t.Fatalf("issuer sent: %s %s", a.Status, a.Reason)
	}
	// No verified path: the issuer cannot be established, Unknown, never
	// "not revoked".
	a = v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(withIssuer), Proof: prove(t, p, withIssuer)})
	if a.Status != pkie.Unknown || !strings.Contains(a.Reason, "issuer cannot be established") {
		t.Fatalf("no verified path: %s %s", a.Status, a.Reason)
	}
	// An unrelated certificate second: the prover cannot compute a key
	// (the certificate did not sign the leaf) and says so.
	if _, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subject([][]byte{leaf.Cert.Raw, unrelated.Cert.Raw})}); err == nil {
		t.Fatal("prover computed a revocation key from an issuer that did not sign the leaf")
	}
	// A prover that proves the key of another (unrevoked) certificate of
	// the same CA, whatever it claims, is caught: the key is recomputed.
	sibling, _ := inter.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}, OmitAKI: true})
	replay := prove(t, p, [][]byte{sibling.Cert.Raw, inter.Cert.Raw})
	a = v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(withIssuer), Proof: replay, VerifiedChains: verified})
	if a.Status != pkie.Fail || !strings.Contains(a.Reason, "proves key") {
		t.Fatalf("another certificate's proof: %s %s", a.Status, a.Reason)
	}
}

func TestConfigs(t *testing.T) {
	for _, bad := range []string{``, `{}`, `{"key":"nope"}`, `{"key":"x","mmd":"1h"}`} {
		if _, err := revocation.NewVerifier([]byte(bad)); err == nil {
			t.Errorf("verifier config %q accepted", bad)
		}
	}
	if _, err := revprover.NewProver(context.Background(), pkie.ProverEnv{DataDir: t.TempDir()}, []byte(`{"authority_url":"http://127.0.0.1:1"}`)); err == nil {
		t.Error("prover config without a key accepted")
	}
}

// FuzzVerify: whatever body the cloud relays for a revocation proof,
// Verify does not panic, never answers Unknown for a body it was given,
// passes only the authority's genuine "not revoked" proof byte for byte,
// and never passes the revoked certificate. The seeds are real proofs
// from a prover mirroring a real authority on loopback.
func FuzzVerify(f *testing.F) {
	ctx := context.Background()
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ttp.Close() })
	root, _ := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("Fuzz CA", testbed.ECDSAP256)
	good, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	revoked, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err := ttp.Revoke(ctx, ca, revoked.Cert.SerialNumber); err != nil {
		f.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		f.Fatal(err)
	}
	p, err := revprover.NewProver(ctx, pkie.ProverEnv{DataDir: f.TempDir()},
		revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		f.Fatal(err)
	}
	proofOf := func(chain [][]byte) []byte {
		pr, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subject(chain)})
		if err != nil {
			f.Fatal(err)
		}
		return pr.Body
	}
	goodBody, revokedBody := proofOf(good.Chain), proofOf(revoked.Chain)
	v, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON())
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now()
	// The genuine proofs verify as they should before anything is fuzzed.
	if a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(good.Chain), Proof: &pkie.Proof{ID: pkie.Revocation, Version: treeproof.Version, Body: goodBody}, Now: now}); a.Status != pkie.Pass {
		f.Fatalf("genuine proof: %s %s", a.Status, a.Reason)
	}
	f.Add(goodBody, false)
	f.Add(goodBody, true)
	f.Add(revokedBody, true)
	f.Add(revokedBody, false)
	f.Add([]byte{1, 2}, false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, body []byte, forRevoked bool) {
		chain := good.Chain
		if forRevoked {
			chain = revoked.Chain
		}
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(chain), Proof: &pkie.Proof{ID: pkie.Revocation, Version: treeproof.Version, Body: body}, Now: now})
		switch {
		case a.Status == pkie.Unknown:
			t.Fatalf("Unknown for a body given: %s", a.Reason)
		case a.Status == pkie.Pass && (forRevoked || !bytes.Equal(body, goodBody)):
			t.Fatalf("passed (revoked leaf %v) a body that is not the genuine proof: %s", forRevoked, a.Reason)
		}
	})
}
