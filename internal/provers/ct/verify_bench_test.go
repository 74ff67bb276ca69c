package ct_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/ct"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/testbed"
)

// BenchmarkVerify measures a client's verification of one CT proof from
// the prover: Warm with one verifier, whose head cache holds the signed
// head after the first call (what every connection after the first pays:
// decoding and the audit path), Cold with a fresh verifier per call, which
// opens the signed head every time (two Ed25519 verifications, as the PEC
// paper's client paid per proof, 189–237 µs in its Table 2). The log holds
// 1,024 certificates; `pkie bench pec` measures the same at the paper's
// tree sizes.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	root, _ := testbed.NewRootCA("CT Bench Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("CT Bench CA", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: b.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		b.Fatal(err)
	}
	defer ttp.Close()
	var chains [][][]byte
	for range 1024 {
		l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
		if err != nil {
			b.Fatal(err)
		}
		chains = append(chains, l.Chain)
	}
	if err := ttp.LogChains(ctx, chains); err != nil {
		b.Fatal(err)
	}
	p, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: b.TempDir()}, ttp.CTProverConfig().JSON())
	if err != nil {
		b.Fatal(err)
	}
	defer p.(interface{ Close() error }).Close()
	certs := make([]*x509.Certificate, len(chains[7]))
	for i, der := range chains[7] {
		certs[i], _ = x509.ParseCertificate(der)
	}
	subj := pkie.Subject{ServerName: "www.example.test", Port: 443, Chain: chains[7], Certs: certs}
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subj})
	if err != nil {
		b.Fatal(err)
	}
	config := ttp.CTVerifierConfig().JSON()
	verify := func(b *testing.B, v pkie.Verifier) {
		if a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subj, Proof: proof, Now: time.Now()}); a.Status != pkie.Pass {
			b.Fatalf("%s: %s", a.Status, a.Reason)
		}
	}
	b.Run("warm", func(b *testing.B) {
		v, err := ct.NewVerifier(config)
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
			v, err := ct.NewVerifier(config)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			verify(b, v)
		}
	})
}
