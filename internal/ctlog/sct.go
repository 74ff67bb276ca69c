package ctlog

import (
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

func sctMessage(ts uint64, leafHash [32]byte) []byte {
	m := make([]byte, 0, len(sctDomain)+8+32)
	m = append(m, sctDomain...)
	m = binary.BigEndian.AppendUint64(m, ts)
	return append(m, leafHash[:]...)
}

// certLeafHash is the leaf hash of the x509_entry for der at ts.
func certLeafHash(der []byte, ts uint64) ([32]byte, error) {
	in, err := (&Leaf{Timestamp: ts, Type: X509Entry, Data: der}).Marshal()
	if err != nil {
		return [32]byte{}, err
	}
	return LeafHash(in), nil
}

func signSCT(s note.Signer, der []byte, ts uint64) (*SCT, error) {
	lh, err := certLeafHash(der, ts)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(sctMessage(ts, lh))
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing SCT: %w", err)
	}
	return &SCT{Timestamp: ts, Signature: sig}, nil
}

// VerifySCT checks that s is the log's signature over certificate der at
// s.Timestamp. v must be the log's pinned Ed25519 key.
func VerifySCT(v note.Verifier, der []byte, s *SCT) error {
	if s == nil {
		return errors.New("ctlog: no SCT")
	}
	lh, err := certLeafHash(der, s.Timestamp)
	if err != nil {
		return err
	}
	if !v.Verify(sctMessage(s.Timestamp, lh), s.Signature) {
		return fmt.Errorf("ctlog: SCT signature does not verify with key %s", v.Name())
	}
	return nil
}
