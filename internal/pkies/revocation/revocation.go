// Package revocation is the revocation enhancement (PEC paper §5.2, after
// RITM): the revocation authority publishes a signed sorted tree of the
// keys (issuer key identifier, serial) of revoked certificates; an absence
// proof under a fresh head means not revoked, a presence proof revoked.
// Trust rests on the authority's pinned key alone, and the freshness limit
// is what bounds how long a replayed "not revoked" proof passes.
//
// This package is the client half: the revocation key (CertKey), the
// verifier and its configuration. The prover, which mirrors the authority's
// sorted tree, is server code in internal/provers/revocation; the authority,
// which lists revocations under the same key, is internal/revocation.
package revocation

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

// Name is the enhancement's name.
const Name = treeproof.Revocation

// DefaultMaxAge bounds how old a signed head a client accepts: how long
// after a revocation a stale "not revoked" proof still passes. The
// prover's health limit defaults to the same value.
const DefaultMaxAge = treeproof.DefaultClientMaxAge

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// VerifierConfig configures the verifier (the JSON object of NewVerifier).
type VerifierConfig struct {
	// Key is the authority's note verifier key.
	Key string `json:"key"`
	// MaxAge is the oldest signed head accepted; zero means 1h.
	MaxAge Duration `json:"max_age,omitzero"`
}

// JSON returns c as NewVerifier's configuration.
func (c VerifierConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Kind returns the enhancement's registration, with its client half only:
// the cloud adds the prover (internal/provers/revocation) to it.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.Revocation,
		Name:        Name,
		Summary:     "the certificate is absent from the revocation authority's fresh signed tree of revoked certificates",
		NewVerifier: NewVerifier,
	}
}

// Verifier checks revocation proofs against the authority's pinned key.
type Verifier struct {
	pin treeproof.Pin
	now func() time.Time
}

// NewVerifier builds the verifier from a VerifierConfig in JSON.
func NewVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c VerifierConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("revocation verifier configuration: %w", err)
	}
	return NewVerifierFrom(c)
}

// NewVerifierFrom builds the verifier from c.
func NewVerifierFrom(c VerifierConfig) (*Verifier, error) {
	if c.MaxAge == 0 {
		c.MaxAge = Duration(DefaultMaxAge)
	}
	pin, err := treeproof.NewPin(Name, c.Key, c.MaxAge.D())
	if err != nil {
		return nil, err
	}
	return &Verifier{pin: pin, now: time.Now}, nil
}

// ID returns pkie.Revocation.
func (v *Verifier) ID() pkie.ID { return pkie.Revocation }

// Verify recomputes the leaf's revocation key (VerifiedIssuer) and checks
// that req.Proof is a proof for that key under a fresh head signed by the
// pinned authority key: absent passes, present fails.
func (v *Verifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	leaf := req.Leaf()
	if leaf == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no certificate chain to look up"}
	}
	issuer, err := VerifiedIssuer(leaf, req.VerifiedChains)
	if err != nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: err.Error()}
	}
	key, err := CertKey(leaf, issuer)
	if err != nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: err.Error()}
	}
	return v.VerifyKey(key, req.Proof, req.Now)
}

// VerifyKey checks a proof for the revocation key key, which the caller
// computed from a verified path (VerifiedIssuer).
func (v *Verifier) VerifyKey(key [32]byte, proof *pkie.Proof, now time.Time) pkie.Assertion {
	who := "revocation authority " + v.pin.Verifier.Name()
	resp, err := treeproof.Open(pkie.Revocation, Name, proof)
	if err != nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s: %v", who, err)}
	}
	if resp == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no revocation proof"}
	}
	if now.IsZero() {
		now = v.now()
	}
	res, err := treeproof.VerifyRevocation(key, resp, v.pin, now)
	if err != nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s: %v", who, err)}
	}
	if res.Revoked {
		return pkie.Assertion{Status: pkie.Fail, Time: res.CheckpointTime,
			Reason: "revoked: listed under " + treeproof.Evidence(v.pin, res, "the authority's key log")}
	}
	return pkie.Assertion{Status: pkie.Pass, Time: res.CheckpointTime,
		Reason: "not revoked: absent under " + treeproof.Evidence(v.pin, res, "the authority's key log")}
}

// VerifiedIssuer returns the certificate that issued leaf, as the
// revocation key needs it: nil when leaf names its issuer's key itself
// (authority key identifier), else the issuer on one of the verified
// chains (leaf first, root last) that starts with leaf. Without such a
// path the issuer cannot be established: the certificate a server sends
// after the leaf may be unrelated, and even one whose key did sign the leaf
// asserts its own key identifier unchecked, so either would let a server
// choose the key a revoked leaf is looked up under.
func VerifiedIssuer(leaf *x509.Certificate, verified [][]*x509.Certificate) (*x509.Certificate, error) {
	if len(leaf.AuthorityKeyId) > 0 {
		return nil, nil
	}
	for _, chain := range verified {
		if len(chain) == 0 || !chain[0].Equal(leaf) {
			continue
		}
		if len(chain) == 1 {
			return leaf, nil // the leaf is itself a trusted root
		}
		return chain[1], nil
	}
	return nil, errors.New("the leaf has no authority key identifier and its issuer cannot be established without a verified path to a trusted root (CA validation did not pass), so its revocation status cannot be looked up")
}
