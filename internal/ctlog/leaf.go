package ctlog

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"
)

// Entry types of RFC 6962 §3.1.
const (
	x509Entry    = 0
	precertEntry = 1
)

// TileLeaf is one entry of a static-ct-api data tile:
//
//	struct {
//	    TimestampedEntry timestamped_entry;
//	    select (entry_type) {
//	        case x509_entry: Fingerprint certificate_chain<0..2^16-1>;
//	        case precert_entry: PrecertExtraData;
//	    } extra_data;
//	} TileLeaf;
type TileLeaf struct {
	// TimestampedEntry is the RFC 6962 TimestampedEntry as encoded: the
	// MerkleTreeLeaf is 0x00 0x00 followed by it, and an SCT's signed
	// CertificateTimestamp has the same bytes.
	TimestampedEntry []byte
	Timestamp        uint64
	IsPrecert        bool
	// Certificate is the x509 entry's certificate, or the precert entry's
	// TBSCertificate.
	Certificate   []byte
	IssuerKeyHash [32]byte // precert entries only
	Extensions    []byte
	// PreCertificate is the submitted precertificate (precert entries).
	PreCertificate []byte
	// Chain holds the SHA-256 fingerprints of the issuers, leaf's first.
	Chain [][32]byte
}

// MerkleTreeLeaf returns the RFC 6962 MerkleTreeLeaf of the entry.
func (l *TileLeaf) MerkleTreeLeaf() []byte {
	return append([]byte{0, 0}, l.TimestampedEntry...)
}

// LeafIndex returns the entry's static-ct-api leaf_index extension.
func (l *TileLeaf) LeafIndex() (uint64, error) { return ParseLeafIndex(l.Extensions) }

// maxTileLeaves bounds a data tile: 256 entries.
const maxTileLeaves = 256

// ParseDataTile parses a static-ct-api data tile (an entry bundle): at
// most 256 TileLeaf entries and nothing else.
func ParseDataTile(b []byte) ([]TileLeaf, error) {
	s := cryptobyte.String(b)
	var out []TileLeaf
	for !s.Empty() {
		if len(out) == maxTileLeaves {
			return nil, fmt.Errorf("ctlog: data tile holds more than %d entries", maxTileLeaves)
		}
		l, err := readTileLeaf(&s)
		if err != nil {
			return nil, fmt.Errorf("ctlog: data tile entry %d: %w", len(out), err)
		}
		out = append(out, l)
	}
	return out, nil
}

func readTileLeaf(s *cryptobyte.String) (TileLeaf, error) {
	var l TileLeaf
	start := *s
	var typ uint16
	var cert, ext cryptobyte.String
	if !s.ReadUint64(&l.Timestamp) || !s.ReadUint16(&typ) {
		return l, errors.New("truncated")
	}
	switch typ {
	case x509Entry:
	case precertEntry:
		l.IsPrecert = true
		var ikh []byte
		if !s.ReadBytes(&ikh, 32) {
			return l, errors.New("truncated issuer key hash")
		}
		copy(l.IssuerKeyHash[:], ikh)
	default:
		return l, fmt.Errorf("unknown entry type %d", typ)
	}
	if !s.ReadUint24LengthPrefixed(&cert) || len(cert) == 0 {
		return l, errors.New("truncated or empty certificate")
	}
	if !s.ReadUint16LengthPrefixed(&ext) {
		return l, errors.New("truncated extensions")
	}
	l.Certificate, l.Extensions = cert, ext
	l.TimestampedEntry = start[:len(start)-len(*s)]
	if l.IsPrecert {
		var pre cryptobyte.String
		if !s.ReadUint24LengthPrefixed(&pre) || len(pre) == 0 {
			return l, errors.New("truncated or empty pre_certificate")
		}
		l.PreCertificate = pre
	}
	var fps cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&fps) || len(fps)%32 != 0 {
		return l, errors.New("truncated fingerprints")
	}
	for !fps.Empty() {
		var fp [32]byte
		fps.CopyBytes(fp[:])
		l.Chain = append(l.Chain, fp)
	}
	return l, nil
}

// leafIndexExtension is the static-ct-api CTExtensions holding one
// leaf_index extension: type 0, 5 bytes, a 40-bit big-endian index.
func leafIndexExtension(idx uint64) []byte {
	return []byte{0, 0, 5, byte(idx >> 32), byte(idx >> 24), byte(idx >> 16), byte(idx >> 8), byte(idx)}
}

// ParseLeafIndex returns the leaf_index extension of an SCT's or entry's
// CTExtensions; it must be there, exactly once, as static-ct-api says.
func ParseLeafIndex(ext []byte) (uint64, error) {
	s := cryptobyte.String(ext)
	var idx uint64
	found := false
	for !s.Empty() {
		var typ uint8
		var data cryptobyte.String
		if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&data) {
			return 0, errors.New("ctlog: malformed CT extensions")
		}
		if typ != 0 {
			continue
		}
		if found || len(data) != 5 {
			return 0, errors.New("ctlog: malformed leaf_index extension")
		}
		found = true
		idx = uint64(data[0])<<32 | uint64(binary.BigEndian.Uint32(data[1:]))
	}
	if !found {
		return 0, errors.New("ctlog: no leaf_index extension")
	}
	return idx, nil
}

// noteTimestamp returns the timestamp of the RFC6962NoteSignature on a
// verified note (the first signature, the log's).
func noteTimestamp(n *note.Note) (uint64, error) {
	if len(n.Sigs) == 0 {
		return 0, errors.New("ctlog: checkpoint without a verified signature")
	}
	b, err := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	if err != nil || len(b) < 4+8 {
		return 0, errors.New("ctlog: malformed checkpoint signature")
	}
	return binary.BigEndian.Uint64(b[4:]), nil
}

// noteSignature returns the timestamp and the DigitallySigned
// TreeHeadSignature of the log's RFC6962NoteSignature on a verified note.
func noteSignature(n *note.Note) (uint64, []byte, error) {
	ts, err := noteTimestamp(n)
	if err != nil {
		return 0, nil, err
	}
	b, _ := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	return ts, b[12:], nil
}
