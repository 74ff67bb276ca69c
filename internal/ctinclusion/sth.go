package ctinclusion

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// MaxSTHSignature bounds an STH's DigitallySigned signature: an RSA-4096
// signature is 512 bytes, an ECDSA P-256 one about 72.
const MaxSTHSignature = 1024

// STH is an RFC 6962 signed tree head (§3.5), as get-sth serves it (§4.3).
type STH struct {
	TreeSize  uint64
	Timestamp uint64 // ms since the Unix epoch
	Root      [32]byte
	// Signature is tree_head_signature: a TLS DigitallySigned (hash and
	// signature algorithms, then the u16-length-prefixed signature) over
	// the TreeHeadSignature of the fields above.
	Signature []byte
}

// Time returns the STH's timestamp.
func (s *STH) Time() time.Time { return time.UnixMilli(int64(s.Timestamp)) }

// MarshalSTH encodes s, big-endian: tree_size u64, timestamp u64,
// sha256_root_hash [32], then tree_head_signature as it is (a
// DigitallySigned, at most MaxSTHSignature bytes of signature).
func MarshalSTH(s *STH) ([]byte, error) {
	if _, _, _, err := parseDigitallySigned(s.Signature); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8+8+32+len(s.Signature))
	b = appendUint64(b, s.TreeSize)
	b = appendUint64(b, s.Timestamp)
	b = append(b, s.Root[:]...)
	return append(b, s.Signature...), nil
}

// ParseSTH decodes what MarshalSTH encodes, and nothing else.
func ParseSTH(b []byte) (*STH, error) {
	s := cryptobyte.String(b)
	var sth STH
	if !s.ReadUint64(&sth.TreeSize) || !s.ReadUint64(&sth.Timestamp) || !s.CopyBytes(sth.Root[:]) {
		return nil, errors.New("ctinclusion: truncated STH")
	}
	if _, _, _, err := parseDigitallySigned(s); err != nil {
		return nil, err
	}
	sth.Signature = append([]byte(nil), s...)
	return &sth, nil
}

// parseDigitallySigned splits a TLS DigitallySigned (RFC 5246 §4.7) that
// must fill b exactly.
func parseDigitallySigned(b []byte) (hashAlg, sigAlg uint8, sig []byte, err error) {
	s := cryptobyte.String(b)
	var v cryptobyte.String
	if !s.ReadUint8(&hashAlg) || !s.ReadUint8(&sigAlg) || !s.ReadUint16LengthPrefixed(&v) {
		return 0, 0, nil, errors.New("ctinclusion: truncated tree head signature")
	}
	if !s.Empty() {
		return 0, 0, nil, fmt.Errorf("ctinclusion: %d bytes after the tree head signature", len(s))
	}
	if len(v) == 0 || len(v) > MaxSTHSignature {
		return 0, 0, nil, fmt.Errorf("ctinclusion: tree head signature of %d bytes, want 1 to %d", len(v), MaxSTHSignature)
	}
	return hashAlg, sigAlg, v, nil
}

// treeHeadSignature returns the TreeHeadSignature struct (RFC 6962 §3.5)
// an STH's signature covers: version v1, signature_type tree_hash.
func (s *STH) treeHeadSignature() []byte {
	b := make([]byte, 0, 2+8+8+32)
	b = append(b, 0, 1)
	b = appendUint64(b, s.Timestamp)
	b = appendUint64(b, s.TreeSize)
	return append(b, s.Root[:]...)
}

// TLS HashAlgorithm and SignatureAlgorithm values (RFC 5246 §7.4.1.4.1)
// the CT logs use.
const (
	hashSHA256 = 4
	sigRSA     = 1
	sigECDSA   = 3
)

// verify checks s's signature with key: ECDSA with SHA-256 or RSA PKCS#1
// v1.5 with SHA-256, the two RFC 6962 allows, and the algorithm must be
// the key's.
func (s *STH) verify(key crypto.PublicKey) error {
	hashAlg, sigAlg, sig, err := parseDigitallySigned(s.Signature)
	if err != nil {
		return err
	}
	if hashAlg != hashSHA256 {
		return fmt.Errorf("STH signed with hash algorithm %d, want SHA-256 (4)", hashAlg)
	}
	digest := sha256.Sum256(s.treeHeadSignature())
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if sigAlg != sigECDSA {
			return fmt.Errorf("STH signature algorithm %d, but the log's key is ECDSA (3)", sigAlg)
		}
		if !ecdsa.VerifyASN1(k, digest[:], sig) {
			return errSTHSignature
		}
	case *rsa.PublicKey:
		if sigAlg != sigRSA {
			return fmt.Errorf("STH signature algorithm %d, but the log's key is RSA (1)", sigAlg)
		}
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) != nil {
			return errSTHSignature
		}
	default:
		return fmt.Errorf("log key of type %T; want ECDSA or RSA", key)
	}
	return nil
}

var errSTHSignature = errors.New("the STH's signature does not verify with the log's key")
