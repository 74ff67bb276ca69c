package ct

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

// BodyVersion is the version of the ct proof body this package writes and
// reads; it is also the pkie.Proof envelope's Version for ct. Version 2 was
// the sorted-tree body alone (treeproof.Body, which revocation still uses);
// version 3 adds the inclusion evidence of the certificate's SCTs.
const BodyVersion = 3

// Limits of a body. A certificate carries two to five SCTs; sixteen is the
// most a prover proves for one request, the same bound it puts on the SCTs
// a client sends. Each part is bounded by its own decoder as well.
const (
	// MaxInclusions bounds the evidence a body carries.
	MaxInclusions = 16
	// MaxEvidence bounds one evidence's encoding: a checkpoint or STH
	// (under 1 KB), an audit path of at most 64 hashes and a 256-byte
	// message fit well within it.
	MaxEvidence = 8 << 10
)

const (
	flagTree       = 1 << 0
	knownBodyFlags = flagTree
)

// Body is the ct proof body: the sorted-tree mirror's presence or absence
// proof (Tree, for a certificate with no SCT) and the inclusion evidence of
// the certificate's SCTs. Nothing in it is trusted for having been sent:
// the tree's head is signed by the mirror and bound to the log's
// checkpoint, and each evidence's checkpoint or STH is verified with the
// log's key from the client's own log list (ctinclusion.Verify).
type Body struct {
	// Tree is the mirror's sorted-tree proof, or nil.
	Tree *treeproof.Body
	// Inclusions is the evidence for each SCT the prover looked up, at
	// most MaxInclusions. An SCT whose log the prover does not know has
	// none.
	Inclusions []ctinclusion.Evidence
}

// MarshalBinary encodes b (version 3, big-endian, docs/formats/proofs.md):
//
//	version   uint8  = 3
//	flags     uint8  bit 0: a sorted-tree part follows; others zero
//	[tree     uint16 length, 1..65535, + treeproof.Body (version 2)]  with flag bit 0 only
//	count     uint8, 0..MaxInclusions
//	count ×   (uint16 length, 1..MaxEvidence, + ctinclusion.Evidence binary)
//
// The whole encoding must fit a proof envelope (pkie.MaxProofBody).
func (b *Body) MarshalBinary() ([]byte, error) {
	if len(b.Inclusions) > MaxInclusions {
		return nil, fmt.Errorf("ct body: %d inclusion evidences, at most %d", len(b.Inclusions), MaxInclusions)
	}
	out := []byte{BodyVersion, 0}
	if b.Tree != nil {
		out[1] |= flagTree
		tree, err := b.Tree.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("ct body: sorted-tree part: %w", err)
		}
		if out, err = appendPart(out, tree, "sorted-tree part", 0xffff); err != nil {
			return nil, err
		}
	}
	out = append(out, byte(len(b.Inclusions)))
	for i := range b.Inclusions {
		e, err := b.Inclusions[i].MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("ct body: inclusion evidence %d: %w", i, err)
		}
		if out, err = appendPart(out, e, fmt.Sprintf("inclusion evidence %d", i), MaxEvidence); err != nil {
			return nil, err
		}
	}
	if len(out) > pkie.MaxProofBody {
		return nil, fmt.Errorf("ct body: %d bytes, over the %d a proof may carry", len(out), pkie.MaxProofBody)
	}
	return out, nil
}

func appendPart(out, part []byte, what string, max int) ([]byte, error) {
	if len(part) == 0 || len(part) > max {
		return nil, fmt.Errorf("ct body: %s of %d bytes, want 1 to %d", what, len(part), max)
	}
	out = binary.BigEndian.AppendUint16(out, uint16(len(part)))
	return append(out, part...), nil
}

// UnmarshalBinary decodes a body encoded by MarshalBinary. It checks shape
// only, strictly (every length and count, no unknown flag, each part by
// its own decoder, no trailing byte); whether the evidence holds is the
// verifier's to decide.
func (b *Body) UnmarshalBinary(data []byte) error {
	if len(data) > pkie.MaxProofBody {
		return fmt.Errorf("ct body: %d bytes, over the %d a proof may carry", len(data), pkie.MaxProofBody)
	}
	if len(data) < 3 {
		return fmt.Errorf("ct body: %d bytes is shorter than its fixed part", len(data))
	}
	if data[0] != BodyVersion {
		return fmt.Errorf("ct body: version %d, want %d", data[0], BodyVersion)
	}
	flags := data[1]
	if flags&^knownBodyFlags != 0 {
		return fmt.Errorf("ct body: unknown flags %#02x", flags&^knownBodyFlags)
	}
	rest := data[2:]
	var out Body
	if flags&flagTree != 0 {
		part, r, err := readPart(rest, "sorted-tree part", 0xffff)
		if err != nil {
			return err
		}
		out.Tree = new(treeproof.Body)
		if err := out.Tree.UnmarshalBinary(part); err != nil {
			return fmt.Errorf("ct body: sorted-tree part: %w", err)
		}
		rest = r
	}
	if len(rest) < 1 {
		return errors.New("ct body: truncated before the inclusion count")
	}
	n := int(rest[0])
	rest = rest[1:]
	if n > MaxInclusions {
		return fmt.Errorf("ct body: %d inclusion evidences, at most %d", n, MaxInclusions)
	}
	if n > 0 {
		out.Inclusions = make([]ctinclusion.Evidence, n)
	}
	for i := range n {
		what := fmt.Sprintf("inclusion evidence %d", i)
		part, r, err := readPart(rest, what, MaxEvidence)
		if err != nil {
			return err
		}
		// A copy: the evidence may keep slices of what it decodes, and
		// data is the caller's.
		if err := out.Inclusions[i].UnmarshalBinary(bytes.Clone(part)); err != nil {
			return fmt.Errorf("ct body: %s: %w", what, err)
		}
		rest = r
	}
	if len(rest) != 0 {
		return fmt.Errorf("ct body: %d bytes after the body", len(rest))
	}
	*b = out
	return nil
}

func readPart(b []byte, what string, max int) (part, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("ct body: truncated before the %s length", what)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > max {
		return nil, nil, fmt.Errorf("ct body: %s of %d bytes, want 1 to %d", what, n, max)
	}
	if n > len(b) {
		return nil, nil, fmt.Errorf("ct body: %s of %d bytes, %d remain", what, n, len(b))
	}
	return b[:n], b[n:], nil
}
