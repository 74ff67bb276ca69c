package pec

import "github.com/pkie/pkie/internal/pecwire"

// Bundle is what a client pins a cloud by: its name, its points of presence
// and the SHA-256 of the public key they all present. `pkie cloud bundle`
// prints one. docs/formats/pec.md describes the format.
type Bundle = pecwire.Bundle

// Point is one point of presence of a cloud: a QUIC address, a TLS-over-TCP
// address, or both.
type Point = pecwire.Point

// ParseBundle decodes a bundle and checks it (version, at least one point,
// every address host:port, a 32-byte pin). It refuses more than
// pecwire.MaxBundleBytes.
func ParseBundle(data []byte) (*Bundle, error) { return pecwire.ParseBundle(data) }

// ReadBundle reads and checks a bundle file.
func ReadBundle(path string) (*Bundle, error) { return pecwire.ReadBundle(path) }
