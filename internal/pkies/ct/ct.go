// Package ct is the Certificate Transparency enhancement (PEC paper §5.1):
// a certificate passes when a signed sorted tree of a CT log's
// certificates holds it (a presence proof). The tree is built by a mirror
// of the log (internal/ctmirror), which signs its head with its own key and
// binds it to a checkpoint the log signed; a client pins both keys, and
// trusts neither the prover nor the cloud that relays the proof.
//
// A certificate absent from the tree fails: the log may have promised to
// merge it (an SCT) and not yet done so, but the promise travels in the
// certificate, not in this proof.
//
// This package is the client half: the verifier and its configuration. The
// proof body is package treeproof's; the prover, which mirrors the log, is
// server code in internal/provers/ct, linked by the cloud only.
package ct

import (
	"context"
	"encoding/json"
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
)

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// VerifierConfig configures the verifier (the JSON object of NewVerifier).
type VerifierConfig struct {
	// Key is the note verifier key of the mirror that signs the sorted
	// tree's heads (Ed25519).
	Key string `json:"key"`
	// LogKey is the log's note verifier key: the RFC 6962 note key of a
	// static-ct-api or RFC 6962 log ("<origin>+<hash>+<base64>", algorithm
	// 0x05, ECDSA P-256), or an Ed25519 one. The head's bound checkpoint
	// must verify with it. Required.
	LogKey string `json:"log_key"`
	// MaxAge is the oldest signed head accepted; zero means 1h.
	MaxAge Duration `json:"max_age,omitzero"`
}

// JSON returns c as NewVerifier's configuration.
func (c VerifierConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Kind returns the enhancement's registration, with its client half only:
// the cloud adds the prover (internal/provers/ct) to it.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.CT,
		Name:        Name,
		Summary:     "the certificate is in a mirror's signed sorted tree of a CT log, bound to a checkpoint the log signed",
		NewVerifier: NewVerifier,
	}
}

// logWord names the log a CT head is built from, in reasons.
const logWord = "the log's checkpoint"

// Verifier checks CT proofs against the pinned mirror and log keys.
type Verifier struct {
	pin treeproof.Pin
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
	if c.Key == "" {
		return nil, fmt.Errorf("%s verifier: key, the mirror's head key, is required", Name)
	}
	if c.LogKey == "" {
		return nil, fmt.Errorf("%s verifier: log_key, the key of the log the mirror follows, is required", Name)
	}
	if c.MaxAge <= 0 {
		return nil, fmt.Errorf("%s verifier: max_age must be positive", Name)
	}
	pin, err := treeproof.ParseMirrorPin(c.Key, c.LogKey, c.MaxAge.D())
	if err != nil {
		return nil, fmt.Errorf("%s verifier: %w", Name, err)
	}
	return &Verifier{pin: pin, now: time.Now}, nil
}

// ID returns pkie.CT.
func (v *Verifier) ID() pkie.ID { return pkie.CT }

// Verify checks that req.Proof shows the certificate req.Chain logged
// under a fresh head signed by the pinned mirror key and bound to a
// checkpoint the pinned log key signed. The key proven is recomputed from
// the chain (ctwire.ChainKey), so a valid proof for another certificate
// fails. An absent certificate fails, naming the mirror, and the log
// checkpoint's size and time the tree was built from.
func (v *Verifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	if len(req.Chain) == 0 {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no certificate chain to look up in the log"}
	}
	who := "log " + v.pin.Verifier.Name()
	if v.pin.LogVerifier != nil {
		who = "mirror " + v.pin.Verifier.Name() + " of log " + v.pin.LogVerifier.Name()
	}
	resp, err := treeproof.Open(pkie.CT, Name, req.Proof)
	if err != nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s: %v", who, err)}
	}
	if resp == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no CT proof"}
	}
	now := req.Now
	if now.IsZero() {
		now = v.now()
	}
	res, err := treeproof.VerifyCT(req.Chain, resp, v.pin, now)
	if err != nil {
		a := pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s: %v", who, err)}
		if res != nil {
			a.Reason += " (under " + treeproof.Evidence(v.pin, res, logWord) + ")"
			a.Time = res.CheckpointTime
		}
		return a
	}
	return pkie.Assertion{Status: pkie.Pass, Time: res.CheckpointTime,
		Reason: "logged: in the sorted tree under " + treeproof.Evidence(v.pin, res, logWord)}
}
