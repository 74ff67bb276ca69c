// Package revocation is the server half of the revocation enhancement
// (internal/pkies/revocation is the client's): the prover, which mirrors
// the revocation authority's sorted tree (package treemirror over package
// prover) and proves a certificate's revocation key present or absent.
package revocation

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/conf"
	rev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/provers/treemirror"
)

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// ProverConfig configures the prover (the JSON object of NewProver).
type ProverConfig struct {
	// AuthorityURL is the revocation authority's base URL (it serves
	// /v1/sorted).
	AuthorityURL string `json:"authority_url"`
	// AuthorityKey is the authority's note verifier key, pinned.
	AuthorityKey string `json:"authority_key"`
	// SyncInterval is how often the prover syncs; zero means 30s.
	SyncInterval Duration `json:"sync_interval,omitzero"`
	// MaxAge refuses heads older than this at sync; zero means 24h.
	MaxAge Duration `json:"max_age,omitzero"`
	// HealthMaxAge is the head age past which /healthz reports the
	// prover unhealthy: set it to the max_age the clients' verifiers use.
	// Zero means 1h, the verifiers' default (internal/pkies/revocation.DefaultMaxAge).
	HealthMaxAge Duration `json:"health_max_age,omitzero"`
}

// JSON returns c as NewProver's configuration.
func (c ProverConfig) JSON() json.RawMessage { return conf.JSON(c) }

// NewProver builds the revocation prover from a ProverConfig in JSON: it
// mirrors the authority's sorted tree in env.DataDir, syncing once before
// it returns and then every SyncInterval while the host runs it.
func NewProver(ctx context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("revocation prover configuration: %w", err)
	}
	return treemirror.NewProver(ctx, pkie.Revocation, env, treemirror.MirrorConfig{
		PKIE: prover.Revocation, URL: c.AuthorityURL, Key: c.AuthorityKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
		HealthMaxAge: c.HealthMaxAge.D(),
	}, proverKey)
}

// proverKey computes the revocation key on the prover's side, where the
// issuer of a leaf without an authority key identifier can only be the
// certificate the server sent after it (checked to have signed it). The
// verifier never takes this choice on trust: it recomputes the key from its
// own verified path and a proof for any other key fails.
func proverKey(req *pkie.ProveRequest) ([32]byte, error) {
	leaf := req.Leaf()
	if leaf == nil {
		return [32]byte{}, fmt.Errorf("%w: no certificate", pkie.ErrUnsupported)
	}
	var issuer *x509.Certificate
	if len(leaf.AuthorityKeyId) == 0 {
		switch {
		case len(req.Certs) > 1:
			issuer = req.Certs[1]
		case leaf.CheckSignatureFrom(leaf) == nil:
			issuer = leaf
		}
	}
	k, err := rev.CertKey(leaf, issuer)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w: %w", pkie.ErrUnsupported, err)
	}
	return k, nil
}

// CheckProverConfig checks a prover configuration as NewProver reads it,
// without contacting the authority.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("revocation prover configuration: %w", err)
	}
	return treemirror.CheckMirrorConfig(treemirror.MirrorConfig{
		PKIE: prover.Revocation, URL: c.AuthorityURL, Key: c.AuthorityKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
	})
}
