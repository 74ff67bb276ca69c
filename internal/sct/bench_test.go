package sct

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/ctutil"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"
)

// benchChain is a certificate with embedded SCTs and its logs' keys.
type benchChain struct {
	name         string
	leaf, issuer *x509.Certificate
	keys         map[[32]byte]crypto.PublicKey
}

func benchChains(b *testing.B) []benchChain {
	r := load(b, fixture1(b, "reddit 2021 embedded (Argon2022, Nessie2022, Nimbus2022)"))
	g := load(b, fixture1(b, "google 2025 embedded (Xenon2025h2, Yeti2025)"))
	return []benchChain{
		{name: "reddit.com 2021, 3 embedded SCTs", leaf: r.leaf, issuer: r.issuer, keys: r.keys},
		{name: "google.com 2025, 2 embedded SCTs", leaf: g.leaf, issuer: g.issuer, keys: g.keys},
	}
}

// BenchmarkVerifyConnection is what a client does per connection with the
// certificates crypto/tls parsed: collect the SCTs, rebuild each one's
// entry, verify each signature.
func BenchmarkVerifyConnection(b *testing.B) {
	for _, c := range benchChains(b) {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				scts, errs := Collect(c.leaf, nil, nil)
				if len(errs) > 0 {
					b.Fatal(errs)
				}
				for _, s := range scts {
					e, err := EntryFor(s, c.leaf, c.issuer)
					if err != nil {
						b.Fatal(err)
					}
					if err := Verify(s, e, c.keys[s.LogID]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkVerifyCached is BenchmarkVerifyConnection through a warm Cache.
func BenchmarkVerifyCached(b *testing.B) {
	for _, c := range benchChains(b) {
		b.Run(c.name, func(b *testing.B) {
			cache := NewCache(64)
			for b.Loop() {
				scts, errs := Collect(c.leaf, nil, nil)
				if len(errs) > 0 {
					b.Fatal(errs)
				}
				for _, s := range scts {
					e, err := EntryFor(s, c.leaf, c.issuer)
					if err != nil {
						b.Fatal(err)
					}
					if err := cache.Verify(s, e, c.keys[s.LogID]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkECDSAP256Verify is the ceiling: one bare ECDSA P-256 verify of
// one of the reddit.com certificate's SCT signatures, on its log's key.
func BenchmarkECDSAP256Verify(b *testing.B) {
	c := benchChains(b)[0]
	scts, _ := Collect(c.leaf, nil, nil)
	s := scts[0]
	e, err := EntryFor(s, c.leaf, c.issuer)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256(e.SignedInput(s))
	k := c.keys[s.LogID].(*ecdsa.PublicKey)
	for b.Loop() {
		if !ecdsa.VerifyASN1(k, d[:], s.Signature) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkCTUtilVerifySCT is certificate-transparency-go's route from the
// same crypto/x509 certificates: reparse the chain with ct-go's x509 fork,
// decode each SCT, ctutil.VerifySCT.
func BenchmarkCTUtilVerifySCT(b *testing.B) {
	for _, c := range benchChains(b) {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				leaf, err := ctx509.ParseCertificate(c.leaf.Raw)
				if err != nil {
					b.Fatal(err)
				}
				issuer, err := ctx509.ParseCertificate(c.issuer.Raw)
				if err != nil {
					b.Fatal(err)
				}
				for _, sl := range leaf.SCTList.SCTList {
					var s ct.SignedCertificateTimestamp
					if _, err := cttls.Unmarshal(sl.Val, &s); err != nil {
						b.Fatal(err)
					}
					if err := ctutil.VerifySCT(c.keys[s.LogID.KeyID], []*ctx509.Certificate{leaf, issuer}, &s, true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
