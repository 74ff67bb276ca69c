package pecwire

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

// BundleVersion is the version of the bundle format.
const BundleVersion = 1

// MaxBundleBytes bounds a bundle file.
const MaxBundleBytes = 64 << 10

// Bundle is what a client pins a cloud by, printed by `pkie cloud bundle`
// in the spirit of a .notary bundle: where its points of presence are and
// the key they all prove possession of.
type Bundle struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// Points are the cloud's points of presence, in the operator's order;
	// clients try the nearest first (see the client's selection rule).
	Points []Point `json:"points"`
	// SPKISHA256 is the hex SHA-256 of the cloud's SubjectPublicKeyInfo.
	SPKISHA256 string `json:"spki_sha256"`
	// Verifiers hold verifier configurations for enhancements whose
	// trusted party is the cloud's operator itself (its notary's key),
	// by enhancement name. Keys of independent TTPs (logs, revocation
	// authorities) are never taken from a cloud's bundle: the client pins
	// them itself, so a cloud cannot vouch for its own proofs.
	Verifiers map[string]json.RawMessage `json:"verifiers,omitempty"`
	// HPKE is the cloud's key for submissions sealed through a privacy
	// forwarder (see SealEnvelope); absent from clouds without one and
	// from a forwarder's bundle.
	HPKE *HPKEKey `json:"hpke,omitempty"`
}

// Point is one point of presence.
type Point struct {
	// QUIC is the UDP address of its QUIC listener, host:port; empty if
	// it has none.
	QUIC string `json:"quic,omitempty"`
	// TCP is the address of its TLS-over-TCP listener; empty if none.
	TCP string `json:"tcp,omitempty"`
}

// Pin returns the pinned key hash.
func (b *Bundle) Pin() ([32]byte, error) {
	var p [32]byte
	raw, err := hex.DecodeString(b.SPKISHA256)
	if err != nil || len(raw) != 32 {
		return p, fmt.Errorf("spki_sha256 must be 64 hex digits, got %q", b.SPKISHA256)
	}
	copy(p[:], raw)
	return p, nil
}

// Check reports what is wrong with a bundle.
func (b *Bundle) Check() error {
	if b.Version != BundleVersion {
		return fmt.Errorf("bundle version %d, this pkie reads %d", b.Version, BundleVersion)
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

// ParseBundle decodes and checks a bundle.
func ParseBundle(data []byte) (*Bundle, error) {
	if len(data) > MaxBundleBytes {
		return nil, fmt.Errorf("bundle of %d bytes exceeds %d", len(data), MaxBundleBytes)
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

// ReadBundle reads a bundle file.
func ReadBundle(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, err := ParseBundle(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
