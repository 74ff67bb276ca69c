package revocation_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	. "github.com/pkie/pkie/internal/revocation"
)

// BenchmarkIngestCRL ingests a real signed CRL of the PEC paper's size (Comodo's
// largest: 53,164 revoked serials, 1.9 MB) into a fresh authority: parse,
// signature check, SQLite insert, tree build, signed checkpoint.
func BenchmarkIngestCRL(b *testing.B) {
	ca := newCA(b, "Bench CA")
	const n = 53164
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour)}
	for i := range n {
		s := new(big.Int).SetBytes(append([]byte{0x40}, big.NewInt(int64(i)+1).Bytes()...)) // 16-byte-ish serials
		s.Lsh(s, 96)
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		if _, err := Init(dir, "bench/revocation"); err != nil {
			b.Fatal(err)
		}
		a, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		up, err := a.AddCRL(context.Background(), der, ca.Cert)
		if err != nil || up.Added != n {
			b.Fatal(up, err)
		}
		b.StopTimer()
		a.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(der)), "crl-bytes")
}
