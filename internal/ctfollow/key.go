package ctfollow

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// verifier parses c.Key into the log's checkpoint verifier and origin.
func verifier(c Config) (note.Verifier, string, error) {
	key := strings.TrimSpace(c.Key)
	if key == "" {
		return nil, "", errors.New("ctfollow: no log key")
	}
	var der []byte
	if b, _ := pem.Decode([]byte(key)); b != nil {
		if b.Type != "PUBLIC KEY" {
			return nil, "", fmt.Errorf("ctfollow: log key: PEM block %q, want PUBLIC KEY", b.Type)
		}
		der = b.Bytes
	} else if d, err := base64.StdEncoding.DecodeString(key); err == nil {
		der = d
	} else {
		v, err := fnote.NewRFC6962Verifier(key)
		if err != nil {
			return nil, "", fmt.Errorf("ctfollow: log key %q: neither PEM, nor base64 SubjectPublicKeyInfo, nor an RFC 6962 note verifier key: %w", key, err)
		}
		if err := requireECDSA(key); err != nil {
			return nil, "", err
		}
		if c.Origin != "" && c.Origin != v.Name() {
			return nil, "", fmt.Errorf("ctfollow: origin %q but the log key names %q", c.Origin, v.Name())
		}
		return guardedVerifier{v}, v.Name(), nil
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, "", fmt.Errorf("ctfollow: log key: %w", err)
	}
	if err := requireP256(pub); err != nil {
		return nil, "", err
	}
	name := c.Origin
	if name == "" {
		if c.Kind != KindRFC6962 {
			return nil, "", errors.New("ctfollow: a static-ct-api log given by its public key needs its origin")
		}
		name = c.URL
	}
	vkey, err := fnote.RFC6962VerifierString(name, pub)
	if err != nil {
		return nil, "", fmt.Errorf("ctfollow: log key for %q: %w", name, err)
	}
	v, err := fnote.NewRFC6962Verifier(vkey)
	if err != nil {
		return nil, "", fmt.Errorf("ctfollow: log key: %w", err)
	}
	if c.Kind == KindRFC6962 && c.Origin != "" && c.Origin != v.Name() {
		return nil, "", fmt.Errorf("ctfollow: origin %q, want %q for an RFC 6962 log (derived from its URL)", c.Origin, v.Name())
	}
	return guardedVerifier{v}, v.Name(), nil
}

// errNotECDSA explains why only ECDSA P-256 log keys are taken: formats/note's
// RFC 6962 verifier (v0.0.0-20251017110053) accepts an RSA signature
// exactly when it does not verify (it returns rsa.VerifyPKCS1v15(...) !=
// nil), so an RSA-keyed log would be followed on forged checkpoints.
var errNotECDSA = errors.New("only ECDSA P-256 log keys are supported (formats/note's RFC 6962 verifier mis-verifies RSA signatures)")

// requireECDSA checks that an RFC 6962 note verifier key holds an ECDSA key.
func requireECDSA(vkey string) error {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return fmt.Errorf("ctfollow: log key %q: not a note verifier key", vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) < 2 {
		return fmt.Errorf("ctfollow: log key %q: bad base64 key", vkey)
	}
	pub, err := x509.ParsePKIXPublicKey(raw[1:])
	if err != nil {
		return fmt.Errorf("ctfollow: log key %q: %w", vkey, err)
	}
	return requireP256(pub)
}

// requireP256 accepts an ECDSA P-256 key only: the key static-ct-api logs
// sign with, and the only one a mirror's head can bind (checkpoint's
// NewLogVerifier).
func requireP256(pub any) error {
	if k, ok := pub.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		return fmt.Errorf("ctfollow: log key is a %T: %w", pub, errNotECDSA)
	}
	return nil
}

// guardedVerifier screens signatures before formats/note's RFC 6962
// verifier sees them: that verifier indexes a signature's first 12 bytes
// (timestamp, algorithms, length) without checking it has them, so a
// hostile log's short signature would panic the follower.
type guardedVerifier struct{ note.Verifier }

// minRFC6962Sig is the timestamp (8), hash and signature algorithms (2)
// and signature length (2) every RFC 6962 note signature starts with.
const minRFC6962Sig = 12

func (v guardedVerifier) Verify(msg, sig []byte) bool {
	return len(sig) >= minRFC6962Sig && v.Verifier.Verify(msg, sig)
}
