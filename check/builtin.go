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

// CTVerifierConfig configures the verifier of the built-in ct enhancement.
// With a LogList, a certificate's SCTs (embedded, from the TLS extension or
// a stapled OCSP response) are checked against the list, must satisfy the
// Policy, and, unless Inclusion is "optional", must be shown included in
// their logs by evidence the cloud relays (or the client fetches, with
// Fetch). A certificate with no SCT, or a configuration with no LogList,
// passes if it is in a mirror's signed sorted tree of a CT log whose head
// is bound to a checkpoint the log signed (Key, LogKey). At least one of
// LogList and Key is required. Its JSON method gives the configuration
// NewVerifiers takes under the name "ct".
type CTVerifierConfig struct {
	// LogList is the log list SCTs are checked against: a file (or an
	// http(s) URL, read once when the verifier is built) in Chrome's v3
	// JSON format, which Apple's list shares.
	LogList string
	// LogListSignature is the list's detached signature (Chrome's
	// log_list.sig), a file or URL, checked with LogListPublicKey; both
	// or neither.
	LogListSignature string
	// LogListPublicKey is the file of the key that signs the list (PEM
	// or DER SubjectPublicKeyInfo).
	LogListPublicKey string
	// Policy is the CT policy: "chrome" (the default), "apple" or "one"
	// (one valid SCT from a usable listed log).
	Policy string
	// Inclusion is "required" (the default: the SCTs shown included, or
	// promises still within their logs' merge delay, must meet the policy
	// by themselves, else the ct source is Unknown) or "optional" (the
	// policy alone decides a pass, and the reason reports inclusion).
	Inclusion string
	// Witnesses are the note verifier keys (cosignature/v1 or Ed25519) of
	// witnesses a quorum of which must have cosigned each static-ct-api
	// checkpoint inclusion rests on; WitnessQuorum is that quorum, zero
	// meaning all of them. A checkpoint short of it leaves inclusion
	// unknown.
	Witnesses     []string
	WitnessQuorum int
	// MaxListAge, when set, is the oldest log list relied on: with an
	// older one a certificate with SCTs is Unknown (Chrome's CT policy
	// stops enforcing at 70 days). Zero means no limit.
	MaxListAge time.Duration
	// Fetch has the client fetch inclusion evidence straight from a log
	// when the cloud relayed none. It tells the log which certificate the
	// client checks, which the cloud exists to avoid; off by default.
	Fetch bool
	// Key is the note verifier key of the mirror that signs the sorted
	// tree's heads. The client pins it itself: a proof is trusted on the
	// pinned keys only, whoever relayed it.
	Key string
	// LogKey is the log's note verifier key: for a static-ct-api or RFC
	// 6962 log its RFC 6962 note key. Required with Key.
	LogKey string
	// MaxAge is the oldest signed tree head accepted. If zero, 1 hour.
	MaxAge time.Duration
}

// JSON returns c as the ct verifier's configuration.
func (c CTVerifierConfig) JSON() json.RawMessage {
	return ct.VerifierConfig{LogList: c.LogList, LogListSignature: c.LogListSignature, LogListPublicKey: c.LogListPublicKey,
		Policy: c.Policy, Inclusion: c.Inclusion, Fetch: c.Fetch, Witnesses: c.Witnesses, WitnessQuorum: c.WitnessQuorum,
		MaxListAge: ct.Duration(c.MaxListAge), Key: c.Key, LogKey: c.LogKey, MaxAge: ct.Duration(c.MaxAge)}.JSON()
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
