// Package ct is the server half of the Certificate Transparency
// enhancement (internal/pkies/ct is the client's): the prover, which
// mirrors a CT log and proves a certificate's presence or absence in the
// sorted tree of its certificates.
//
// The prover mirrors any static-ct-api or RFC 6962 log (Mirror:
// internal/ctfollow verifies the log, internal/ctmirror builds the sorted
// tree and signs its heads with the mirror's own key, mirror_key_file).
package ct

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/pkies/conf"
)

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// ProverConfig configures the prover (the JSON object of NewProver).
type ProverConfig struct {
	// LogURL is the log's static-ct-api monitoring prefix, or its RFC
	// 6962 URL (log_kind "rfc6962").
	LogURL string `json:"log_url"`
	// LogKey is the log's key, pinned: nothing the log serves is mirrored
	// unless signed by it. Its RFC 6962 note verifier key, or its
	// SubjectPublicKeyInfo (PEM or base64) with log_origin.
	LogKey string `json:"log_key"`
	// LogKind is "static-ct-api" (the default) or "rfc6962".
	LogKind string `json:"log_kind,omitempty"`
	// LogOrigin is a static-ct-api log's origin when log_key is a bare
	// public key.
	LogOrigin string `json:"log_origin,omitempty"`
	// MirrorKeyFile is the mirror's Ed25519 signed-note key (mode 0600),
	// which signs the sorted-tree heads clients pin beside the log's key.
	// Required.
	MirrorKeyFile string `json:"mirror_key_file"`
	// SyncInterval is how often the prover syncs; zero means 30s.
	SyncInterval Duration `json:"sync_interval,omitzero"`
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
	return newMirrorProver(ctx, env, c)
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

// newMirrorProver is NewProver for any CT log: a Mirror in env.DataDir,
// synced once before it returns (a failure is logged, not returned: the
// prover answers ErrUnavailable and reports itself unhealthy until a sync
// succeeds), then every sync interval while the host runs it.
func newMirrorProver(ctx context.Context, env pkie.ProverEnv, c ProverConfig) (pkie.Prover, error) {
	if err := checkMirrorConfig(c); err != nil {
		return nil, err
	}
	if env.DataDir == "" {
		return nil, errors.New("ct prover: a data directory is required to mirror a log (what was verified must survive a restart)")
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := OpenMirror(ctx, MirrorConfig{LogKind: c.LogKind, LogURL: c.LogURL, LogKey: c.LogKey, LogOrigin: c.LogOrigin,
		MirrorKeyFile: c.MirrorKeyFile, Dir: env.DataDir, Interval: c.SyncInterval.D(), HealthMaxAge: c.HealthMaxAge.D(),
		HTTP: env.HTTP, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("ct prover: %w", err)
	}
	if st, err := m.Sync(ctx); err != nil {
		log.Error("first sync failed: not serving this enhancement until a sync succeeds", "err", err)
	} else {
		log.Info("synced", "log_size", st.Size, "keys", st.KeyCount)
	}
	return mirrorProver{m}, nil
}

// checkMirrorConfig checks what a mirror prover needs, with errors naming
// the JSON fields.
func checkMirrorConfig(c ProverConfig) error {
	switch {
	case c.LogURL == "":
		return errors.New("ct prover configuration: log_url is required")
	case c.LogKey == "":
		return errors.New("ct prover configuration: log_key, the log's pinned key, is required")
	case c.MirrorKeyFile == "":
		return errors.New("ct prover configuration: mirror_key_file, the mirror's signing key, is required (pkie prover mirror-key makes one)")
	case c.LogKind != "" && c.LogKind != ctfollow.KindStatic && c.LogKind != ctfollow.KindRFC6962:
		return fmt.Errorf("ct prover configuration: log_kind %q, want %q or %q", c.LogKind, ctfollow.KindStatic, ctfollow.KindRFC6962)
	case c.SyncInterval < 0 || c.HealthMaxAge < 0:
		return errors.New("ct prover configuration: sync_interval and health_max_age must be positive")
	}
	if u, err := url.Parse(c.LogURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ct prover configuration: log_url %q is not an http or https URL", c.LogURL)
	}
	if c.LogOrigin == "" {
		// The RFC 6962 note key form; a bare public key with log_origin
		// is parsed when the follower opens.
		if _, err := checkpoint.NewLogVerifier(c.LogKey); err != nil {
			return fmt.Errorf("ct prover configuration: log_key: %w", err)
		}
	}
	if _, _, err := ctmirror.ReadKey(c.MirrorKeyFile); err != nil {
		return fmt.Errorf("ct prover configuration: mirror_key_file: %w", err)
	}
	return nil
}

// CheckProverConfig checks a prover configuration as NewProver reads it,
// without contacting the log.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("ct prover configuration: %w", err)
	}
	return checkMirrorConfig(c)
}
