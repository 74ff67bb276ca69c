package verify_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/verifytest"
	"github.com/pkie/pkie/internal/verifybench"
)

// benchChains issues one path per shape of verifybench.Shapes, once for
// all the benchmarks of a run (RSA key generation dominates otherwise).
func benchChains(b *testing.B) []*verifybench.Chain {
	b.Helper()
	var out []*verifybench.Chain
	for _, s := range verifybench.Shapes {
		ch, err := verifybench.IssueShape(s, "www."+s.Name+".test")
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, ch)
	}
	return out
}

// BenchmarkVerify is one verification per back end and chain shape with a
// real trust store (Mozilla's, the path's root added), as pkie bench
// verify measures it: the trust store is built in every iteration, as a
// back end builds it per request. A helper missing from verifytest.Dirs
// ($PKIE_VERIFIER_DIR, the module's bin) and $PATH is skipped with a log
// line.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	backends, missing, err := verify.Open(ctx, verify.Options{Dirs: verifytest.Dirs()})
	if err != nil {
		b.Fatal(err)
	}
	defer verify.CloseAll(backends)
	for _, m := range missing {
		b.Logf("skipping %s: %s", m.Name, m.Why)
	}
	store, err := verifybench.LoadRoots("mozilla")
	if err != nil {
		b.Fatal(err)
	}
	chains := benchChains(b)
	for _, be := range backends {
		b.Run(be.Name(), func(b *testing.B) {
			for _, ch := range chains {
				req := &verify.Request{Roots: store.With(ch.Root.Cert.Raw), Chain: ch.Sent(), Host: "www." + ch.Shape.Name + ".test",
					Time: time.Now(), Purpose: verify.Server}
				b.Run(ch.Shape.Name, func(b *testing.B) {
					var phases verify.Phases
					for b.Loop() {
						res, err := be.Verify(ctx, req)
						if err != nil {
							b.Fatal(err)
						}
						if !res.Valid {
							b.Fatalf("%s rejected %s: %s: %s", be.Name(), ch.Shape.Name, res.Code, res.Reason)
						}
						phases.Roots += res.Phases.Roots
						phases.Verify += res.Phases.Verify + res.Phases.Parallel
					}
					b.ReportMetric(float64(phases.Roots.Nanoseconds())/float64(b.N), "roots-ns/op")
					b.ReportMetric(float64(phases.Verify.Nanoseconds())/float64(b.N), "verify-ns/op")
				})
			}
		})
	}
}

// BenchmarkSignatures is the ceiling under BenchmarkVerify: the path's
// signature checks alone (x509.Certificate.CheckSignatureFrom per link),
// one after another and one goroutine each.
func BenchmarkSignatures(b *testing.B) {
	chains := benchChains(b)
	for _, mode := range []struct {
		name  string
		check func([]*x509.Certificate) error
	}{{"serial", verifybench.CheckSignaturesSerial}, {"parallel", verifybench.CheckSignaturesParallel}} {
		b.Run(mode.name, func(b *testing.B) {
			for _, ch := range chains {
				b.Run(ch.Shape.Name, func(b *testing.B) {
					for b.Loop() {
						if err := mode.check(ch.Path); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
