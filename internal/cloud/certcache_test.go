package cloud

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"sync"
	"testing"
	"time"
)

// selfSigned returns the DER of a fresh self-signed certificate (package
// testbed imports this one, so its CA is out of reach here).
func selfSigned(t *testing.T, serial int64) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "www.example.test"},
		DNSNames: []string{"www.example.test"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestCertCache(t *testing.T) {
	var ders [][]byte
	for i := range 3 {
		ders = append(ders, selfSigned(t, int64(i+1)))
	}
	c := newCertCache(2)
	a, err := c.parse(ders[0])
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.parse(append([]byte(nil), ders[0]...))
	if again != a {
		t.Error("the same bytes were parsed twice")
	}
	b, _ := c.parse(ders[1])
	if b == a || b.SerialNumber.Cmp(a.SerialNumber) == 0 {
		t.Error("another certificate's bytes returned the first certificate")
	}
	// A third certificate evicts the least recently used (ders[0]).
	c.parse(ders[2])
	if c.lru.Len() != 2 || len(c.byKey) != 2 {
		t.Fatalf("cache holds %d/%d entries, bound 2", c.lru.Len(), len(c.byKey))
	}
	if fresh, _ := c.parse(ders[0]); fresh == a {
		t.Error("an evicted certificate was still served from the cache")
	}
	bad := append([]byte(nil), ders[1]...)
	bad[len(bad)-1] ^= 0xff // the signature's last byte: still DER, another certificate
	if got, err := c.parse(bad); err == nil && got == b {
		t.Error("modified bytes returned the cached certificate")
	}
	if _, err := c.parse([]byte{0x30, 0x03, 1, 2, 3}); err == nil {
		t.Error("garbage parsed")
	}
	if c.lru.Len() > 2 {
		t.Errorf("cache grew to %d entries", c.lru.Len())
	}
}

func TestCertCacheConcurrent(t *testing.T) {
	der := selfSigned(t, 1)
	c := newCertCache(8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := c.parse(der); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if c.lru.Len() != 1 {
		t.Errorf("%d entries for one certificate", c.lru.Len())
	}
}
