package pec

import "github.com/pkie/pkie/pec/cloudbundle"

// Bundle is what a client pins a cloud (or a privacy forwarder) by: its
// name, its points of presence, the SHA-256 of the public key they all
// present, the verifier keys the cloud's operator vouches for and its HPKE
// key. `pkie cloud bundle` prints one. It is cloudbundle.Bundle, which
// documents each field; docs/formats/pec.md describes the file.
type Bundle = cloudbundle.Bundle

// Point is one point of presence of a cloud: a QUIC address, a TLS-over-TCP
// address, or both. It is cloudbundle.Point.
type Point = cloudbundle.Point

// ParseBundle decodes a bundle and checks it (version, at least one point,
// every address host:port, a 32-byte pin, a usable HPKE key). It refuses
// more than cloudbundle.MaxBytes.
func ParseBundle(data []byte) (*Bundle, error) { return cloudbundle.Parse(data) }

// ReadBundle reads and checks a bundle file.
func ReadBundle(path string) (*Bundle, error) { return cloudbundle.Read(path) }
