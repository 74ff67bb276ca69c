package pkie

import (
	"encoding/binary"
	"fmt"
)

// Proof is one enhancement's proof: self-contained, versioned bytes whose
// meaning belongs to the enhancement.
type Proof struct {
	ID      ID
	Version uint8
	Body    []byte
}

// Limits of the encodings in this package.
const (
	// MaxProofBody bounds a proof's body. A CT or revocation proof at 100×
	// the PEC paper's scale is under 2 KB with its signed head; a notary
	// answer vouching for many certificates under 8 KB.
	MaxProofBody = 32 << 10
	// MaxParams bounds one enhancement's parameters.
	MaxParams = 1024
	// MaxRequests bounds how many enhancements one request names.
	MaxRequests = 32
)

// proofHeader is the envelope's fixed part: id (2), version (1), body
// length (3).
const proofHeader = 6

// MarshalBinary encodes the proof as id (uint16) ‖ version (uint8) ‖ body
// length (uint24) ‖ body, all big-endian.
func (p *Proof) MarshalBinary() ([]byte, error) {
	if len(p.Body) > MaxProofBody {
		return nil, fmt.Errorf("pkie: proof body of %d bytes exceeds %d", len(p.Body), MaxProofBody)
	}
	b := make([]byte, proofHeader, proofHeader+len(p.Body))
	binary.BigEndian.PutUint16(b, uint16(p.ID))
	b[2] = p.Version
	putUint24(b[3:], len(p.Body))
	return append(b, p.Body...), nil
}

// UnmarshalBinary decodes a proof encoded by MarshalBinary. Trailing bytes
// are an error: an envelope means exactly one proof.
func (p *Proof) UnmarshalBinary(b []byte) error {
	if len(b) < proofHeader {
		return fmt.Errorf("pkie: proof of %d bytes is shorter than its %d-byte header", len(b), proofHeader)
	}
	n := uint24(b[3:])
	if n > MaxProofBody {
		return fmt.Errorf("pkie: proof body of %d bytes exceeds %d", n, MaxProofBody)
	}
	if len(b)-proofHeader != n {
		return fmt.Errorf("pkie: proof header says %d body bytes, %d follow", n, len(b)-proofHeader)
	}
	p.ID = ID(binary.BigEndian.Uint16(b))
	p.Version = b[2]
	p.Body = append([]byte(nil), b[proofHeader:]...)
	return nil
}

// Request names one enhancement a client wants, with its parameters.
type Request struct {
	ID     ID
	Params []byte
}

// MarshalRequests encodes requests as the PEC paper's TLV list (§4.1): for
// each, the identifier (uint16), the parameters' length (uint16) and the
// parameters. It refuses duplicates, more than MaxRequests entries and
// parameters over MaxParams bytes, as ParseRequests does.
func MarshalRequests(rs []Request) ([]byte, error) {
	if err := checkRequests(rs); err != nil {
		return nil, err
	}
	var b []byte
	for _, r := range rs {
		b = binary.BigEndian.AppendUint16(b, uint16(r.ID))
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.Params)))
		b = append(b, r.Params...)
	}
	return b, nil
}

// ParseRequests decodes a list encoded by MarshalRequests.
func ParseRequests(b []byte) ([]Request, error) {
	var rs []Request
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("pkie: truncated request TLV: %d bytes left, a header needs 4", len(b))
		}
		id := ID(binary.BigEndian.Uint16(b))
		n := int(binary.BigEndian.Uint16(b[2:]))
		b = b[4:]
		if n > len(b) {
			return nil, fmt.Errorf("pkie: request for %s says %d parameter bytes, %d remain", id, n, len(b))
		}
		rs = append(rs, Request{ID: id, Params: append([]byte(nil), b[:n]...)})
		b = b[n:]
		if len(rs) > MaxRequests {
			return nil, fmt.Errorf("pkie: more than %d enhancements requested", MaxRequests)
		}
	}
	if err := checkRequests(rs); err != nil {
		return nil, err
	}
	return rs, nil
}

func checkRequests(rs []Request) error {
	if len(rs) > MaxRequests {
		return fmt.Errorf("pkie: %d enhancements requested, at most %d", len(rs), MaxRequests)
	}
	seen := make(map[ID]bool, len(rs))
	for _, r := range rs {
		if len(r.Params) > MaxParams {
			return fmt.Errorf("pkie: parameters for %s are %d bytes, at most %d", r.ID, len(r.Params), MaxParams)
		}
		if seen[r.ID] {
			return fmt.Errorf("pkie: enhancement %s requested twice", r.ID)
		}
		seen[r.ID] = true
	}
	return nil
}

func putUint24(b []byte, n int) {
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
}

func uint24(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }
