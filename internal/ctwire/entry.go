// Package ctwire holds what a CT log's monitors and pkie's clients must
// agree on byte for byte, with no server code: the log entries a mirror
// reads (static-ct-api data tiles, RFC 6962 get-entries), the SCT
// extension static-ct-api adds (leaf_index), and the 32-byte keys of the
// sorted tree of certificates (CertKey, PrecertKey, ChainKey, EntryKeys)
// that a mirror inserts and a client looks up.
package ctwire

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// Entry is one CT log entry as a monitor reads it: from a static-ct-api
// data tile (C2SP static-ct-api, "TileLeaf") or from an RFC 6962
// get-entries answer (leaf_input and extra_data).
type Entry struct {
	// Index is the entry's position in the log. A data tile carries it in
	// the leaf_index extension; an RFC 6962 entry takes it from the
	// get-entries request.
	Index uint64
	// Timestamp is the entry's timestamp, ms since the Unix epoch.
	Timestamp uint64
	// Precert is true for a precert_entry, false for an x509_entry.
	Precert bool
	// Certificate is the certificate's DER for an x509_entry, and the
	// precertificate's TBSCertificate (RFC 6962 §3.2) for a precert_entry.
	Certificate []byte
	// IssuerKeyHash is a precert_entry's issuer_key_hash: SHA-256 of the
	// final issuer's SubjectPublicKeyInfo.
	IssuerKeyHash [32]byte
	// Extensions is the TimestampedEntry's CtExtensions, as logged.
	Extensions []byte
	// Precertificate is a precert_entry's submitted precertificate (DER).
	Precertificate []byte
	// ChainFingerprints are SHA-256 of the chain's certificates after the
	// (pre)certificate, in order. A data tile carries them; for an RFC 6962
	// entry they are computed from extra_data.
	ChainFingerprints [][32]byte
	// ChainIssuerKeyHash is, when known, SHA-256 of the SubjectPublicKeyInfo
	// of the chain's first certificate after an x509_entry's certificate (its
	// issuer). The log's Merkle tree does not commit to it: a data tile names
	// the issuer by fingerprint only (the follower fetches it and fills
	// this in); an RFC 6962 entry's extra_data holds it. EntryKeys uses it.
	ChainIssuerKeyHash *[32]byte
}

// maxTileEntries is the width of a full static-ct-api data tile.
const maxTileEntries = 256

// ParseDataTile parses a static-ct-api data tile (C2SP static-ct-api,
// "TileLeaf"): up to 256 entries, each with a leaf_index extension, indices
// consecutive, and nothing after the last. The caller checks that the first
// index and the count are the ones the tile's path and the checkpoint call
// for, and that the entries hash to the tree.
func ParseDataTile(b []byte) ([]Entry, error) {
	s := cryptobyte.String(b)
	entries := make([]Entry, 0, 16)
	for !s.Empty() {
		if len(entries) == maxTileEntries {
			return nil, fmt.Errorf("ctwire: data tile: %d bytes after %d entries", len(s), maxTileEntries)
		}
		var e Entry
		var entryType uint16
		var cert, ext, fps cryptobyte.String
		if !s.ReadUint64(&e.Timestamp) || !s.ReadUint16(&entryType) {
			return nil, fmt.Errorf("ctwire: data tile: entry %d truncated", len(entries))
		}
		switch entryType {
		case 0:
			if !s.ReadUint24LengthPrefixed(&cert) || !s.ReadUint16LengthPrefixed(&ext) {
				return nil, fmt.Errorf("ctwire: data tile: x509_entry %d truncated", len(entries))
			}
		case 1:
			var pre cryptobyte.String
			if !s.CopyBytes(e.IssuerKeyHash[:]) || !s.ReadUint24LengthPrefixed(&cert) ||
				!s.ReadUint16LengthPrefixed(&ext) || !s.ReadUint24LengthPrefixed(&pre) {
				return nil, fmt.Errorf("ctwire: data tile: precert_entry %d truncated", len(entries))
			}
			if len(pre) == 0 {
				return nil, fmt.Errorf("ctwire: data tile: precert_entry %d has an empty precertificate", len(entries))
			}
			e.Precert = true
			e.Precertificate = pre
		default:
			return nil, fmt.Errorf("ctwire: data tile: entry %d has unknown entry type %d", len(entries), entryType)
		}
		if !s.ReadUint16LengthPrefixed(&fps) {
			return nil, fmt.Errorf("ctwire: data tile: entry %d: chain fingerprints truncated", len(entries))
		}
		if len(cert) == 0 {
			return nil, fmt.Errorf("ctwire: data tile: entry %d has an empty certificate", len(entries))
		}
		if len(fps)%32 != 0 {
			return nil, fmt.Errorf("ctwire: data tile: entry %d: chain fingerprints of %d bytes, not a multiple of 32", len(entries), len(fps))
		}
		for len(fps) > 0 {
			var f [32]byte
			copy(f[:], fps[:32])
			e.ChainFingerprints = append(e.ChainFingerprints, f)
			fps = fps[32:]
		}
		e.Certificate = cert
		e.Extensions = ext
		idx, err := LeafIndex(ext)
		if err != nil {
			return nil, fmt.Errorf("ctwire: data tile: entry %d: %w", len(entries), err)
		}
		if len(entries) > 0 && idx != entries[len(entries)-1].Index+1 {
			return nil, fmt.Errorf("ctwire: data tile: entry %d has leaf index %d after %d", len(entries), idx, entries[len(entries)-1].Index)
		}
		if len(entries) == 0 && idx%maxTileEntries != 0 {
			return nil, fmt.Errorf("ctwire: data tile: first entry has leaf index %d, not a multiple of %d", idx, maxTileEntries)
		}
		e.Index = idx
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, errors.New("ctwire: data tile: empty")
	}
	return entries, nil
}

// LeafIndex returns the leaf_index of static-ct-api CtExtensions: exactly
// one extension, of type leaf_index (0), holding a 40-bit big-endian index.
func LeafIndex(ext []byte) (uint64, error) {
	s := cryptobyte.String(ext)
	var typ uint8
	var data cryptobyte.String
	if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&data) {
		return 0, errors.New("no leaf_index extension")
	}
	if typ != 0 {
		return 0, fmt.Errorf("extension of type %d, want leaf_index (0)", typ)
	}
	if !s.Empty() {
		return 0, errors.New("extensions after leaf_index")
	}
	if len(data) != 5 {
		return 0, fmt.Errorf("leaf_index of %d bytes, want 5", len(data))
	}
	return uint64(data[0])<<32 | uint64(data[1])<<24 | uint64(data[2])<<16 | uint64(data[3])<<8 | uint64(data[4]), nil
}

// MerkleTreeLeaf returns the entry's RFC 6962 MerkleTreeLeaf: version v1,
// timestamped_entry, the TimestampedEntry with its extensions as logged.
func (e *Entry) MerkleTreeLeaf() ([]byte, error) {
	if len(e.Certificate) == 0 || len(e.Certificate) >= 1<<24 {
		return nil, fmt.Errorf("ctwire: entry %d: certificate of %d bytes, want 1 to 2^24-1", e.Index, len(e.Certificate))
	}
	if len(e.Extensions) >= 1<<16 {
		return nil, fmt.Errorf("ctwire: entry %d: extensions of %d bytes, want at most 2^16-1", e.Index, len(e.Extensions))
	}
	n := 2 + 8 + 2 + 3 + len(e.Certificate) + 2 + len(e.Extensions)
	if e.Precert {
		n += 32
	}
	m := make([]byte, 0, n)
	m = append(m, 0, 0) // version v1, leaf_type timestamped_entry
	m = appendUint64(m, e.Timestamp)
	if e.Precert {
		m = append(m, 0, 1)
		m = append(m, e.IssuerKeyHash[:]...)
	} else {
		m = append(m, 0, 0)
	}
	l := len(e.Certificate)
	m = append(m, byte(l>>16), byte(l>>8), byte(l))
	m = append(m, e.Certificate...)
	m = append(m, byte(len(e.Extensions)>>8), byte(len(e.Extensions)))
	return append(m, e.Extensions...), nil
}

// LeafHash returns the entry's RFC 6962 Merkle leaf hash, SHA-256(0x00 ||
// MerkleTreeLeaf): the hash the log's tree commits to.
func (e *Entry) LeafHash() ([32]byte, error) {
	m, err := e.MerkleTreeLeaf()
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(m)
	var r [32]byte
	h.Sum(r[:0])
	return r, nil
}

func appendUint64(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// ParseLeafEntry parses one RFC 6962 get-entries leaf (§4.6): leaf_input,
// a MerkleTreeLeaf, and extra_data, the certificate_chain of an x509_entry
// or the PrecertChainEntry of a precert_entry. Both must be consumed
// exactly. index is the entry's position, which the request gave.
//
// It is written here rather than taken from certificate-transparency-go
// (ct.RawLogEntryFromLeaf) so that clients linking this package do not link
// ct-go's x509 and asn1 forks; the tests check it against ct-go.
func ParseLeafEntry(index uint64, leafInput, extraData []byte) (*Entry, error) {
	e := &Entry{Index: index}
	s := cryptobyte.String(leafInput)
	var version, leafType uint8
	var entryType uint16
	var cert, ext cryptobyte.String
	if !s.ReadUint8(&version) || !s.ReadUint8(&leafType) {
		return nil, fmt.Errorf("ctwire: entry %d: leaf_input truncated", index)
	}
	if version != 0 || leafType != 0 {
		return nil, fmt.Errorf("ctwire: entry %d: leaf version %d type %d, want v1 timestamped_entry", index, version, leafType)
	}
	if !s.ReadUint64(&e.Timestamp) || !s.ReadUint16(&entryType) {
		return nil, fmt.Errorf("ctwire: entry %d: leaf_input truncated", index)
	}
	switch entryType {
	case 0:
	case 1:
		e.Precert = true
		if !s.CopyBytes(e.IssuerKeyHash[:]) {
			return nil, fmt.Errorf("ctwire: entry %d: leaf_input truncated", index)
		}
	default:
		return nil, fmt.Errorf("ctwire: entry %d: unknown entry type %d", index, entryType)
	}
	if !s.ReadUint24LengthPrefixed(&cert) || !s.ReadUint16LengthPrefixed(&ext) {
		return nil, fmt.Errorf("ctwire: entry %d: leaf_input truncated", index)
	}
	if !s.Empty() {
		return nil, fmt.Errorf("ctwire: entry %d: %d bytes after the MerkleTreeLeaf", index, len(s))
	}
	if len(cert) == 0 {
		return nil, fmt.Errorf("ctwire: entry %d: empty certificate", index)
	}
	e.Certificate, e.Extensions = cert, ext

	x := cryptobyte.String(extraData)
	if e.Precert {
		var pre cryptobyte.String
		if !x.ReadUint24LengthPrefixed(&pre) || len(pre) == 0 {
			return nil, fmt.Errorf("ctwire: entry %d: extra_data: precertificate truncated or empty", index)
		}
		e.Precertificate = pre
	}
	var chain cryptobyte.String
	if !x.ReadUint24LengthPrefixed(&chain) || !x.Empty() {
		return nil, fmt.Errorf("ctwire: entry %d: extra_data: malformed certificate chain", index)
	}
	for first := true; !chain.Empty(); first = false {
		var c cryptobyte.String
		if !chain.ReadUint24LengthPrefixed(&c) || len(c) == 0 {
			return nil, fmt.Errorf("ctwire: entry %d: extra_data: malformed chain certificate", index)
		}
		e.ChainFingerprints = append(e.ChainFingerprints, sha256.Sum256(c))
		if first && !e.Precert {
			if h, err := SPKIHash(c); err == nil {
				e.ChainIssuerKeyHash = &h
			}
		}
	}
	return e, nil
}
