package treemirror_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/prover"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/provers/treemirror"
	"github.com/pkie/pkie/internal/testbed"
)

// TestHealth: a synced mirror is healthy until its head is older than the
// health maximum age, by default the age past which the verifiers refuse
// its proofs (not the 24 hours a sync still accepts): /healthz turns
// unhealthy when the clients start failing, and not before.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	root, _ := testbed.NewRootCA("Health Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	certs := make([]*x509.Certificate, len(leaf.Chain))
	for i, der := range leaf.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	subj := pkie.Subject{ServerName: "bank.test", Port: 443, Chain: leaf.Chain, Certs: certs}
	// A verifier with the defaults, as clients run it.
	v, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(*pkie.ProveRequest) ([32]byte, error) { return [32]byte{}, nil }
	mirror := func(healthMaxAge time.Duration, now func() time.Time) *treemirror.Prover {
		t.Helper()
		p, err := treemirror.NewProver(ctx, pkie.Revocation, pkie.ProverEnv{DataDir: t.TempDir()},
			treemirror.MirrorConfig{PKIE: prover.Revocation, URL: ttp.RevocationURL, Key: ttp.RevocationKey, HealthMaxAge: healthMaxAge, Now: now},
			keyOf)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clk := time.Now()
	p := mirror(0, func() time.Time { return clk })
	proof, err := revprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()},
		revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	pr, err := proof.Prove(ctx, &pkie.ProveRequest{Subject: subj})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after   time.Duration
		healthy bool
	}{{0, true}, {50 * time.Minute, true}, {70 * time.Minute, false}, {2 * time.Hour, false}} {
		at := clk.Add(tc.after)
		p := mirror(0, func() time.Time { return at })
		herr := p.Health()
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subj, Proof: pr, Now: at})
		if (herr == nil) != tc.healthy {
			t.Errorf("after %v: Health %v, want healthy %v (a default client says %s: %s)", tc.after, herr, tc.healthy, a.Status, a.Reason)
		}
		// What /healthz says is what the clients do.
		if (a.Status == pkie.Pass) != tc.healthy {
			t.Errorf("after %v: a default client says %s (%s), Health %v", tc.after, a.Status, a.Reason, herr)
		}
		if herr != nil && !strings.Contains(herr.Error(), "over the 1h0m0s maximum clients accept") {
			t.Errorf("after %v: %v", tc.after, herr)
		}
	}
	// Configured for clients that accept older heads.
	at := clk.Add(2 * time.Hour)
	if err := mirror(3*time.Hour, func() time.Time { return at }).Health(); err != nil {
		t.Errorf("health_max_age 3h, head 2h old: %v", err)
	}
	// The limit in the enhancements' JSON configurations.
	for _, hm := range []string{"1ns", "3h"} {
		rp, err := revprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()},
			[]byte(`{"authority_url":"`+ttp.RevocationURL+`","authority_key":"`+ttp.RevocationKey+`","health_max_age":"`+hm+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		herr := rp.(interface{ Health() error }).Health()
		if (hm == "1ns") != (herr != nil) || (herr != nil && !strings.Contains(herr.Error(), "over the 1ns maximum")) {
			t.Errorf("health_max_age %s: Health %v", hm, herr)
		}
	}

	// A head 2h old is still accepted at sync (its limit is max_age,
	// 24h), but the mirror is unhealthy; at 25h the sync refuses it too
	// and Health says why.
	clk = clk.Add(2 * time.Hour)
	if _, err := p.Mirror().Sync(ctx); err != nil {
		t.Fatalf("a head 2h old refused at sync (the sync limit is 24h): %v", err)
	}
	if err := p.Health(); err == nil || !strings.Contains(err.Error(), "over the 1h0m0s maximum") {
		t.Fatalf("stale mirror: %v", err)
	}
	clk = clk.Add(23 * time.Hour)
	if _, err := p.Mirror().Sync(ctx); err == nil {
		t.Fatal("a head 25h old was accepted at sync")
	}
	if err := p.Health(); err == nil || !strings.Contains(err.Error(), "last sync") {
		t.Fatalf("stale mirror after a failed sync: %v", err)
	}
	// An unreachable authority does not stop the host: the mirror is
	// built without a tree, unhealthy, and answers ErrUnavailable, never a
	// proof.
	down, err := treemirror.NewProver(ctx, pkie.Revocation, pkie.ProverEnv{}, treemirror.MirrorConfig{PKIE: prover.Revocation, URL: "http://127.0.0.1:1", Key: ttp.RevocationKey}, keyOf)
	if err != nil {
		t.Fatalf("a mirror of an unreachable authority: %v", err)
	}
	if err := down.Health(); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Errorf("a mirror of an unreachable authority: Health %v", err)
	}
	if p, err := down.Prove(ctx, &pkie.ProveRequest{Subject: subj}); !errors.Is(err, pkie.ErrUnavailable) {
		t.Errorf("a mirror of an unreachable authority proved: %v %v", p, err)
	}
	if _, err := treemirror.NewProver(ctx, pkie.Revocation, pkie.ProverEnv{}, treemirror.MirrorConfig{PKIE: prover.Revocation, URL: ttp.RevocationURL, Key: "not a key"}, nil); err == nil {
		t.Error("a mirror with a malformed TTP key was built")
	}
	if _, err := treemirror.NewProver(ctx, pkie.Revocation, pkie.ProverEnv{}, treemirror.MirrorConfig{PKIE: prover.Revocation, URL: ttp.RevocationURL, Key: ttp.RevocationKey, HealthMaxAge: -time.Hour}, nil); err == nil {
		t.Error("a negative health_max_age was accepted")
	}
}
