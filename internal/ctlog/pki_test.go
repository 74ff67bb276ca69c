package ctlog

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// testPKI is a throwaway CA hierarchy: a root, an intermediate, and a
// precertificate signing certificate under the intermediate.
type testPKI struct {
	root, inter, preSigner       *x509.Certificate
	rootKey, interKey, preSigKey crypto.Signer
	serial                       int64
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *testPKI) issue(t testing.TB, tmpl *x509.Certificate, parent *x509.Certificate, parentKey crypto.Signer, pub crypto.PublicKey) *x509.Certificate {
	t.Helper()
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	if parent == nil {
		parent, parentKey = tmpl, p.rootKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newPKI(t testing.TB) *testPKI {
	p := &testPKI{rootKey: newKey(t), interKey: newKey(t), preSigKey: newKey(t)}
	nb, na := time.Now().Add(-24*time.Hour), time.Now().Add(10*365*24*time.Hour)
	p.root = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "ctlog test root"}, NotBefore: nb, NotAfter: na,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil, p.rootKey.Public())
	p.inter = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "ctlog test intermediate"}, NotBefore: nb, NotAfter: na,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, p.root, p.rootKey, p.interKey.Public())
	p.preSigner = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "ctlog test precert signer"}, NotBefore: nb, NotAfter: na,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		UnknownExtKeyUsage: []asn1.ObjectIdentifier{oidPrecertSigningEKU}}, p.inter, p.interKey, p.preSigKey.Public())
	return p
}

func (p *testPKI) rootsPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.root.Raw})
}

// leaf issues a server certificate for name under the intermediate (or,
// with preSigner, under the precertificate signing certificate); precert
// adds the poison extension.
func (p *testPKI) leaf(t testing.TB, name string, precert, preSigner bool, notAfter time.Time) [][]byte {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if precert {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: oidCTPoison, Critical: true, Value: asn1.NullBytes}}
	}
	if preSigner {
		c := p.issue(t, tmpl, p.preSigner, p.preSigKey, newKey(t).Public())
		return [][]byte{c.Raw, p.preSigner.Raw, p.inter.Raw, p.root.Raw}
	}
	c := p.issue(t, tmpl, p.inter, p.interKey, newKey(t).Public())
	return [][]byte{c.Raw, p.inter.Raw}
}
