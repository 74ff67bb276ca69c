package revocation

import (
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseCRL feeds arbitrary bytes to the CRL ingest path, with a real
// issuer. Seeds are a valid CRL and its issuer from testdata (written by
// TestWriteFuzzSeeds if missing).
func FuzzParseCRL(f *testing.F) {
	issuerDER, err1 := os.ReadFile(filepath.Join("testdata", "issuer.der"))
	crl, err2 := os.ReadFile(filepath.Join("testdata", "crl.der"))
	if err1 != nil || err2 != nil {
		f.Fatal("testdata missing: run go test -run TestWriteFuzzSeeds -update ./internal/revocation")
	}
	issuer, err := x509.ParseCertificate(issuerDER)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(crl)
	f.Add([]byte("-----BEGIN X509 CRL-----\nMAA=\n-----END X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCRL(b, issuer)
		if err != nil {
			return
		}
		if c.CheckSignatureFrom(issuer) != nil {
			t.Fatal("accepted a CRL whose signature does not verify")
		}
	})
}

func FuzzParseSerials(f *testing.F) {
	f.Add([]byte("0a\n# c\n0x0b\n01:00\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ss, err := ParseSerials(b)
		if err != nil {
			return
		}
		for _, s := range ss {
			if s.Sign() < 0 || s.Cmp(new(big.Int).Lsh(big.NewInt(1), 512)) >= 0 {
				t.Fatalf("serial %v out of range", s)
			}
		}
	})
}
