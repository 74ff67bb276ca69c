package sct

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/ctutil"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/pkie/pkie/internal/testbed"
)

// benchChain is a certificate with embedded SCTs and its logs' keys.
type benchChain struct {
	name         string
	leaf, issuer *x509.Certificate
	keys         map[[32]byte]crypto.PublicKey
}

// threeLogChain issues a certificate under a testbed CA with three
// embedded SCTs signed by three fresh P-256 log keys, as a certificate
// meeting Chrome's policy for a long lifetime carries: the entry is
// rebuilt from a first issuance carrying placeholder SCTs, the SCTs are
// signed over it, and the certificate is issued again with them (the SCT
// list is the only difference, and precert_entry leaves it out).
func threeLogChain(t testing.TB) benchChain {
	t.Helper()
	ca, err := testbed.NewRootCA("SCT bench CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := testbed.NewKey(testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "three.logs.test"},
		DNSNames: []string{"three.logs.test"}, NotBefore: time.Unix(1.7e9, 0), NotAfter: time.Unix(1.7e9+200*86400, 0),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	issue := func(scts [][]byte) *x509.Certificate {
		list, err := MarshalList(scts)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := asn1.Marshal(list)
		c := *tmpl
		c.ExtraExtensions = []pkix.Extension{{Id: oidEmbeddedSCTs, Value: v}}
		der, err := x509.CreateCertificate(rand.Reader, &c, ca.Cert, leafKey.Public(), ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	first := issue([][]byte{{0}})
	probe := &SCT{Source: Embedded}
	entry, err := EntryFor(probe, first, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[[32]byte]crypto.PublicKey{}
	var scts [][]byte
	for i := range 3 {
		k, err := testbed.NewKey(testbed.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		spki, _ := x509.MarshalPKIXPublicKey(k.Public())
		s := &SCT{LogID: sha256.Sum256(spki), Timestamp: uint64(1.7e12) + uint64(i), HashAlg: hashSHA256, SigAlg: sigECDSA, Source: Embedded}
		d := sha256.Sum256(entry.SignedInput(s))
		sig, err := k.Sign(rand.Reader, d[:], crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		scts = append(scts, serialize(0, s.LogID, s.Timestamp, nil, hashSHA256, sigECDSA, sig))
		keys[s.LogID] = k.Public()
	}
	return benchChain{name: "testbed, 3 embedded SCTs", leaf: issue(scts), issuer: ca.Cert, keys: keys}
}

func benchChains(b *testing.B) []benchChain {
	g := load(b, fixture1(b, "google 2025 embedded (Xenon2025h2, Yeti2025)"))
	return []benchChain{
		threeLogChain(b),
		{name: "google.com 2025, 2 embedded SCTs", leaf: g.leaf, issuer: g.issuer, keys: g.keys},
	}
}

// TestThreeLogChain checks the benchmark's certificate: its three SCTs
// verify, with pkie and with ctutil.
func TestThreeLogChain(t *testing.T) {
	c := threeLogChain(t)
	scts, errs := Collect(c.leaf, nil, nil)
	if len(errs) > 0 || len(scts) != 3 {
		t.Fatalf("Collect = %d SCTs, %v", len(scts), errs)
	}
	for i, s := range scts {
		if err := pkieVerify(s, c.keys[s.LogID], c.leaf, c.issuer); err != nil {
			t.Errorf("SCT %d: %v", i, err)
		}
		if err := ctutilVerify(t, c.keys[s.LogID], s, c.leaf, c.issuer); err != nil {
			t.Errorf("SCT %d: ctutil: %v", i, err)
		}
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
// one of the real certificate's SCT signatures, on the same key.
func BenchmarkECDSAP256Verify(b *testing.B) {
	c := benchChains(b)[1]
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
