package revocation

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"

	rev "github.com/pkie/pkie/internal/pkies/revocation"
)

// MaxCRLBytes bounds one CRL. The largest public CRLs are tens of
// megabytes; the PEC paper's Comodo list is 1.9 MB.
const MaxCRLBytes = 256 << 20

// ParseCRL parses a CRL in DER or PEM ("X509 CRL") form and checks that
// issuer signed it: the CRL's issuer name is issuer's subject, its
// authority key identifier (if any) is issuer's key identifier, and its
// signature verifies with issuer's key. Only then are its entries trusted.
func ParseCRL(data []byte, issuer *x509.Certificate) (*x509.RevocationList, error) {
	if len(data) == 0 {
		return nil, errors.New("revocation: empty CRL")
	}
	if len(data) > MaxCRLBytes {
		return nil, fmt.Errorf("revocation: CRL of %d bytes exceeds the %d-byte limit", len(data), MaxCRLBytes)
	}
	der := data
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "X509 CRL" {
			return nil, fmt.Errorf("revocation: PEM block %q, want \"X509 CRL\"", blk.Type)
		}
		der = blk.Bytes
	} else if bytes.Contains(data[:min(len(data), 64)], []byte("-----BEGIN")) {
		return nil, errors.New("revocation: malformed PEM")
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("revocation: parsing CRL: %w", err)
	}
	if issuer == nil {
		return nil, errors.New("revocation: no issuer certificate to check the CRL's signature")
	}
	if !bytes.Equal(crl.RawIssuer, issuer.RawSubject) {
		return nil, fmt.Errorf("revocation: CRL issued by %q, not by %q", crl.Issuer, issuer.Subject)
	}
	kid, err := rev.IssuerKeyID(issuer)
	if err != nil {
		return nil, err
	}
	if len(crl.AuthorityKeyId) > 0 && !bytes.Equal(crl.AuthorityKeyId, kid) {
		return nil, fmt.Errorf("revocation: CRL authority key identifier %x is not the issuer's %x", crl.AuthorityKeyId, kid)
	}
	if err := crl.CheckSignatureFrom(issuer); err != nil {
		return nil, fmt.Errorf("revocation: CRL signature does not verify with %q: %w", issuer.Subject, err)
	}
	return crl, nil
}

// ParseSerials reads a serial list: one hexadecimal serial number per line
// (optionally with a 0x prefix or colons between bytes, as openssl prints
// them); blank lines and lines starting with # are skipped.
func ParseSerials(data []byte) ([]*big.Int, error) {
	var out []*big.Int
	for i, line := range strings.Split(string(data), "\n") {
		s := strings.TrimSpace(line)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), ":", "")
		if len(s) > 128 {
			return nil, fmt.Errorf("revocation: line %d: serial longer than 64 bytes", i+1)
		}
		n, ok := new(big.Int).SetString(s, 16)
		if !ok || n.Sign() < 0 {
			return nil, fmt.Errorf("revocation: line %d: %q is not a hexadecimal serial number", i+1, strings.TrimSpace(line))
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseCertificatePEM parses one certificate in PEM or DER form.
func ParseCertificatePEM(data []byte) (*x509.Certificate, error) {
	der := data
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("revocation: PEM block %q, want CERTIFICATE", blk.Type)
		}
		der = blk.Bytes
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("revocation: issuer certificate: %w", err)
	}
	return c, nil
}
