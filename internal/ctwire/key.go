package ctwire

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// A sorted tree of certificates (the ct enhancement's) holds one 32-byte
// key per certificate. A certificate reaches a CT log in one of two forms:
// as itself (an x509_entry), or, before issuance, as a precertificate whose
// log entry holds the TBSCertificate the final certificate will carry minus
// its embedded SCT list (a precert_entry, RFC 6962 §3.2). The final
// certificate with its embedded SCTs is usually never logged. The keys
// below let a client holding the final chain and a mirror holding only the
// log's entries agree on one key for the certificate either way:
//
//   - a certificate with no embedded SCT list is keyed by CertKey, the
//     SHA-256 of its DER;
//   - a certificate with an embedded SCT list is keyed by PrecertKey of its
//     issuer's key hash and its TBSCertificate with the SCT list removed:
//     exactly the bytes its precert_entry holds.

// precertKeyDomain separates precertificate keys from certificate keys: a
// DER certificate starts with 0x30, never with this text.
const precertKeyDomain = "pkie ct precert v1\x00"

// oidSCTList is the DER encoding (tag, length, value) of the RFC 6962
// embedded SCT list extension's object identifier, 1.3.6.1.4.1.11129.2.4.2.
var oidSCTList = []byte{0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02}

// CertKey returns the key of a certificate with no embedded SCT list:
// SHA-256 of its DER encoding.
func CertKey(der []byte) [32]byte { return sha256.Sum256(der) }

// PrecertKey returns the key of a certificate logged as a precertificate:
//
//	SHA-256("pkie ct precert v1" || 0x00 || issuerKeyHash || tbs)
//
// where issuerKeyHash is SHA-256 of the final issuer's SubjectPublicKeyInfo
// and tbs the precertificate's TBSCertificate as RFC 6962 §3.2 defines it
// (poison removed), which is also the final certificate's TBSCertificate
// with its SCT list extension removed.
func PrecertKey(issuerKeyHash [32]byte, tbs []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(precertKeyDomain))
	h.Write(issuerKeyHash[:])
	h.Write(tbs)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// ChainKey returns the key a client looks up for a chain, leaf first. If the
// leaf carries an embedded SCT list the key is PrecertKey of SHA-256 of
// chain[1]'s SubjectPublicKeyInfo and the leaf's TBSCertificate without the
// SCT list (an error if chain[1] is missing); otherwise it is
// CertKey(chain[0]).
func ChainKey(chain [][]byte) ([32]byte, error) {
	if len(chain) == 0 || len(chain[0]) == 0 {
		return [32]byte{}, errors.New("ctwire: empty chain")
	}
	tbs, err := certTBS(chain[0])
	if err != nil {
		return [32]byte{}, fmt.Errorf("ctwire: leaf certificate: %w", err)
	}
	stripped, found, err := removeSCTList(tbs)
	if err != nil {
		return [32]byte{}, fmt.Errorf("ctwire: leaf certificate: %w", err)
	}
	if !found {
		return CertKey(chain[0]), nil
	}
	if len(chain) < 2 {
		return [32]byte{}, errors.New("ctwire: the leaf carries embedded SCTs but the chain has no issuer: its key needs the issuer's public key")
	}
	ikh, err := SPKIHash(chain[1])
	if err != nil {
		return [32]byte{}, fmt.Errorf("ctwire: issuer certificate: %w", err)
	}
	return PrecertKey(ikh, stripped), nil
}

// EntryKeys returns the keys a mirror inserts for one log entry: for a
// precert_entry, PrecertKey(e.IssuerKeyHash, e.Certificate); for an
// x509_entry, CertKey of the certificate and, if the certificate carries an
// embedded SCT list and e.ChainIssuerKeyHash is known, also the PrecertKey
// ChainKey computes for it, so a final certificate logged as itself is
// found by the key a client computes. A certificate that does not parse
// gets its CertKey only: the log vouched for those bytes, and a client
// holding them computes the same key.
func EntryKeys(e *Entry) [][32]byte {
	if e.Precert {
		return [][32]byte{PrecertKey(e.IssuerKeyHash, e.Certificate)}
	}
	keys := [][32]byte{CertKey(e.Certificate)}
	if e.ChainIssuerKeyHash == nil {
		return keys
	}
	tbs, err := certTBS(e.Certificate)
	if err != nil {
		return keys
	}
	stripped, found, err := removeSCTList(tbs)
	if err != nil || !found {
		return keys
	}
	return append(keys, PrecertKey(*e.ChainIssuerKeyHash, stripped))
}

// HasEmbeddedSCTs reports whether certificate der carries an RFC 6962
// embedded SCT list extension; false if der does not parse.
func HasEmbeddedSCTs(der []byte) bool {
	tbs, err := certTBS(der)
	if err != nil {
		return false
	}
	_, found, err := removeSCTList(tbs)
	return err == nil && found
}

// SPKIHash returns SHA-256 of certificate der's SubjectPublicKeyInfo: the
// issuer_key_hash RFC 6962 §3.2 records for a precertificate it issued.
func SPKIHash(der []byte) ([32]byte, error) {
	tbs, err := certTBS(der)
	if err != nil {
		return [32]byte{}, err
	}
	s := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !s.ReadASN1(&body, asn1.SEQUENCE) {
		return [32]byte{}, errors.New("malformed TBSCertificate")
	}
	// version [0] EXPLICIT OPTIONAL, serialNumber, signature, issuer,
	// validity, subject, then subjectPublicKeyInfo.
	if !body.SkipOptionalASN1(asn1.Tag(0).Constructed().ContextSpecific()) {
		return [32]byte{}, errors.New("malformed TBSCertificate version")
	}
	for _, what := range []string{"serialNumber", "signature", "issuer", "validity", "subject"} {
		if !body.SkipASN1(anyTag(body)) {
			return [32]byte{}, fmt.Errorf("malformed TBSCertificate %s", what)
		}
	}
	var spki cryptobyte.String
	if !body.ReadASN1Element(&spki, asn1.SEQUENCE) {
		return [32]byte{}, errors.New("malformed subjectPublicKeyInfo")
	}
	return sha256.Sum256(spki), nil
}

// anyTag returns the tag of the next element of s, or 0 (which no
// element of a TBSCertificate has) if s is empty.
func anyTag(s cryptobyte.String) asn1.Tag {
	if len(s) == 0 {
		return 0
	}
	return asn1.Tag(s[0])
}

// certTBS returns the DER TBSCertificate (tag and length included) of
// certificate der, which must be one SEQUENCE with nothing after it.
func certTBS(der []byte) ([]byte, error) {
	s := cryptobyte.String(der)
	var cert cryptobyte.String
	if !s.ReadASN1(&cert, asn1.SEQUENCE) || !s.Empty() {
		return nil, errors.New("not a DER certificate")
	}
	var tbs cryptobyte.String
	if !cert.ReadASN1Element(&tbs, asn1.SEQUENCE) {
		return nil, errors.New("malformed TBSCertificate")
	}
	return tbs, nil
}

// removeSCTList returns tbs with its embedded SCT list extension removed,
// every other byte kept, and whether it had one. More than one SCT list
// extension is an error, as RFC 5280 forbids repeating an extension. If the
// SCT list was the only extension an empty extensions field stays, as
// certificate-transparency-go's precertificate TBSCertificate (which logs
// record, and its RemoveSCTList) keeps it.
func removeSCTList(tbs []byte) ([]byte, bool, error) {
	s := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !s.ReadASN1(&body, asn1.SEQUENCE) || !s.Empty() {
		return nil, false, errors.New("malformed TBSCertificate")
	}
	extTag := asn1.Tag(3).Constructed().ContextSpecific()
	// First find the extensions (the last field) and the SCT list in
	// them; most certificates a mirror reads have none, and are not
	// rebuilt.
	var before []cryptobyte.String
	var kept [][]byte
	found := false
	for !body.Empty() {
		var elem cryptobyte.String
		var tag asn1.Tag
		if !body.ReadAnyASN1Element(&elem, &tag) {
			return nil, false, errors.New("malformed TBSCertificate field")
		}
		if tag != extTag {
			before = append(before, elem)
			continue
		}
		if !body.Empty() {
			return nil, false, errors.New("malformed TBSCertificate: data after the extensions")
		}
		var err error
		if kept, found, err = withoutSCTList(elem); err != nil {
			return nil, false, err
		}
	}
	if !found {
		return tbs, false, nil
	}
	var out cryptobyte.Builder
	out.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for _, e := range before {
			b.AddBytes(e)
		}
		b.AddASN1(extTag, func(b *cryptobyte.Builder) {
			b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
				for _, k := range kept {
					b.AddBytes(k)
				}
			})
		})
	})
	r, err := out.Bytes()
	if err != nil {
		return nil, false, fmt.Errorf("re-encoding TBSCertificate: %w", err)
	}
	return r, true, nil
}

// withoutSCTList parses the [3] extensions element and returns its
// extensions except the SCT list, and whether the SCT list was there.
func withoutSCTList(elem cryptobyte.String) ([][]byte, bool, error) {
	var explicit, seq cryptobyte.String
	if !elem.ReadASN1(&explicit, asn1.Tag(3).Constructed().ContextSpecific()) ||
		!explicit.ReadASN1(&seq, asn1.SEQUENCE) || !explicit.Empty() {
		return nil, false, errors.New("malformed TBSCertificate extensions")
	}
	var kept [][]byte
	found := false
	for !seq.Empty() {
		var ext, body cryptobyte.String
		if !seq.ReadASN1Element(&ext, asn1.SEQUENCE) {
			return nil, false, errors.New("malformed extension")
		}
		body = ext
		var inner, oid cryptobyte.String
		if !body.ReadASN1(&inner, asn1.SEQUENCE) || !inner.ReadASN1Element(&oid, asn1.OBJECT_IDENTIFIER) {
			return nil, false, errors.New("malformed extension")
		}
		if bytes.Equal(oid, oidSCTList) {
			if found {
				return nil, false, errors.New("two embedded SCT list extensions")
			}
			found = true
			continue
		}
		kept = append(kept, ext)
	}
	return kept, found, nil
}

// PrecertTBS returns what a precert_entry for the final certificate der
// records (RFC 6962 §3.2): der's TBSCertificate with its embedded SCT list
// extension removed, every other byte kept, and whether der had an SCT
// list. A client verifying an embedded SCT signs over these bytes.
func PrecertTBS(der []byte) ([]byte, bool, error) {
	tbs, err := certTBS(der)
	if err != nil {
		return nil, false, fmt.Errorf("ctwire: %w", err)
	}
	stripped, found, err := removeSCTList(tbs)
	if err != nil {
		return nil, false, fmt.Errorf("ctwire: %w", err)
	}
	return stripped, found, nil
}
