// Package ct is the Certificate Transparency enhancement (PEC paper §5.1):
// a leaf passes when the log's signed sorted tree holds it (a presence
// proof), or when it is absent but comes with the log's SCT younger than the
// log's maximum merge delay. Trust rests on the log's pinned key alone,
// never on the prover or the cloud that relays the proof.
//
// This package is the client half: the verifier and its configuration. The
// proof body is package treeproof's; the prover, which mirrors the log's
// sorted tree, is server code in internal/provers/ct, linked by the cloud
// only.
package ct

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

// Name is the enhancement's name.
const Name = treeproof.CT

// Verifier defaults.
const (
	// DefaultMaxAge bounds how old a signed head a client accepts: how
	// long an old proof can be replayed. The prover's health limit
	// defaults to the same value.
	DefaultMaxAge = treeproof.DefaultClientMaxAge
	// DefaultMMD is the log's maximum merge delay.
	DefaultMMD = 24 * time.Hour
)

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// VerifierConfig configures the verifier (the JSON object of NewVerifier).
type VerifierConfig struct {
	// Key is the log's note verifier key.
	Key string `json:"key"`
	// MaxAge is the oldest signed head accepted; zero means 1h.
	MaxAge Duration `json:"max_age,omitzero"`
	// MMD is the log's maximum merge delay; zero means 24h.
	MMD Duration `json:"mmd,omitzero"`
}

// JSON returns c as NewVerifier's configuration.
func (c VerifierConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Kind returns the enhancement's registration, with its client half only:
// the cloud adds the prover (internal/provers/ct) to it.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.CT,
		Name:        Name,
		Summary:     "the certificate is in the CT log's signed sorted tree, or has the log's SCT within its maximum merge delay",
		NewVerifier: NewVerifier,
	}
}

// logWord names the log a CT head is built from, in reasons.
const logWord = "the log's checkpoint"

// Verifier checks CT proofs against the log's pinned key.
type Verifier struct {
	pin treeproof.Pin
	mmd time.Duration
	now func() time.Time // for VerifyRequest.Now zero
}

// NewVerifier builds the verifier from a VerifierConfig in JSON.
func NewVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c VerifierConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("ct verifier configuration: %w", err)
	}
	return NewVerifierFrom(c)
}

// NewVerifierFrom builds the verifier from c.
func NewVerifierFrom(c VerifierConfig) (*Verifier, error) {
	if c.MaxAge == 0 {
		c.MaxAge = Duration(DefaultMaxAge)
	}
	if c.MMD == 0 {
		c.MMD = Duration(DefaultMMD)
	}
	if c.MMD < 0 {
		return nil, errors.New("ct verifier: mmd must be positive")
	}
	pin, err := treeproof.NewPin(Name, c.Key, c.MaxAge.D())
	if err != nil {
		return nil, err
	}
	return &Verifier{pin: pin, mmd: c.MMD.D(), now: time.Now}, nil
}

// ID returns pkie.CT.
func (v *Verifier) ID() pkie.ID { return pkie.CT }

// Verify checks that req.Proof shows the leaf req.Chain[0] logged under a
// fresh head signed by the pinned log key. The key proven is recomputed
// from the leaf, so a valid proof for another certificate fails.
func (v *Verifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	if len(req.Chain) == 0 {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no certificate chain to look up in the log"}
	}
	resp, err := treeproof.Open(pkie.CT, Name, req.Proof)
	if err != nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("log %s: %v", v.pin.Verifier.Name(), err)}
	}
	if resp == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no CT proof"}
	}
	now := req.Now
	if now.IsZero() {
		now = v.now()
	}
	res, err := treeproof.VerifyCT(req.Chain[0], resp, v.pin, v.mmd, now)
	if err != nil {
		a := pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("log %s: %v", v.pin.Verifier.Name(), err)}
		if res != nil {
			a.Reason += " (under " + treeproof.Evidence(v.pin, res, logWord) + ")"
			a.Time = res.CheckpointTime
		}
		return a
	}
	if res.Present {
		return pkie.Assertion{Status: pkie.Pass, Time: res.CheckpointTime,
			Reason: "logged: in the sorted tree under " + treeproof.Evidence(v.pin, res, logWord)}
	}
	return pkie.Assertion{Status: pkie.Pass, Time: res.CheckpointTime,
		Reason: fmt.Sprintf("not yet in the sorted tree under %s, but the log's SCT of %s is within its %s maximum merge delay",
			treeproof.Evidence(v.pin, res, logWord), res.SCTTime.UTC().Format(time.RFC3339), v.mmd)}
}
