package check

import (
	"encoding/json"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
)

// BuiltinRegistry returns a new registry holding the client halves of the
// enhancements built into pkie: ct, revocation and notary, each with its
// verifier and no prover (a client links none: the cloud's registry, with
// the provers, is package cloud's BuiltinRegistry). Each call returns a
// registry of its own, so an application may Register its own enhancements
// beside the built-ins without affecting any other caller. It is the
// registry that a nil *pkie.Registry means throughout this package and
// package pec.
func BuiltinRegistry() *pkie.Registry { return builtin.Registry() }

// CTVerifierConfig configures the verifier of the built-in ct enhancement:
// a proof passes if the certificate is in the log's signed sorted tree, or
// carries the log's SCT within its maximum merge delay. Its JSON method
// gives the configuration NewVerifiers takes under the name "ct".
type CTVerifierConfig struct {
	// Key is the log's note verifier key, as "pkie log init" prints it
	// and leaves it in the log directory's log.pub. The client pins it
	// itself: a proof is trusted on this key only, whoever relayed it.
	Key string
	// MaxAge is the oldest signed tree head accepted. If zero, 1 hour.
	MaxAge time.Duration
	// MMD is the log's maximum merge delay: how long an SCT stands in for
	// inclusion. If zero, 24 hours.
	MMD time.Duration
}

// JSON returns c as the ct verifier's configuration.
func (c CTVerifierConfig) JSON() json.RawMessage {
	return ct.VerifierConfig{Key: c.Key, MaxAge: ct.Duration(c.MaxAge), MMD: ct.Duration(c.MMD)}.JSON()
}

// RevocationVerifierConfig configures the verifier of the built-in
// revocation enhancement: a proof passes if the certificate is absent from
// the revocation authority's fresh signed tree of revoked certificates. Its
// JSON method gives the configuration NewVerifiers takes under the name
// "revocation".
type RevocationVerifierConfig struct {
	// Key is the revocation authority's note verifier key, as
	// "pkie revocation init" prints it and leaves it in revocation.pub;
	// pinned by the client.
	Key string
	// MaxAge is the oldest signed tree head accepted. If zero, 1 hour.
	MaxAge time.Duration
}

// JSON returns c as the revocation verifier's configuration.
func (c RevocationVerifierConfig) JSON() json.RawMessage {
	return revocation.VerifierConfig{Key: c.Key, MaxAge: revocation.Duration(c.MaxAge)}.JSON()
}
