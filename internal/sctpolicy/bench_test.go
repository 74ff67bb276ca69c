package sctpolicy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkChrome is the policy's share of a connection's CT check: three
// embedded SCTs whose signatures were already checked, judged against
// their logs. BenchmarkCeilingECDSAP256Verify, one bare ECDSA P-256
// verification (what checking one SCT's signature costs at least), is the
// same-run ceiling it should stay far below.
func BenchmarkChrome(b *testing.B) {
	w := newWorld(b, []logSpec{usable("G1", "Google"), usable("A1", "OpA"), usable("B1", "OpB")})
	scts := w.checked(b, emb("G1", "A1", "B1"))
	leaf := leafFor(398 * oneDay)
	p := Chrome()
	b.ReportAllocs()
	for b.Loop() {
		if !p.Evaluate(leaf, scts, now).Compliant {
			b.Fatal("not compliant")
		}
	}
}

func BenchmarkApple(b *testing.B) {
	w := newWorld(b, []logSpec{usable("G1", "Google"), usable("A1", "OpA"), usable("B1", "OpB")})
	scts := w.checked(b, emb("G1", "A1", "B1"))
	leaf := leafFor(398 * oneDay)
	p := Apple()
	b.ReportAllocs()
	for b.Loop() {
		if !p.Evaluate(leaf, scts, now).Compliant {
			b.Fatal("not compliant")
		}
	}
}

func BenchmarkCeilingECDSAP256Verify(b *testing.B) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	h := sha256.Sum256([]byte("signed_certificate_timestamp"))
	sig, _ := ecdsa.SignASN1(rand.Reader, k, h[:])
	for b.Loop() {
		if !ecdsa.VerifyASN1(&k.PublicKey, h[:], sig) {
			b.Fatal("verify")
		}
	}
}
