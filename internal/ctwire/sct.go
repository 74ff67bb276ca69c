// Package ctwire holds what the CT log and its clients must agree on byte
// for byte and a client links: the log's signed certificate timestamp and
// the message it signs. The log (internal/ctlog) signs SCTs; the ct
// enhancement's verifier checks them. Keeping the format here lets a
// client check an SCT without linking the log.
package ctwire

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// SCT is the log's signed promise that it accepted a certificate at a time
// and will merge it into the sorted tree within its maximum merge delay: the
// role of RFC 6962's signed certificate timestamp.
//
// The signature is Ed25519, by the log's checkpoint key, over
//
//	"pkie/ct/sct/v1" || 0x00 || timestamp (uint64 big-endian, ms) || leaf hash (32 bytes)
//
// where the leaf hash is the RFC 6962 leaf hash of the x509_entry leaf built
// from the certificate and the timestamp. A verifier that holds the
// certificate rebuilds the leaf hash itself, so the SCT cannot be moved to
// another certificate or time. The domain prefix holds a NUL byte, which no
// signed note (checkpoint) text may contain, so neither kind of signature can
// be passed off as the other.
type SCT struct {
	Timestamp uint64 `json:"timestamp"` // ms since the Unix epoch
	Signature []byte `json:"signature"` // Ed25519, 64 bytes
}

const sctDomain = "pkie/ct/sct/v1\x00"

// Time returns the SCT's timestamp.
func (s *SCT) Time() time.Time { return time.UnixMilli(int64(s.Timestamp)) }

// SignedMessage returns the bytes an SCT for certificate der at ts (ms
// since the Unix epoch) signs.
func SignedMessage(der []byte, ts uint64) ([]byte, error) {
	lh, err := certLeafHash(der, ts)
	if err != nil {
		return nil, err
	}
	m := make([]byte, 0, len(sctDomain)+8+32)
	m = append(m, sctDomain...)
	m = binary.BigEndian.AppendUint64(m, ts)
	return append(m, lh[:]...), nil
}

// certLeafHash is the RFC 6962 Merkle leaf hash, SHA-256(0x00 ||
// MerkleTreeLeaf), of the v1 timestamped x509_entry for der at ts with no
// extensions: the leaf the log appends for the certificate.
func certLeafHash(der []byte, ts uint64) ([32]byte, error) {
	if len(der) == 0 || len(der) >= 1<<24 {
		return [32]byte{}, fmt.Errorf("ctwire: certificate of %d bytes, want 1 to 2^24-1", len(der))
	}
	h := sha256.New()
	var hdr [16]byte
	// leaf hash prefix 0x00, version v1 (0), leaf_type timestamped_entry (0)
	binary.BigEndian.PutUint64(hdr[3:], ts)
	// entry_type x509_entry (0) at hdr[11:13]
	hdr[13], hdr[14], hdr[15] = byte(len(der)>>16), byte(len(der)>>8), byte(len(der))
	h.Write(hdr[:])
	h.Write(der)
	h.Write([]byte{0, 0}) // no extensions
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// VerifySCT checks that s is the log's signature over certificate der at
// s.Timestamp. v must be the log's pinned Ed25519 key.
func VerifySCT(v note.Verifier, der []byte, s *SCT) error {
	if s == nil {
		return errors.New("ctwire: no SCT")
	}
	m, err := SignedMessage(der, s.Timestamp)
	if err != nil {
		return err
	}
	if !v.Verify(m, s.Signature) {
		return fmt.Errorf("ctwire: SCT signature does not verify with key %s", v.Name())
	}
	return nil
}
