// Package treeproof is the client half that the ct and revocation
// enhancements share: the binary proof body (a signed sorted-tree head and
// a sorted-tree proof against it), the verifier's pinned keys with its
// cache of verified heads, the checks
// (VerifyCT, VerifyRevocation), and the JSON Response a prover server
// sends over HTTP with the Client that fetches it.
//
// The body is the binary form of Response: the same evidence, so that one
// verifier decides whether it came from the PEC cloud or from `pkie prover
// serve`. The provers that produce both are server code
// (internal/provers/treemirror over internal/prover); nothing here links
// them.
package treeproof

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the body version this package writes and reads; it is also the
// pkie.Proof envelope's Version. Version 1 could carry an SCT of pkie's own
// log (Ed25519, not RFC 6962) for a certificate absent from the tree;
// version 2 carries none, for CT and revocation alike.
const Version = 2

// Limits of a body's fields. A signed head (its note with the bound log
// checkpoint's signature) is under 1 KB; a sorted-tree proof at 100× the PEC
// paper's scale under 2 KB.
const (
	MaxHead  = 8 << 10
	MaxProof = 16 << 10
)

const (
	flagPresent = 1 << 0
	knownFlags  = flagPresent
)

// Body is the proof body of the ct and revocation enhancements. Its trust
// comes from Head's signature alone: Key and Present are the prover's
// claims, which the verifier recomputes and checks against the proof.
type Body struct {
	// Key is the key proven: ctwire.ChainKey of the chain for CT, the
	// revocation key (revocation.CertKey) for revocation.
	Key [32]byte
	// Present is the prover's claim that Key is in the tree.
	Present bool
	// Head is the TTP's signed sorted-tree head (a signed note).
	Head []byte
	// Proof is the sortedtree proof in its binary encoding.
	Proof []byte
}

// MarshalBinary encodes b (version 2, big-endian, docs/formats/proofs.md):
//
//	version       uint8  = 2
//	flags         uint8  bit 0: present; others zero
//	key           [32]byte
//	head length   uint16, 1..MaxHead
//	head          the signed note, as the TTP published it
//	proof length  uint16, 1..MaxProof
//	proof         sortedtree.Proof.MarshalBinary
func (b *Body) MarshalBinary() ([]byte, error) {
	if len(b.Head) == 0 || len(b.Head) > MaxHead {
		return nil, fmt.Errorf("treeproof: signed head of %d bytes, want 1 to %d", len(b.Head), MaxHead)
	}
	if len(b.Proof) == 0 || len(b.Proof) > MaxProof {
		return nil, fmt.Errorf("treeproof: proof of %d bytes, want 1 to %d", len(b.Proof), MaxProof)
	}
	var flags byte
	if b.Present {
		flags |= flagPresent
	}
	out := make([]byte, 0, 2+32+2+len(b.Head)+2+len(b.Proof))
	out = append(out, Version, flags)
	out = append(out, b.Key[:]...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.Head)))
	out = append(out, b.Head...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.Proof)))
	out = append(out, b.Proof...)
	return out, nil
}

// UnmarshalBinary decodes a body encoded by MarshalBinary. It checks shape
// only, strictly (every length, no unknown flag, no trailing byte); whether
// the evidence holds is the verifier's to decide.
func (b *Body) UnmarshalBinary(data []byte) error {
	if len(data) < 2+32+2 {
		return fmt.Errorf("treeproof: body of %d bytes is shorter than its fixed part", len(data))
	}
	if data[0] != Version {
		return fmt.Errorf("treeproof: body version %d, want %d", data[0], Version)
	}
	flags := data[1]
	if flags&^knownFlags != 0 {
		return fmt.Errorf("treeproof: unknown flags %#02x", flags&^knownFlags)
	}
	var out Body
	out.Present = flags&flagPresent != 0
	copy(out.Key[:], data[2:34])
	rest := data[34:]
	var err error
	if out.Head, rest, err = field(rest, "signed head", MaxHead); err != nil {
		return err
	}
	if out.Proof, rest, err = field(rest, "proof", MaxProof); err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("treeproof: %d bytes after the body", len(rest))
	}
	*b = out
	return nil
}

func field(b []byte, what string, max int) (val, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("treeproof: truncated before the %s length", what)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > max {
		return nil, nil, fmt.Errorf("treeproof: %s of %d bytes, want 1 to %d", what, n, max)
	}
	if n > len(b) {
		return nil, nil, fmt.Errorf("treeproof: %s of %d bytes, %d remain", what, n, len(b))
	}
	return append([]byte(nil), b[:n]...), b[n:], nil
}

// FromResponse converts a prover server's JSON response into a body.
func FromResponse(r *Response) (*Body, error) {
	if r == nil {
		return nil, errors.New("treeproof: no response")
	}
	return &Body{Key: r.Key, Present: r.Present, Head: []byte(r.Checkpoint), Proof: r.Proof}, nil
}

// Response returns b as the prover.Response of the PKIE named pkie
// (prover.CT or prover.Revocation), which VerifyCT and VerifyRevocation
// check.
func (b *Body) Response(pkie string) *Response {
	return &Response{Version: ResponseVersion, PKIE: pkie, Key: b.Key, Present: b.Present,
		Checkpoint: string(b.Head), Proof: b.Proof}
}
