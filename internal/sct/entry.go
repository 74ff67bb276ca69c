package sct

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/pkie/pkie/internal/ctwire"
)

// Entry is the log entry an SCT vouches for (RFC 6962 §3.2): an x509_entry
// of the certificate, or a precert_entry of its precertificate.
type Entry struct {
	// Precert is true for a precert_entry.
	Precert bool
	// Cert is an x509_entry's certificate: the leaf's DER.
	Cert []byte
	// IssuerKeyHash is a precert_entry's issuer_key_hash: SHA-256 of the
	// final issuer's SubjectPublicKeyInfo.
	IssuerKeyHash [32]byte
	// TBS is a precert_entry's tbs_certificate: the leaf's TBSCertificate
	// with its SCT list extension removed.
	TBS []byte
}

// maxCert is the largest certificate or TBSCertificate an entry can hold
// (a u24 length).
const maxCert = 1<<24 - 1

// EntryFor returns the entry s signs for leaf. An embedded SCT signs a
// precert_entry, which needs issuer, the certificate that issued leaf; a
// TLS or OCSP SCT signs an x509_entry of leaf, and issuer may be nil.
//
// The precert_entry is rebuilt from the final certificate alone, even when
// a Precertificate Signing Certificate (RFC 6962 §3.1) issued the
// precertificate: the log then records the precertificate's TBSCertificate
// with its issuer (and authority key identifier) rewritten to the final
// CA's, and issuer_key_hash of the final CA's key. Those are exactly the
// final certificate's fields, so its TBSCertificate without the SCT list
// and its issuer's key are the entry either way.
func EntryFor(s *SCT, leaf, issuer *x509.Certificate) (*Entry, error) {
	if leaf == nil {
		return nil, errors.New("sct: no certificate")
	}
	if s.Source != Embedded {
		if len(leaf.Raw) > maxCert {
			return nil, fmt.Errorf("sct: certificate of %d bytes is too large for a log entry", len(leaf.Raw))
		}
		return &Entry{Cert: leaf.Raw}, nil
	}
	if issuer == nil {
		return nil, errors.New("sct: an embedded SCT signs the precertificate, whose entry needs the issuer's public key, and no issuer was given")
	}
	tbs, found, err := ctwire.PrecertTBS(leaf.Raw)
	if err != nil {
		return nil, fmt.Errorf("sct: rebuilding the precertificate: %w", err)
	}
	if !found {
		return nil, errors.New("sct: an embedded SCT, but the certificate has no SCT list extension")
	}
	if len(tbs) > maxCert {
		return nil, fmt.Errorf("sct: TBSCertificate of %d bytes is too large for a log entry", len(tbs))
	}
	return &Entry{Precert: true, IssuerKeyHash: sha256.Sum256(issuer.RawSubjectPublicKeyInfo), TBS: tbs}, nil
}

// ctwire returns e as the log entry s made of it.
func (e *Entry) ctwire(s *SCT) *ctwire.Entry {
	w := &ctwire.Entry{Timestamp: s.Timestamp, Precert: e.Precert, Extensions: s.Extensions}
	if e.Precert {
		w.Certificate, w.IssuerKeyHash = e.TBS, e.IssuerKeyHash
	} else {
		w.Certificate = e.Cert
	}
	return w
}

// SignedInput returns the digitally-signed struct of RFC 6962 §3.2 that s's
// signature covers: sct_version, signature_type certificate_timestamp, the
// timestamp, the entry and the SCT's extensions. For v1 it is byte for byte
// the MerkleTreeLeaf (version v1 and leaf_type timestamped_entry are both
// 0, and the TimestampedEntry that follows is the same), so it is built by
// the code that builds the leaves a log's tree commits to. It returns nil if
// the entry is empty or too large, which EntryFor does not produce.
func (e *Entry) SignedInput(s *SCT) []byte {
	b, err := e.ctwire(s).MerkleTreeLeaf()
	if err != nil {
		return nil
	}
	return b
}

// LeafHash returns the RFC 6962 §2.1 leaf hash of the MerkleTreeLeaf the
// log adds for s, its extensions included: the hash an inclusion proof is
// about. It is the zero hash if the entry is empty or too large, which
// EntryFor does not produce.
func (e *Entry) LeafHash(s *SCT) [32]byte {
	h, err := e.ctwire(s).LeafHash()
	if err != nil {
		return [32]byte{}
	}
	return h
}
