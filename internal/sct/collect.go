package sct

import (
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
	"golang.org/x/crypto/ocsp"
)

// OIDs of the two X.509 extensions that carry an SCT list (RFC 6962 §3.3).
var (
	oidEmbeddedSCTs = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	oidOCSPSCTs     = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 5}
)

// FromCertificate returns the SCTs embedded in leaf (RFC 6962 §3.3: the
// extension's value is an OCTET STRING wrapping a
// SignedCertificateTimestampList), or nil, nil if it has none.
func FromCertificate(leaf *x509.Certificate) ([]*SCT, error) {
	if leaf == nil {
		return nil, errors.New("sct: no certificate")
	}
	for _, e := range leaf.Extensions {
		if e.Id.Equal(oidEmbeddedSCTs) {
			// crypto/x509 rejects a repeated extension, so this is the one.
			return parseExtension(e.Value, Embedded)
		}
	}
	return nil, nil
}

// parseExtension parses an SCT list extension's value: an OCTET STRING
// holding the TLS-encoded list, with nothing after it.
func parseExtension(value []byte, src Source) ([]*SCT, error) {
	in := cryptobyte.String(value)
	var list cryptobyte.String
	if !in.ReadASN1(&list, cbasn1.OCTET_STRING) || !in.Empty() {
		return nil, fmt.Errorf("sct: %s SCT list extension is not one OCTET STRING", src)
	}
	return ParseList(list, src)
}

// FromOCSP returns the SCTs in a DER OCSP response's SingleResponse for
// leaf (the one whose serial number is leaf's), from its extension
// 1.3.6.1.4.1.11129.2.4.5; nil, nil if that SingleResponse has none.
//
// The OCSP response's own signature is not checked here, and need not be
// for the SCTs' sake: an SCT delivered by OCSP signs an x509_entry of the
// leaf itself, so Verify with the log's key is what makes it valid, whoever
// relayed it. (Whether the response says the certificate is good is the
// revocation check's business.)
func FromOCSP(resp []byte, leaf *x509.Certificate) ([]*SCT, error) {
	if leaf == nil {
		return nil, errors.New("sct: no certificate")
	}
	r, err := ocsp.ParseResponseForCert(resp, leaf, nil)
	if err != nil {
		return nil, fmt.Errorf("sct: OCSP response: %w", err)
	}
	for _, e := range r.Extensions {
		if e.Id.Equal(oidOCSPSCTs) {
			return parseExtension(e.Value, OCSP)
		}
	}
	return nil, nil
}

// Collect gathers leaf's SCTs from the three places they are delivered:
// embedded in leaf, the TLS extension's SCTs as received (Go's
// tls.ConnectionState.SignedCertificateTimestamps), and a stapled OCSP
// response (nil: none). One malformed source does not hide the others: its
// error is returned beside the SCTs the other sources gave. The TLS
// extension carries at most MaxListSCTs SCTs; more is an error and none of
// them are used.
func Collect(leaf *x509.Certificate, tls [][]byte, ocspResp []byte) ([]*SCT, []error) {
	var out []*SCT
	var errs []error
	if leaf == nil {
		return nil, []error{errors.New("sct: no certificate")}
	}
	if s, err := FromCertificate(leaf); err != nil {
		errs = append(errs, err)
	} else {
		out = append(out, s...)
	}
	if len(tls) > MaxListSCTs {
		errs = append(errs, fmt.Errorf("sct: TLS extension has %d SCTs, more than %d", len(tls), MaxListSCTs))
	} else {
		for i, raw := range tls {
			s, err := Parse(raw, TLSExtension)
			if err != nil {
				errs = append(errs, fmt.Errorf("tls SCT %d: %w", i+1, err))
				continue
			}
			out = append(out, s)
		}
	}
	if len(ocspResp) > 0 {
		if s, err := FromOCSP(ocspResp, leaf); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, s...)
		}
	}
	return out, errs
}
