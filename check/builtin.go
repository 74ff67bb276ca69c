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
// a proof passes if the certificate is in a mirror's signed sorted tree of
// a CT log, whose head is bound to a checkpoint the log signed. A
// certificate absent from the tree fails. Its JSON method gives the
// configuration NewVerifiers takes under the name "ct".
type CTVerifierConfig struct {
	// Key is the note verifier key of the mirror that signs the sorted
	// tree's heads. The client pins it itself: a proof is trusted on the
	// pinned keys only, whoever relayed it.
	Key string
	// LogKey is the log's note verifier key: for a static-ct-api or RFC
	// 6962 log its RFC 6962 note key. Required.
	LogKey string
	// MaxAge is the oldest signed tree head accepted. If zero, 1 hour.
	MaxAge time.Duration
}

// JSON returns c as the ct verifier's configuration.
func (c CTVerifierConfig) JSON() json.RawMessage {
	return ct.VerifierConfig{Key: c.Key, LogKey: c.LogKey, MaxAge: ct.Duration(c.MaxAge)}.JSON()
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
