package revocation

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
)

// Key is a revoked certificate's key in the sorted tree:
//
//	SHA-256( uint8(len(issuerKeyID)) || issuerKeyID || serial )
//
// issuerKeyID is the issuing CA's key identifier (see IssuerKeyID); serial
// is the certificate serial number as an unsigned big-endian integer with no
// leading zero bytes (big.Int.Bytes: serial 0 is the empty string). The
// length byte keeps (issuer, serial) pairs from colliding by shifting bytes
// between the two fields.
//
// Keying on the issuer's key identifier rather than its name matches what a
// client finds in the certificate itself (its authority key identifier) and
// keeps two CAs that share a name apart.
func Key(issuerKeyID []byte, serial *big.Int) ([32]byte, error) {
	if len(issuerKeyID) == 0 || len(issuerKeyID) > 255 {
		return [32]byte{}, fmt.Errorf("revocation: issuer key identifier of %d bytes, want 1 to 255", len(issuerKeyID))
	}
	if serial == nil || serial.Sign() < 0 {
		return [32]byte{}, errors.New("revocation: negative or missing serial number")
	}
	h := sha256.New()
	h.Write([]byte{byte(len(issuerKeyID))})
	h.Write(issuerKeyID)
	h.Write(serial.Bytes())
	var k [32]byte
	h.Sum(k[:0])
	return k, nil
}

// IssuerKeyID returns a CA certificate's key identifier: its subject key
// identifier extension if present, else SHA-1 of its subjectPublicKey bits
// (RFC 5280 §4.2.1.2, method 1, which is what CAs put there).
func IssuerKeyID(issuer *x509.Certificate) ([]byte, error) {
	if len(issuer.SubjectKeyId) > 0 {
		return issuer.SubjectKeyId, nil
	}
	var spki struct {
		Algorithm asn1.RawValue
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(issuer.RawSubjectPublicKeyInfo, &spki); err != nil {
		return nil, fmt.Errorf("revocation: issuer public key: %w", err)
	}
	sum := sha1.Sum(spki.PublicKey.Bytes)
	return sum[:], nil
}

// CertKey returns the key under which leaf would be listed as revoked. It
// takes the issuer key identifier from leaf's authority key identifier, or,
// if leaf has none, from issuer, which must then be the certificate that
// signed leaf.
//
// A caller must establish issuer from a verified path to a trusted root,
// not from whatever a server sent beside the leaf: the signature check here
// proves only that issuer holds the signing key, while the key identifier
// IssuerKeyID reads may be the subject key identifier that issuer's own
// (unverified) certificate asserts.
func CertKey(leaf, issuer *x509.Certificate) ([32]byte, error) {
	kid := leaf.AuthorityKeyId
	if len(kid) == 0 {
		if issuer == nil {
			return [32]byte{}, errors.New("revocation: certificate has no authority key identifier and no issuer was given")
		}
		if err := leaf.CheckSignatureFrom(issuer); err != nil {
			return [32]byte{}, fmt.Errorf("revocation: certificate has no authority key identifier and the given issuer did not sign it: %w", err)
		}
		var err error
		if kid, err = IssuerKeyID(issuer); err != nil {
			return [32]byte{}, err
		}
	}
	return Key(kid, leaf.SerialNumber)
}
