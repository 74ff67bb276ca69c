// Package testpki is the throwaway CA hierarchy pkie's tests, demo and
// benchmarks issue their certificates from: roots, intermediates and leaves
// with keys of the common Web PKI types. It imports nothing of pkie, so
// the tests of the packages the testbed itself is built on (internal/sct,
// internal/ctinclusion) can use it without an import cycle; internal/testbed
// re-exports it.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"time"
)

// KeyAlg names a key type for generated certificates.
type KeyAlg string

// Key types the CA hierarchy can generate.
const (
	ECDSAP256 KeyAlg = "ecdsa-p256"
	ECDSAP384 KeyAlg = "ecdsa-p384"
	RSA2048   KeyAlg = "rsa-2048"
	Ed25519   KeyAlg = "ed25519"
)

// NewKey generates a private key of the given type.
func NewKey(alg KeyAlg) (crypto.Signer, error) {
	switch alg {
	case ECDSAP256, "":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("testpki: unknown key type %q", alg)
}

// CA is a certificate authority of the throwaway hierarchy.
type CA struct {
	Cert   *x509.Certificate
	Key    crypto.Signer
	Parent *CA // nil for a root

	serial atomic.Int64
}

// NewRootCA creates a self-signed root valid from an hour ago for ten years.
func NewRootCA(name string, alg KeyAlg) (*CA, error) {
	return newCA(nil, defaultSubject(name), alg)
}

// NewRootCAWithSubject is NewRootCA with a whole subject name, for studies
// that group roots by organisation.
func NewRootCAWithSubject(subject pkix.Name, alg KeyAlg) (*CA, error) {
	return newCA(nil, subject, alg)
}

// NewIntermediate creates a CA certified by ca.
func (ca *CA) NewIntermediate(name string, alg KeyAlg) (*CA, error) {
	return newCA(ca, defaultSubject(name), alg)
}

// CrossSign certifies other's subject and key under ca, returning a second
// certificate for the same CA: the cross-signing real roots use to chain to
// older ones.
func (ca *CA) CrossSign(other *CA) (*x509.Certificate, error) {
	tmpl := caTemplate(other.Cert.Subject.CommonName, ca.nextSerial())
	tmpl.Subject = other.Cert.Subject
	tmpl.SubjectKeyId = other.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, other.Key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("testpki: cross-signing %s: %w", other.Cert.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

// defaultSubject is a CA's subject when only its common name is given.
func defaultSubject(name string) pkix.Name {
	return pkix.Name{CommonName: name, Organization: []string{name + " Org"}}
}

func caTemplate(name string, serial int64) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               defaultSubject(name),
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

func newCA(parent *CA, subject pkix.Name, alg KeyAlg) (*CA, error) {
	name := subject.CommonName
	key, err := NewKey(alg)
	if err != nil {
		return nil, err
	}
	ca := &CA{Key: key, Parent: parent}
	ca.serial.Store(1)
	tmpl := caTemplate(name, 1)
	tmpl.Subject = subject
	tmpl.SubjectKeyId = keyID(key.Public())
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		tmpl.SerialNumber = big.NewInt(parent.nextSerial())
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("testpki: creating CA %s: %w", name, err)
	}
	ca.Cert, err = x509.ParseCertificate(der)
	return ca, err
}

func keyID(pub crypto.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha1.Sum(der)
	return sum[:]
}

func (ca *CA) nextSerial() int64 { return ca.serial.Add(1) }

// Root returns the root of ca's hierarchy.
func (ca *CA) Root() *CA {
	for ca.Parent != nil {
		ca = ca.Parent
	}
	return ca
}

// Chain returns the DER certificates from ca up to, but not including, its
// root: what a server sends after its leaf.
func (ca *CA) Chain() [][]byte {
	var out [][]byte
	for c := ca; c.Parent != nil; c = c.Parent {
		out = append(out, c.Cert.Raw)
	}
	return out
}

// Pool returns a CertPool holding ca's root.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Root().Cert)
	return p
}

// PEM returns ca's certificate in PEM form.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// LeafOptions describe an end-entity certificate.
type LeafOptions struct {
	DNSNames  []string
	IPs       []net.IP
	Alg       KeyAlg    // default ECDSA P-256
	NotBefore time.Time // default an hour ago
	NotAfter  time.Time // default in 90 days
	Serial    int64     // default the CA's next serial
	// SendRoot makes the chain the server sends include the root.
	SendRoot bool
	// OmitIntermediates makes the server send the leaf alone (an incomplete
	// chain, as misconfigured servers do).
	OmitIntermediates bool
	// OmitAKI issues the leaf without an authority key identifier, as some
	// old CAs did, so that only its issuer's certificate names the key
	// that signed it.
	OmitAKI bool
}

// Leaf is an issued end-entity certificate with its key and the chain a
// server presents.
type Leaf struct {
	Cert  *x509.Certificate
	Key   crypto.Signer
	Chain [][]byte // as sent: leaf first
}

// TLSCertificate returns the leaf as a tls.Certificate serving l.Chain.
func (l *Leaf) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: l.Chain, PrivateKey: l.Key, Leaf: l.Cert}
}

// Issue signs a leaf certificate.
func (ca *CA) Issue(o LeafOptions) (*Leaf, error) {
	key, err := NewKey(o.Alg)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(90 * 24 * time.Hour)
	}
	serial := o.Serial
	if serial == 0 {
		serial = ca.nextSerial()
	}
	cn := ""
	if len(o.DNSNames) > 0 {
		cn = o.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:   big.NewInt(serial),
		Subject:        pkix.Name{CommonName: cn},
		DNSNames:       o.DNSNames,
		IPAddresses:    o.IPs,
		NotBefore:      o.NotBefore,
		NotAfter:       o.NotAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}
	if _, isRSA := key.(*rsa.PrivateKey); isRSA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	parent := ca.Cert
	if o.OmitAKI {
		// CreateCertificate copies the parent's subject key identifier
		// into the leaf unless it has none.
		tmpl.AuthorityKeyId = nil
		p := *ca.Cert
		p.SubjectKeyId = nil
		parent = &p
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("testpki: issuing %v: %w", o.DNSNames, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	chain := [][]byte{der}
	if !o.OmitIntermediates {
		chain = append(chain, ca.Chain()...)
	}
	if o.SendRoot {
		chain = append(chain, ca.Root().Cert.Raw)
	}
	return &Leaf{Cert: cert, Key: key, Chain: chain}, nil
}
