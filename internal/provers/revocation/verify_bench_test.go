package revocation_test

import (
	"context"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/revocation"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// BenchmarkVerify measures a client's verification of one revocation
// proof (the common case: not revoked) against an authority that has
// revoked the PEC paper's 53,164 serials: Warm with one verifier, whose
// head cache holds the signed head after the first call, Cold with a
// fresh verifier per call, which opens the signed head every time.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer ttp.Close()
	root, _ := testbed.NewRootCA("Revocation Bench Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("Revocation Bench CA", testbed.ECDSAP256)
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err != nil {
		b.Fatal(err)
	}
	serials := make([]*big.Int, 53164)
	for i := range serials {
		serials[i] = big.NewInt(int64(1<<40 + i))
	}
	if err := ttp.Revoke(ctx, ca, serials...); err != nil {
		b.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	p, err := revprover.NewProver(ctx, pkie.ProverEnv{DataDir: b.TempDir()},
		revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		b.Fatal(err)
	}
	subj := subject(leaf.Chain)
	chains, err := subj.Certs[0].Verify(x509.VerifyOptions{Roots: root.Pool(), Intermediates: poolOf(subj.Certs[1:]), DNSName: "bank.test"})
	if err != nil {
		b.Fatal(err)
	}
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subj})
	if err != nil {
		b.Fatal(err)
	}
	config := revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON()
	verify := func(b *testing.B, v pkie.Verifier) {
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subj, Proof: proof, Now: time.Now(), VerifiedChains: chains})
		if a.Status != pkie.Pass {
			b.Fatalf("%s: %s", a.Status, a.Reason)
		}
	}
	b.Run("warm", func(b *testing.B) {
		v, err := revocation.NewVerifier(config)
		if err != nil {
			b.Fatal(err)
		}
		verify(b, v) // fills the head cache
		for b.Loop() {
			verify(b, v)
		}
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			v, err := revocation.NewVerifier(config)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			verify(b, v)
		}
	})
}

func poolOf(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
