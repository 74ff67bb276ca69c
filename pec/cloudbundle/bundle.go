// Package cloudbundle is the file a client pins a PEC cloud (or a privacy
// forwarder) by: where its points of presence are, the SHA-256 of the key
// they all prove possession of, the verifier configurations the cloud's
// operator vouches for (its own notary's key) and the HPKE key sealed
// submissions go to. `pkie cloud bundle` and `pkie forwarder bundle` print
// one; package pec reads it; docs/formats/pec.md describes the format.
//
// It is its own package, below both pec and the cloud, so that a client
// and a server agree on one definition and an embedder can name it.
package cloudbundle

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

// Version is the version of the bundle format this package reads and
// writes.
const Version = 1

// MaxBytes bounds a bundle file.
const MaxBytes = 64 << 10

// Bundle is what a client pins a cloud by: where its points of presence
// are and the key they all prove possession of.
type Bundle struct {
	// Version is the format's version: Version.
	Version int `json:"version"`
	// Name names the cloud in outcomes and logs.
	Name string `json:"name"`
	// Points are the cloud's points of presence, in the operator's order;
	// clients race them and prefer the one that answers first.
	Points []Point `json:"points"`
	// SPKISHA256 is the hex SHA-256 of the cloud's SubjectPublicKeyInfo,
	// which every point of presence presents.
	SPKISHA256 string `json:"spki_sha256"`
	// Verifiers hold verifier configurations for enhancements whose
	// trusted party is the cloud's operator itself (its notary's key),
	// by enhancement name. Keys of independent TTPs (logs, revocation
	// authorities) are never taken from a cloud's bundle: the client pins
	// them itself, so a cloud cannot vouch for its own proofs.
	Verifiers map[string]json.RawMessage `json:"verifiers,omitempty"`
	// HPKE is the cloud's key for submissions sealed through a privacy
	// forwarder; absent from clouds without one and from a forwarder's
	// bundle.
	HPKE *HPKEKey `json:"hpke,omitempty"`
}

// Point is one point of presence: a QUIC address, a TLS-over-TCP address,
// or both.
type Point struct {
	// QUIC is the UDP address of its QUIC listener, host:port; empty if
	// it has none.
	QUIC string `json:"quic,omitempty"`
	// TCP is the address of its TLS-over-TCP listener; empty if none.
	TCP string `json:"tcp,omitempty"`
}

// Pin returns the pinned key hash, SPKISHA256 decoded.
func (b *Bundle) Pin() ([32]byte, error) {
	var p [32]byte
	raw, err := hex.DecodeString(b.SPKISHA256)
	if err != nil || len(raw) != 32 {
		return p, fmt.Errorf("spki_sha256 must be 64 hex digits, got %q", b.SPKISHA256)
	}
	copy(p[:], raw)
	return p, nil
}

// Check reports what is wrong with a bundle: a version other than Version,
// no points, a point without an address or with one that is not
// host:port, a pin that is not 32 bytes of hex, an HPKE key this package
// cannot use.
func (b *Bundle) Check() error {
	if b.Version != Version {
		return fmt.Errorf("bundle version %d, this pkie reads %d", b.Version, Version)
	}
	if len(b.Points) == 0 {
		return errors.New("bundle lists no points of presence")
	}
	for i, p := range b.Points {
		if p.QUIC == "" && p.TCP == "" {
			return fmt.Errorf("point %d has neither a quic nor a tcp address", i+1)
		}
		for _, a := range []string{p.QUIC, p.TCP} {
			if a == "" {
				continue
			}
			if err := checkHostPort(a); err != nil {
				return fmt.Errorf("point %d: %w", i+1, err)
			}
		}
	}
	if _, err := b.Pin(); err != nil {
		return err
	}
	if b.HPKE != nil {
		if err := b.HPKE.Check(); err != nil {
			return err
		}
	}
	return nil
}

func checkHostPort(a string) error {
	h, p, err := net.SplitHostPort(a)
	if err != nil || h == "" {
		return fmt.Errorf("address %q is not host:port", a)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q: port out of range 1-65535", a)
	}
	return nil
}

// Parse decodes and checks a bundle. It refuses more than MaxBytes.
func Parse(data []byte) (*Bundle, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("bundle of %d bytes exceeds %d", len(data), MaxBytes)
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("bundle is not JSON: %w", err)
	}
	if err := b.Check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Read reads and checks a bundle file; errors name the file.
func Read(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// The one HPKE suite sealed submissions use: Oblivious HTTP's (RFC 9458)
// usual one.
const (
	HPKEKEM  = 0x0020 // DHKEM(X25519, HKDF-SHA256)
	HPKEKDF  = 0x0001 // HKDF-SHA256
	HPKEAEAD = 0x0001 // AES-128-GCM
)

// HPKEKey is a cloud's published HPKE key, in its bundle: the key a client
// in privacy mode seals its submissions to, so that the forwarder relaying
// them cannot read them.
type HPKEKey struct {
	// KeyID names the key in sealed envelopes, so a cloud can rotate it.
	KeyID uint8 `json:"key_id"`
	// KEM, KDF and AEAD name the suite: HPKEKEM, HPKEKDF, HPKEAEAD.
	KEM  uint16 `json:"kem"`
	KDF  uint16 `json:"kdf"`
	AEAD uint16 `json:"aead"`
	// PublicKey is the X25519 public key in hex.
	PublicKey string `json:"public_key"`
}

// NewHPKEKey returns the bundle entry for private key priv with key id.
func NewHPKEKey(id uint8, priv hpke.PrivateKey) *HPKEKey {
	return &HPKEKey{KeyID: id, KEM: HPKEKEM, KDF: HPKEKDF, AEAD: HPKEAEAD, PublicKey: hex.EncodeToString(priv.PublicKey().Bytes())}
}

// Check reports what is wrong with k: another suite, or a public key that
// is not an X25519 point.
func (k *HPKEKey) Check() error {
	if k.KEM != HPKEKEM || k.KDF != HPKEKDF || k.AEAD != HPKEAEAD {
		return fmt.Errorf("hpke suite kem %#04x kdf %#04x aead %#04x, this pkie speaks kem %#04x kdf %#04x aead %#04x",
			k.KEM, k.KDF, k.AEAD, HPKEKEM, HPKEKDF, HPKEAEAD)
	}
	_, err := k.Key()
	return err
}

// Key decodes the public key.
func (k *HPKEKey) Key() (hpke.PublicKey, error) {
	raw, err := hex.DecodeString(k.PublicKey)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("hpke public_key must be 64 hex digits, got %q", k.PublicKey)
	}
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("hpke public_key: %w", err)
	}
	return pk, nil
}
