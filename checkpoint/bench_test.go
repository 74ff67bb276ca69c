package checkpoint

import (
	"testing"
	"time"
)

// BenchmarkOpen is the per-root cost a client pays before trusting a proof:
// Ed25519 verification, parsing and the freshness checks.
func BenchmarkOpen(b *testing.B) {
	skey, vkey, _ := GenerateKey(origin)
	s, _ := NewSigner(skey)
	v, _ := NewVerifier(vkey)
	msg, err := Sign(sample(), s)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Open(msg, v, origin, time.Hour, time.Minute, now); err != nil {
			b.Fatal(err)
		}
	}
}
