package treeproof

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ResponseVersion is the version of the Response JSON. Version 1 had an
// "sct" member (pkie's own log's Ed25519 SCT); version 2 has none.
const ResponseVersion = 2

// MaxResponseBytes bounds a response a client will read. A proof at 100×
// the PEC paper's scale is under 2 KB; the checkpoint under 1 KB.
const MaxResponseBytes = 64 << 10

// Response is what a prover server (`pkie prover serve`) sends over HTTP: the TTP's signed checkpoint and a
// proof against it. Its trust comes from the checkpoint's signature, never
// from the prover that relays it.
type Response struct {
	Version int    `json:"version"`
	PKIE    string `json:"pkie"`
	// Key is the key proven: ctwire.ChainKey of the chain for CT, the
	// revocation key (internal/pkies/revocation.CertKey) for revocation.
	Key Key `json:"key"`
	// Present is the prover's claim; verifiers trust only the proof.
	Present bool `json:"present"`
	// Checkpoint is the signed sorted-tree head (a signed note).
	Checkpoint string `json:"checkpoint"`
	// Proof is the sortedtree proof in its binary encoding.
	Proof []byte `json:"proof"`
}

// Key is a 32-byte key, hex in JSON.
type Key [32]byte

// MarshalText renders the key in hex.
func (k Key) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(k[:])), nil }

// String renders the key in hex.
func (k Key) String() string { b, _ := k.MarshalText(); return string(b) }

// UnmarshalText parses 64 hex digits.
func (k *Key) UnmarshalText(b []byte) error {
	kk, err := ParseKey(string(b))
	*k = kk
	return err
}

// ParseKey parses a key of 64 hex digits.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != 64 {
		return k, fmt.Errorf("key must be 64 hex digits, got %d characters", len(s))
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return k, fmt.Errorf("key is not hex: %w", err)
	}
	return k, nil
}

// ParseResponse decodes a prover response, checking its shape (not its
// trust: that is VerifyCT's and VerifyRevocation's job).
func ParseResponse(b []byte) (*Response, error) {
	if len(b) > MaxResponseBytes {
		return nil, fmt.Errorf("prover: response of %d bytes exceeds %d", len(b), MaxResponseBytes)
	}
	var r Response
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("prover: malformed response: %w", err)
	}
	if dec.More() {
		return nil, errors.New("prover: trailing data after response")
	}
	if r.Version != ResponseVersion {
		return nil, fmt.Errorf("prover: response version %d, want %d", r.Version, ResponseVersion)
	}
	if r.PKIE != CT && r.PKIE != Revocation {
		return nil, fmt.Errorf("prover: response for unknown PKIE %q", r.PKIE)
	}
	if r.Checkpoint == "" || len(r.Proof) == 0 {
		return nil, errors.New("prover: response lacks a checkpoint or a proof")
	}
	return &r, nil
}
