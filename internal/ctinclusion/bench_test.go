package ctinclusion

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// benchSize is the tree of the benchmarks: about two billion entries, the
// size of the largest CT logs, so the audit path is 31 hashes.
const benchSize = 1<<31 + 123456789

var benchLeaf = [32]byte{0xbe}

func benchEvidence(b *testing.B, kind loglist.Kind) (*synthLog, *Evidence) {
	s := newSynthLog(b, kind, "bench.test/log")
	return s, s.included(b, benchLeaf, benchSize/3, benchSize, time.Now())
}

// BenchmarkVerifyInclusion is a client's cost for one SCT's inclusion
// evidence seen for the first time: the checkpoint's signature (one ECDSA
// P-256 verify, and building the log's note verifier from its key) and
// the audit path.
func BenchmarkVerifyInclusion(b *testing.B) {
	for _, kind := range []loglist.Kind{loglist.Static, loglist.RFC6962} {
		b.Run(string(kind), func(b *testing.B) {
			s, e := benchEvidence(b, kind)
			for b.Loop() {
				if _, err := Verify(e, s.log, benchLeaf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyInclusionWarm is the same with the checkpoint verified
// before (a Verifier's cache, by the checkpoint's bytes): what a client
// pays on every later connection while the log's checkpoint is the same.
func BenchmarkVerifyInclusionWarm(b *testing.B) {
	s, e := benchEvidence(b, loglist.Static)
	v := NewVerifier(16)
	if _, err := v.Verify(e, s.log, benchLeaf); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := v.Verify(e, s.log, benchLeaf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareAuditPath is the warm ceiling: merkle's VerifyInclusion
// alone on the same audit path.
func BenchmarkBareAuditPath(b *testing.B) {
	_, e := benchEvidence(b, loglist.Static)
	p := make([][]byte, len(e.Proof))
	for i := range e.Proof {
		p[i] = e.Proof[i][:]
	}
	root, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, e.LeafIndex, benchSize, benchLeaf[:], p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(p)), "hashes")
	for b.Loop() {
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, e.LeafIndex, benchSize, benchLeaf[:], p, root); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkECDSAP256Verify is the cold ceiling: one bare ECDSA P-256
// verification of a SHA-256 digest.
func BenchmarkECDSAP256Verify(b *testing.B) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("tree head"))
	sig, err := ecdsa.SignASN1(rand.Reader, key, d[:])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !ecdsa.VerifyASN1(&key.PublicKey, d[:], sig) {
			b.Fatal("no")
		}
	}
}

// BenchmarkVerifyInclusionWitnessed is BenchmarkVerifyInclusion's static
// case under a witness policy of 2 of 3, the checkpoint cosigned by all
// three: the log's signature, two cosignature/v1 verifications (the
// quorum; one Ed25519 verify each, BenchmarkEd25519Verify) and the audit
// path.
func BenchmarkVerifyInclusionWitnessed(b *testing.B) {
	s, e := benchEvidence(b, loglist.Static)
	ws := []*testWitness{newTestWitness(b, "w1.bench.test"), newTestWitness(b, "w2.bench.test"), newTestWitness(b, "w3.bench.test")}
	text := noteText(b, e.Checkpoint)
	var lines []string
	for _, w := range ws {
		lines = append(lines, w.cosignature(b, text, false))
	}
	e = cosigned(e, lines...)
	o := VerifyOptions{Witnesses: mustWitnesses(b, 2, ws[0].cosig, ws[1].cosig, ws[2].cosig)}
	for b.Loop() {
		if r, err := VerifyWith(e, s.log, benchLeaf, o); err != nil || r.Cosigners != 2 {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkVerifyInclusionWitnessedWarm is the same with the checkpoint
// verified before under the same policy: the cache, keyed on the policy,
// spares the signatures.
func BenchmarkVerifyInclusionWitnessedWarm(b *testing.B) {
	s, e := benchEvidence(b, loglist.Static)
	w := newTestWitness(b, "w1.bench.test")
	e = cosigned(e, w.cosignature(b, noteText(b, e.Checkpoint), false))
	v, o := NewVerifier(16), VerifyOptions{Witnesses: mustWitnesses(b, 1, w.cosig)}
	for b.Loop() {
		if _, err := v.VerifyWith(e, s.log, benchLeaf, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519Verify is the ceiling of one cosignature: one bare
// Ed25519 verification of a message as long as a cosigned checkpoint's.
func BenchmarkEd25519Verify(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 140)
	sig := ed25519.Sign(priv, msg)
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("no")
		}
	}
}
