package ct_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/pkie/pkie"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/sctworld"
)

// BenchmarkProveCached measures the prover's answer for a certificate
// whose two embedded SCTs' inclusion evidence it has cached (what nearly
// every request for a site costs once the site has been seen): parsing
// the SCTs, rebuilding the precertificate entry they sign, the cache
// lookups and encoding the body. The log list's logs are not asked.
// Beside it, one ECDSA P-256 verification in the same run.
func BenchmarkProveCached(b *testing.B) {
	ctx := context.Background()
	w, err := sctworld.New(ctx, sctworld.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	pi, err := ctprover.NewProver(ctx, pkie.ProverEnv{}, ctprover.ProverConfig{LogList: w.ListPath}.JSON())
	if err != nil {
		b.Fatal(err)
	}
	p := pi.(*ctprover.Prover)
	req := &pkie.ProveRequest{Subject: siteSubject(w.Site(sctworld.Good))}
	if _, err := p.Prove(ctx, req); err != nil {
		b.Fatal(err)
	}
	lookups := p.Lookups()
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Prove(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		if p.Lookups() != lookups {
			b.Fatal("the benchmark's requests were looked up at the logs")
		}
	})
	// The same-run ceiling: one ECDSA P-256 verification, what checking
	// one SCT's signature costs (and what a cached answer avoids).
	b.Run("ceiling-one-ecdsa-p256-verify", func(b *testing.B) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		h := sha256.Sum256([]byte("an SCT's signed input"))
		sig, _ := ecdsa.SignASN1(rand.Reader, k, h[:])
		for b.Loop() {
			if !ecdsa.VerifyASN1(&k.PublicKey, h[:], sig) {
				b.Fatal("verify")
			}
		}
	})
}
