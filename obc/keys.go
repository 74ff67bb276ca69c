package obc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Alg names the kind of key a store makes for a new scope.
type Alg string

const (
	// ECDSAP256 is ECDSA on NIST P-256: the default, fast to generate and
	// to sign with, and what every TLS server accepts.
	ECDSAP256 Alg = "ecdsa-p256"
	// Ed25519 keys generate fastest; TLS servers must offer the ed25519
	// signature scheme (Go's do; many others do not).
	Ed25519 Alg = "ed25519"
	// RSA2048 is the smallest RSA size current policy accepts; generating
	// one takes tens to hundreds of milliseconds, which is why the paper
	// (Origin-Bound Certificates, USENIX Security 2012, §6.1) precomputes
	// keys.
	RSA2048 Alg = "rsa-2048"
	// RSA1024 is kept for the paper's comparison (§6.2, Figures 9–14).
	// Go 1.26 generates, signs with and presents and accepts 1024-bit
	// keys in TLS 1.2 and 1.3: 1024 is exactly its floor (smaller keys
	// need GODEBUG=rsa1024min=0). Only GODEBUG=fips140=only refuses them,
	// and with fips140=on a server that verifies client chains drops
	// them; Open then refuses the algorithm. docs/guides/obc.md has the details.
	// Use it only to measure.
	RSA1024 Alg = "rsa-1024"
)

// DefaultAlg is the algorithm of a store whose options name none.
const DefaultAlg = ECDSAP256

// Algs lists every algorithm a store can make, the default first.
func Algs() []Alg { return []Alg{ECDSAP256, Ed25519, RSA2048, RSA1024} }

// ParseAlg parses an algorithm name ("ecdsa-p256", "ed25519", "rsa-2048",
// "rsa-1024").
func ParseAlg(s string) (Alg, error) {
	for _, a := range Algs() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("obc: algorithm %q: want ecdsa-p256, ed25519, rsa-2048 or rsa-1024", s)
}

// GenerateKey makes a new private key of algorithm a.
func (a Alg) GenerateKey() (crypto.Signer, error) {
	switch a {
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case RSA2048, RSA1024:
		bits := 2048
		if a == RSA1024 {
			bits = 1024
		}
		if err := a.usable(); err != nil {
			return nil, err
		}
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return nil, fmt.Errorf("obc: generating an %s key: %w", a, err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("obc: unknown algorithm %q", string(a))
}

// usable reports why this Go cannot make keys of a, if it cannot.
func (a Alg) usable() error {
	if a == RSA1024 && fips140.Enforced() {
		// Say which setting is in the way rather than crypto/rsa's bare
		// "not allowed".
		return errors.New("obc: rsa-1024: Go refuses RSA keys under 2048 bits in FIPS 140-only mode (GODEBUG=fips140=only); use rsa-2048 or unset it")
	}
	return nil
}

// algOf returns the algorithm of key, or an error for a key a store would
// never have made.
func algOf(key crypto.PrivateKey) (Alg, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			return ECDSAP256, nil
		}
		return "", fmt.Errorf("ECDSA key on %s, want P-256", k.Curve.Params().Name)
	case ed25519.PrivateKey:
		return Ed25519, nil
	case *rsa.PrivateKey:
		switch k.N.BitLen() {
		case 2048:
			return RSA2048, nil
		case 1024:
			return RSA1024, nil
		}
		return "", fmt.Errorf("RSA key of %d bits, want 1024 or 2048", k.N.BitLen())
	}
	return "", fmt.Errorf("key of type %T", key)
}

// notAfter is RFC 5280 §4.1.2.5's "no well-defined expiration date": an
// origin-bound certificate lives as long as its key, until the user
// forgets it.
var notAfter = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// selfSign makes the origin-bound certificate of key: self-signed, with
// nothing in it that identifies the user, the machine or even the origin
// (the paper's OBCs carry nothing but the key). Subject and issuer are
// "CN=obc", the serial is random, validity runs from now with no end.
func selfSign(key crypto.Signer, now time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("obc: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		// A zero serial is legal but trips some parsers; +1 keeps it
		// positive and within RFC 5280's 20 octets.
		SerialNumber: serial.Add(serial, big.NewInt(1)),
		Subject:      pkix.Name{CommonName: "obc"},
		// Seconds only: the DER has no finer resolution and a
		// sub-second NotBefore would read back as later than created.
		NotBefore:   now.UTC().Truncate(time.Second),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("obc: signing the certificate: %w", err)
	}
	return der, nil
}

// publicKeyEqual reports whether a and b are the same public key.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// decodeRecord turns a stored record's bytes into a certificate, checking
// everything a damaged or tampered file could get wrong: the key is PKCS#8
// of the recorded algorithm, the certificate parses and carries that key's
// public half, and the times are sane. The error never includes key bytes.
func decodeRecord(alg string, keyDER, certDER []byte, created, lastUsed int64) (*tls.Certificate, *x509.Certificate, error) {
	a, err := ParseAlg(alg)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	got, err := algOf(key)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	if got != a {
		return nil, nil, fmt.Errorf("key is %s, record says %s", got, a)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: %w", err)
	}
	if !publicKeyEqual(signer.Public(), cert.PublicKey) {
		return nil, nil, errors.New("certificate does not carry the record's key")
	}
	if created <= 0 || lastUsed < created {
		return nil, nil, fmt.Errorf("times: created %d, last used %d", created, lastUsed)
	}
	return &tls.Certificate{Certificate: [][]byte{certDER}, PrivateKey: signer, Leaf: cert}, cert, nil
}
