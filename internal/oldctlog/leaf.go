package oldctlog

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Entry types of a log leaf. X509Entry is RFC 6962's x509_entry; the sorted
// root uses a value from the range RFC 6962 leaves unassigned, so RFC 6962
// tooling walks past it as an entry of unknown type.
const (
	X509Entry       uint16 = 0
	SortedRootEntry uint16 = 0x8001
)

// Limits on what the log accepts.
const (
	MaxCertBytes  = 64 << 10 // one DER certificate
	MaxChainCerts = 10       // leaf plus up to nine issuers
	maxNoteBytes  = 64 << 10
)

// Leaf is one log entry, decoded from its RFC 6962 MerkleTreeLeaf:
//
//	version (1 byte, 0 = v1) || leaf_type (1 byte, 0 = timestamped_entry) ||
//	timestamp (uint64, ms since the Unix epoch) || entry_type (uint16) ||
//	entry (opaque<1..2^24-1>: the certificate DER for x509_entry; the signed
//	sorted-tree checkpoint note for SortedRootEntry) ||
//	extensions (opaque<0..2^16-1>, always empty here)
//
// The Merkle leaf hash is SHA-256(0x00 || MerkleTreeLeaf), as in RFC 6962,
// so standard tooling verifies inclusion and consistency proofs.
type Leaf struct {
	Timestamp uint64 // ms since the Unix epoch
	Type      uint16
	Data      []byte // certificate DER or checkpoint note
}

// MarshalLeaf encodes l as an RFC 6962 MerkleTreeLeaf.
func (l *Leaf) Marshal() ([]byte, error) {
	if len(l.Data) == 0 || len(l.Data) >= 1<<24 {
		return nil, fmt.Errorf("ctlog: leaf data of %d bytes, want 1 to 2^24-1", len(l.Data))
	}
	b := make([]byte, 0, 15+len(l.Data))
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint64(b, l.Timestamp)
	b = binary.BigEndian.AppendUint16(b, l.Type)
	n := len(l.Data)
	b = append(b, byte(n>>16), byte(n>>8), byte(n))
	b = append(b, l.Data...)
	return append(b, 0, 0), nil
}

// ParseLeaf decodes an RFC 6962 MerkleTreeLeaf, rejecting anything but a v1
// timestamped entry with no extensions and no trailing bytes.
func ParseLeaf(b []byte) (*Leaf, error) {
	if len(b) < 15 {
		return nil, errors.New("ctlog: leaf shorter than 15 bytes")
	}
	if b[0] != 0 || b[1] != 0 {
		return nil, fmt.Errorf("ctlog: leaf version %d type %d, want v1 timestamped_entry", b[0], b[1])
	}
	l := &Leaf{Timestamp: binary.BigEndian.Uint64(b[2:]), Type: binary.BigEndian.Uint16(b[10:])}
	n := int(b[12])<<16 | int(b[13])<<8 | int(b[14])
	rest := b[15:]
	if n == 0 || len(rest) < n+2 {
		return nil, fmt.Errorf("ctlog: leaf entry length %d does not fit %d remaining bytes", n, len(rest))
	}
	l.Data = rest[:n:n]
	ext := rest[n:]
	if ext[0] != 0 || ext[1] != 0 || len(ext) != 2 {
		return nil, errors.New("ctlog: leaf has extensions or trailing bytes")
	}
	return l, nil
}

// LeafHash is the RFC 6962 Merkle leaf hash of an encoded leaf.
func LeafHash(leafInput []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(leafInput)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// CertKey is a certificate's key in the sorted tree: SHA-256 of its DER.
func CertKey(der []byte) [32]byte { return sha256.Sum256(der) }
