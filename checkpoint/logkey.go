package checkpoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Signed-note key algorithm identifiers (C2SP signed-note).
const (
	algEd25519      = 0x01
	algRFC6962STH   = 0x05
	rfc6962MinSig   = 8 + 2 + 2 // timestamp, hash and signature algorithms, length
	guardMinSigSize = rfc6962MinSig
)

// NewLogVerifier parses the verifier key of a log whose checkpoints a
// sorted-tree head may be bound to:
//
//   - an Ed25519 signed-note key (algorithm 0x01), as NewVerifier takes:
//     pkie's own logs and key logs;
//   - an RFC 6962 signed-note key (algorithm 0x05, "<name>+<hash>+<base64 of
//     0x05 and the DER SubjectPublicKeyInfo>"), the key of a static-ct-api
//     or RFC 6962 CT log, whose checkpoints carry an RFC6962NoteSignature
//     (C2SP static-ct-api). Only ECDSA P-256 keys are accepted: the ones
//     static-ct-api allows, and the only ones every CT log program
//     (Sunlight, TesseraCT) issues. The key is checked with
//     transparency-dev/formats/note's NewRFC6962Verifier, whose name is
//     the log's origin.
//
// The RFC 6962 verifier it returns lets BindLog and OpenMirrorHead read the
// checkpoint's time from its signature (Head.LogSigned).
func NewLogVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, _ := strings.Cut(vkey, "+")
	_, b64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 2 {
		return nil, fmt.Errorf("checkpoint: log key %q is not a signed-note verifier key (name+hash+base64)", short(vkey))
	}
	switch key[0] {
	case algEd25519:
		return NewVerifier(vkey)
	case algRFC6962STH:
		pub, err := x509.ParsePKIXPublicKey(key[1:])
		if err != nil {
			return nil, fmt.Errorf("checkpoint: RFC 6962 log key of %s: %w", name, err)
		}
		if k, ok := pub.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("checkpoint: RFC 6962 log key of %s is a %T; only ECDSA P-256 log keys are accepted (static-ct-api)", name, pub)
		}
		v, err := fnote.NewRFC6962Verifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: RFC 6962 log key of %s: %w", name, err)
		}
		return rfc6962Verifier{v}, nil
	default:
		return nil, fmt.Errorf("checkpoint: log key of %s has signed-note algorithm %#02x; want Ed25519 (0x01) or RFC 6962 (0x05)", name, key[0])
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// rfc6962Verifier marks a verifier of RFC6962NoteSignatures, whose
// signature starts with the time the log signed the checkpoint.
type rfc6962Verifier struct{ note.Verifier }

// Verify refuses a signature too short to hold an RFC6962NoteSignature's
// fixed fields before checking it.
func (v rfc6962Verifier) Verify(msg, sig []byte) bool {
	return len(sig) >= rfc6962MinSig && v.Verifier.Verify(msg, sig)
}

// guardedVerifier refuses, before verifying, a signature shorter than the
// fixed part of an RFC6962NoteSignature: a head carries the log's
// signature from an untrusted relay, and a verifier of another package
// (transparency-dev/formats/note's RFC 6962 one) given a short signature
// indexes past its end. Every signature pkie binds (Ed25519, RFC 6962) is
// longer.
type guardedVerifier struct{ note.Verifier }

func (v guardedVerifier) Verify(msg, sig []byte) bool {
	return len(sig) >= guardMinSigSize && v.Verifier.Verify(msg, sig)
}
