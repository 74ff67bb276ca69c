// Package ct is the server half of the Certificate Transparency
// enhancement (internal/pkies/ct is the client's): the prover, which
// mirrors the log's sorted tree (package treemirror over package prover,
// synced and verified before it serves) and proves a certificate's
// presence or absence.
package ct

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/provers/treemirror"
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
	// Zero means 1h, the verifiers' default (internal/pkies/ct.DefaultMaxAge).
	HealthMaxAge Duration `json:"health_max_age,omitzero"`
}

// JSON returns c as NewProver's configuration.
func (c ProverConfig) JSON() json.RawMessage { return conf.JSON(c) }

// NewProver builds the CT prover from a ProverConfig in JSON: it mirrors
// the log's sorted tree in env.DataDir, syncing once before it returns and
// then every SyncInterval while the host runs it (pkie.Runner).
func NewProver(ctx context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("ct prover configuration: %w", err)
	}
	return treemirror.NewProver(ctx, pkie.CT, env, treemirror.MirrorConfig{
		PKIE: prover.CT, URL: c.LogURL, Key: c.LogKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
		HealthMaxAge: c.HealthMaxAge.D(),
	}, leafKey)
}

func leafKey(req *pkie.ProveRequest) ([32]byte, error) {
	if len(req.Chain) == 0 {
		return [32]byte{}, fmt.Errorf("%w: no certificate", pkie.ErrUnsupported)
	}
	k, err := ctwire.ChainKey(req.Chain)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w: %w", pkie.ErrUnsupported, err)
	}
	return k, nil
}

// CheckProverConfig checks a prover configuration as NewProver reads it,
// without contacting the log.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("ct prover configuration: %w", err)
	}
	return treemirror.CheckMirrorConfig(treemirror.MirrorConfig{
		PKIE: prover.CT, URL: c.LogURL, Key: c.LogKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
	})
}
