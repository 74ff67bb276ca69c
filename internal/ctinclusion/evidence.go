package ctinclusion

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/crypto/cryptobyte"
)

// Status is what an Evidence says about an SCT's entry.
type Status uint8

const (
	// Included: a tree head the log signed holds the entry; Proof is its
	// audit path at LeafIndex.
	Included Status = 1
	// NotYet: the tree head the log signed does not hold the entry. For a
	// static-ct-api log its size is at most the SCT's leaf_index; for an
	// RFC 6962 log the log answered get-proof-by-hash with "not found" at
	// that size.
	NotYet Status = 2
	// LookupFailed: the log could not be asked (down, slow, refused).
	// Nothing in the Evidence is signed; Message says what failed.
	LookupFailed Status = 3
	// Conflict: a tree head the log signed holds another leaf, Leaf, at
	// LeafIndex, where the SCT's leaf_index says its entry is; Proof is
	// Leaf's audit path. Verify reports it as a *MismatchError.
	Conflict Status = 4
)

// String returns the status as a verdict reason would say it.
func (s Status) String() string {
	switch s {
	case Included:
		return "included"
	case NotYet:
		return "not yet included"
	case LookupFailed:
		return "lookup failed"
	case Conflict:
		return "another entry at its leaf index"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Bounds of an Evidence. A checkpoint is a few hundred bytes (origin,
// size, root, one or two signatures); 8 KiB leaves room for cosignatures.
// 64 hashes is the audit path of a tree of 2^64 leaves.
const (
	MaxCheckpoint = 8 << 10
	MaxProof      = 64
	MaxMessage    = 256
)

// evidenceVersion is the first byte of an Evidence's binary encoding.
const evidenceVersion = 1

// Evidence is what a log says about one SCT's entry, as fetched from the
// log (Fetcher.Fetch) and relayed to a client. Everything but Message is
// either signed by the log (Checkpoint) or checked against what it signed
// (Proof, LeafIndex, Leaf); Verify decides.
type Evidence struct {
	SCTHash [32]byte // sct.SCT.Hash() of the SCT this is about
	LogID   [32]byte
	Status  Status
	// LeafIndex is the entry's index: the SCT's leaf_index for a
	// static-ct-api log, get-proof-by-hash's leaf_index for an RFC 6962
	// log; for NotYet from an RFC 6962 log, the SCT's leaf_index if it
	// has one, else zero.
	LeafIndex uint64
	// Checkpoint is the tree head: for a static-ct-api log the checkpoint
	// note as the log served it, for an RFC 6962 log the STH in binary
	// (MarshalSTH). Empty only for LookupFailed.
	Checkpoint []byte
	// Proof is the audit path of the leaf at LeafIndex: Included and
	// Conflict only.
	Proof [][32]byte
	// Leaf is, for Conflict only, the leaf hash the log's tree holds at
	// LeafIndex.
	Leaf [32]byte
	// Message is, for LookupFailed only, what failed, in the relay's
	// words: unsigned, at most MaxMessage bytes of UTF-8.
	Message string
}

// check reports whether e is well formed for its status: the fields its
// status needs are there, within bounds, and the others are empty, so
// that one Evidence has one encoding.
func (e *Evidence) check() error {
	switch e.Status {
	case Included, NotYet, Conflict:
		if len(e.Checkpoint) == 0 {
			return fmt.Errorf("ctinclusion: %s evidence without a checkpoint", e.Status)
		}
		if e.Message != "" {
			return fmt.Errorf("ctinclusion: %s evidence with a message (only a failed lookup has one)", e.Status)
		}
	case LookupFailed:
		if len(e.Checkpoint) != 0 || len(e.Proof) != 0 || e.LeafIndex != 0 {
			return errors.New("ctinclusion: a failed lookup carries no checkpoint, proof or leaf index")
		}
	default:
		return fmt.Errorf("ctinclusion: unknown evidence status %d", uint8(e.Status))
	}
	if e.Status == NotYet && len(e.Proof) != 0 {
		return errors.New("ctinclusion: not-yet-included evidence with a proof")
	}
	if e.Status != Conflict && e.Leaf != ([32]byte{}) {
		return fmt.Errorf("ctinclusion: %s evidence names a conflicting leaf", e.Status)
	}
	if len(e.Checkpoint) > MaxCheckpoint {
		return fmt.Errorf("ctinclusion: checkpoint of %d bytes, more than %d", len(e.Checkpoint), MaxCheckpoint)
	}
	if len(e.Proof) > MaxProof {
		return fmt.Errorf("ctinclusion: audit path of %d hashes, more than %d", len(e.Proof), MaxProof)
	}
	if len(e.Message) > MaxMessage || !utf8.ValidString(e.Message) {
		return fmt.Errorf("ctinclusion: message must be at most %d bytes of UTF-8", MaxMessage)
	}
	return nil
}

// MarshalBinary encodes e, big-endian:
//
//	version     u8 = 1
//	status      u8
//	sct_hash    [32]
//	log_id      [32]
//	leaf_index  u64
//	checkpoint  u16 length (≤ MaxCheckpoint) + bytes
//	proof       u8 count (≤ MaxProof) + count × [32]
//	leaf        [32]                             Conflict only
//	message     u16 length (≤ MaxMessage) + UTF-8
func (e *Evidence) MarshalBinary() ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 2+32+32+8+2+len(e.Checkpoint)+1+32*len(e.Proof)+32+2+len(e.Message))
	b = append(b, evidenceVersion, byte(e.Status))
	b = append(b, e.SCTHash[:]...)
	b = append(b, e.LogID[:]...)
	b = appendUint64(b, e.LeafIndex)
	b = appendUint16(b, uint16(len(e.Checkpoint)))
	b = append(b, e.Checkpoint...)
	b = append(b, byte(len(e.Proof)))
	for _, h := range e.Proof {
		b = append(b, h[:]...)
	}
	if e.Status == Conflict {
		b = append(b, e.Leaf[:]...)
	}
	b = appendUint16(b, uint16(len(e.Message)))
	b = append(b, e.Message...)
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encodes, and nothing else:
// every length is bounded, the fields must fit the status, and no byte may
// follow.
func (e *Evidence) UnmarshalBinary(data []byte) error {
	s := cryptobyte.String(data)
	var v, status, n uint8
	var out Evidence
	var cp, msg cryptobyte.String
	if !s.ReadUint8(&v) {
		return errors.New("ctinclusion: empty evidence")
	}
	if v != evidenceVersion {
		return fmt.Errorf("ctinclusion: evidence version %d, want %d", v, evidenceVersion)
	}
	if !s.ReadUint8(&status) || !s.CopyBytes(out.SCTHash[:]) || !s.CopyBytes(out.LogID[:]) ||
		!s.ReadUint64(&out.LeafIndex) || !s.ReadUint16LengthPrefixed(&cp) || !s.ReadUint8(&n) {
		return errors.New("ctinclusion: truncated evidence")
	}
	out.Status = Status(status)
	if len(cp) > MaxCheckpoint {
		return fmt.Errorf("ctinclusion: checkpoint of %d bytes, more than %d", len(cp), MaxCheckpoint)
	}
	if n > MaxProof {
		return fmt.Errorf("ctinclusion: audit path of %d hashes, more than %d", n, MaxProof)
	}
	if len(cp) > 0 {
		out.Checkpoint = append([]byte(nil), cp...)
	}
	if n > 0 {
		out.Proof = make([][32]byte, n)
	}
	for i := range out.Proof {
		if !s.CopyBytes(out.Proof[i][:]) {
			return errors.New("ctinclusion: truncated audit path")
		}
	}
	if out.Status == Conflict && !s.CopyBytes(out.Leaf[:]) {
		return errors.New("ctinclusion: truncated conflicting leaf")
	}
	if !s.ReadUint16LengthPrefixed(&msg) {
		return errors.New("ctinclusion: truncated message")
	}
	if !s.Empty() {
		return fmt.Errorf("ctinclusion: %d bytes after the evidence", len(s))
	}
	out.Message = string(msg)
	if err := out.check(); err != nil {
		return err
	}
	*e = out
	return nil
}

func appendUint16(b []byte, v uint16) []byte { return append(b, byte(v>>8), byte(v)) }

func appendUint64(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
