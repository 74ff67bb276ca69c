package testbed

import (
	"crypto"

	"github.com/pkie/pkie/internal/testpki"
)

// The testbed's CA hierarchy is package testpki's, re-exported so that the
// testbed's users name one package.
type (
	// KeyAlg names a key type for generated certificates.
	KeyAlg = testpki.KeyAlg
	// CA is a certificate authority of the throwaway hierarchy.
	CA = testpki.CA
	// LeafOptions configure an issued leaf certificate.
	LeafOptions = testpki.LeafOptions
	// Leaf is an issued leaf certificate with its key.
	Leaf = testpki.Leaf
)

// Key types the testbed can generate.
const (
	ECDSAP256 = testpki.ECDSAP256
	ECDSAP384 = testpki.ECDSAP384
	RSA2048   = testpki.RSA2048
	Ed25519   = testpki.Ed25519
)

// NewKey generates a private key of the given type.
func NewKey(alg KeyAlg) (crypto.Signer, error) { return testpki.NewKey(alg) }

// NewRootCA creates a self-signed root valid from an hour ago for ten years.
func NewRootCA(name string, alg KeyAlg) (*CA, error) { return testpki.NewRootCA(name, alg) }
