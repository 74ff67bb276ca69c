package oldctlog

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

func FuzzParseLeaf(f *testing.F) {
	in, _ := (&Leaf{Timestamp: 1, Type: X509Entry, Data: []byte{0x30, 0x03, 1, 2, 3}}).Marshal()
	f.Add(in)
	in2, _ := (&Leaf{Timestamp: 2, Type: SortedRootEntry, Data: []byte("note\n")}).Marshal()
	f.Add(in2)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLeaf(b)
		if err != nil {
			return
		}
		out, err := l.Marshal()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("leaf did not round-trip: %x → %x (%v)", b, out, err)
		}
	})
}

func FuzzParseAddChainRequest(f *testing.F) {
	f.Add([]byte(`{"chain":["MAMCAQE="]}`))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x01})
	f.Add(seedChainPEM(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		chain, err := ParseAddChainRequest(b)
		if err != nil {
			return
		}
		if len(chain) == 0 {
			t.Fatal("no error and no certificates")
		}
		l := &Log{}
		path, err := l.checkChain(chain) // must not panic on any input
		if err != nil {
			return
		}
		// Without roots the stored path is a prefix of what was sent.
		if len(path) == 0 || len(path) > len(chain) {
			t.Fatalf("path of %d certificates from a chain of %d", len(path), len(chain))
		}
		for i := range path {
			if !bytes.Equal(path[i], chain[i]) {
				t.Fatalf("path certificate %d is not the submitted one", i)
			}
		}
	})
}

// seedChainPEM returns leaf, issuer, unrelated certificate as PEM, so the
// fuzzer starts from a chain whose issuer path is not the whole chain.
func seedChainPEM(f *testing.F) []byte {
	newCert := func(name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			f.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0),
			BasicConstraintsValid: true, IsCA: parent == nil, KeyUsage: x509.KeyUsageCertSign}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			f.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			f.Fatal(err)
		}
		return c, key
	}
	root, rootKey := newCert("seed root", nil, nil)
	leaf, _ := newCert("seed leaf", root, rootKey)
	other, _ := newCert("seed other", nil, nil)
	var b []byte
	for _, c := range []*x509.Certificate{leaf, root, other} {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}
