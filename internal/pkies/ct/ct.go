// Package ct is the Certificate Transparency enhancement (PEC paper §5.1):
// a leaf passes when the log's signed sorted tree holds it (a presence
// proof), or when it is absent but comes with the log's SCT younger than the
// log's maximum merge delay. Trust rests on the log's pinned key alone,
// never on the prover or the cloud that relays the proof.
//
// The prover mirrors the log's sorted tree (package prover, synced and
// verified before it serves); the proof body is package treeproof's.
package ct

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
)

// Name is the enhancement's name.
const Name = prover.CT

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

// ProverConfig configures the prover (the JSON object of NewProver).
type ProverConfig struct {
	// LogURL is the log's base URL (it serves /v1/sorted and /v1/log/…).
	LogURL string `json:"log_url"`
	// LogKey is the log's note verifier key, pinned: nothing the log
	// serves is mirrored unless signed by it.
	LogKey string `json:"log_key"`
	// SyncInterval is how often the prover syncs; zero means 30s.
	SyncInterval Duration `json:"sync_interval,omitzero"`
	// MaxAge refuses heads older than this at sync; zero means 24h.
	MaxAge Duration `json:"max_age,omitzero"`
	// HealthMaxAge is the head age past which /healthz reports the
	// prover unhealthy: set it to the max_age the clients' verifiers use.
	// Zero means 1h, the verifiers' default (DefaultMaxAge).
	HealthMaxAge Duration `json:"health_max_age,omitzero"`
}

// JSON returns c as NewProver's configuration.
func (c ProverConfig) JSON() json.RawMessage { return conf.JSON(c) }

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

// Kind returns the enhancement's registration.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.CT,
		Name:        Name,
		Summary:     "the certificate is in the CT log's signed sorted tree, or has the log's SCT within its maximum merge delay",
		NewProver:   NewProver,
		NewVerifier: NewVerifier,
	}
}

// NewProver builds the CT prover from a ProverConfig in JSON: it mirrors
// the log's sorted tree in env.DataDir, syncing once before it returns and
// then every SyncInterval while the host runs it (pkie.Runner).
func NewProver(ctx context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("ct prover configuration: %w", err)
	}
	return treeproof.NewProver(ctx, pkie.CT, env, treeproof.MirrorConfig{
		PKIE: prover.CT, URL: c.LogURL, Key: c.LogKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
		HealthMaxAge: c.HealthMaxAge.D(),
	}, leafKey, prover.LogSCTs)
}

// logWord names the log a CT head is built from, in reasons.
const logWord = "the log's checkpoint"

func leafKey(req *pkie.ProveRequest) ([32]byte, error) {
	if len(req.Chain) == 0 {
		return [32]byte{}, fmt.Errorf("%w: no certificate", pkie.ErrUnsupported)
	}
	return sha256.Sum256(req.Chain[0]), nil
}

// Verifier checks CT proofs against the log's pinned key.
type Verifier struct {
	pin prover.Pin
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
	res, err := prover.VerifyCT(req.Chain[0], resp, v.pin, v.mmd, now)
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
