// Package ct is the server half of the Certificate Transparency
// enhancement (internal/pkies/ct is the client's): the prover.
//
// For a certificate with SCTs (embedded, or sent by the client from the
// TLS extension and a stapled OCSP response) the prover fetches and caches
// the inclusion evidence of each SCT from its log, as the log list
// (log_list) names it: an inclusion proof against a checkpoint or STH the
// log signed (internal/ctinclusion). A client verifies it with the log's
// key from its own log list, and learns inclusion without telling the log
// what it visits.
//
// For a certificate with no SCT, the prover proves its presence or absence
// in the sorted tree of a mirrored log (Mirror: internal/ctfollow verifies
// any static-ct-api or RFC 6962 log, internal/ctmirror builds the sorted
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

// ProverConfig configures the prover (the JSON object of NewProver): the
// log list half (log_list), the mirror half (log_url), or both.
type ProverConfig struct {
	// LogList is the log list (Chrome's v3 JSON schema, which Apple's
	// list also uses): a file or an http(s) URL. The prover fetches
	// inclusion evidence for SCTs from the logs it lists, with their keys.
	LogList string `json:"log_list,omitempty"`
	// LogListSignature is the list's detached signature (file or URL), as
	// Chrome publishes log_list.sig; checked with LogListPublicKey.
	LogListSignature string `json:"log_list_signature,omitempty"`
	// LogListPublicKey is the PEM file of the key the list is signed with.
	LogListPublicKey string `json:"log_list_public_key,omitempty"`
	// LogListRefresh is how often the list is reloaded; zero means 1h. A
	// list that fails to load or verify leaves the previous one in use.
	LogListRefresh Duration `json:"log_list_refresh,omitzero"`
	// InclusionCache bounds the cached evidences (one per SCT); zero
	// means 100,000.
	InclusionCache int `json:"inclusion_cache,omitempty"`
	// CheckpointRefresh is the age past which cached inclusion evidence
	// is fetched again, against a newer checkpoint (the old one stays
	// true and is served if that fails); zero means 1h.
	CheckpointRefresh Duration `json:"checkpoint_refresh,omitzero"`

	// LogURL is the mirrored log's static-ct-api monitoring prefix, or its
	// RFC 6962 URL (log_kind "rfc6962"). Optional with log_list.
	LogURL string `json:"log_url,omitempty"`
	// LogKey is the log's key, pinned: nothing the log serves is mirrored
	// unless signed by it. Its RFC 6962 note verifier key, or its
	// SubjectPublicKeyInfo (PEM or base64) with log_origin.
	LogKey string `json:"log_key,omitempty"`
	// LogKind is "static-ct-api" (the default) or "rfc6962".
	LogKind string `json:"log_kind,omitempty"`
	// LogOrigin is a static-ct-api log's origin when log_key is a bare
	// public key.
	LogOrigin string `json:"log_origin,omitempty"`
	// MirrorKeyFile is the mirror's Ed25519 signed-note key (mode 0600),
	// which signs the sorted-tree heads clients pin beside the log's key.
	// Required with log_url.
	MirrorKeyFile string `json:"mirror_key_file,omitempty"`
	// SyncInterval is how often the mirror syncs; zero means 30s.
	SyncInterval Duration `json:"sync_interval,omitzero"`
	// HealthMaxAge is the head age past which /healthz reports the
	// mirror unhealthy (when it is the prover's only half): set it to the
	// max_age the clients' verifiers use. Zero means 1h, the verifiers'
	// default (internal/pkies/ct.DefaultMaxAge).
	HealthMaxAge Duration `json:"health_max_age,omitzero"`
}

// JSON returns c as NewProver's configuration.
func (c ProverConfig) JSON() json.RawMessage { return conf.JSON(c) }

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

// openMirror opens the mirror half in env.DataDir and syncs it once (a
// failure is logged, not returned: certificates with no SCT get
// ErrUnavailable until a sync succeeds).
func openMirror(ctx context.Context, env pkie.ProverEnv, c ProverConfig, log *slog.Logger) (*Mirror, error) {
	if env.DataDir == "" {
		return nil, errors.New("ct prover: a data directory is required to mirror a log (what was verified must survive a restart)")
	}
	m, err := OpenMirror(ctx, MirrorConfig{LogKind: c.LogKind, LogURL: c.LogURL, LogKey: c.LogKey, LogOrigin: c.LogOrigin,
		MirrorKeyFile: c.MirrorKeyFile, Dir: env.DataDir, Interval: c.SyncInterval.D(), HealthMaxAge: c.HealthMaxAge.D(),
		HTTP: env.HTTP, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("ct prover: %w", err)
	}
	if st, err := m.Sync(ctx); err != nil {
		log.Error("first sync failed: not serving sorted-tree proofs until a sync succeeds", "err", err)
	} else {
		log.Info("synced", "log_size", st.Size, "keys", st.KeyCount)
	}
	return m, nil
}

// checkConfig checks a configuration, with errors naming the JSON fields.
func checkConfig(c ProverConfig) error {
	if c.LogList == "" && c.LogURL == "" {
		return errors.New("ct prover configuration: log_list (the logs whose SCTs are proved) or log_url (a log to mirror) is required")
	}
	if c.LogList == "" {
		if c.LogListSignature != "" || c.LogListPublicKey != "" || c.LogListRefresh != 0 || c.InclusionCache != 0 || c.CheckpointRefresh != 0 {
			return errors.New("ct prover configuration: log_list_signature, log_list_public_key, log_list_refresh, inclusion_cache and checkpoint_refresh need log_list")
		}
	} else {
		switch {
		case (c.LogListSignature == "") != (c.LogListPublicKey == ""):
			return errors.New("ct prover configuration: log_list_signature and log_list_public_key go together")
		case c.LogListRefresh < 0 || c.CheckpointRefresh < 0:
			return errors.New("ct prover configuration: log_list_refresh and checkpoint_refresh must be positive")
		case c.InclusionCache < 0:
			return errors.New("ct prover configuration: inclusion_cache must be positive (zero: the default)")
		}
		if u, err := url.Parse(c.LogList); isURL(c.LogList) && (err != nil || u.Host == "") {
			return fmt.Errorf("ct prover configuration: log_list %q is not a file or an http(s) URL", c.LogList)
		}
		if c.LogListPublicKey != "" {
			if _, err := readPublicKey(c.LogListPublicKey); err != nil {
				return fmt.Errorf("ct prover configuration: log_list_public_key: %w", err)
			}
		}
	}
	if c.LogURL == "" {
		if c.LogKey != "" || c.LogKind != "" || c.LogOrigin != "" || c.MirrorKeyFile != "" || c.SyncInterval != 0 || c.HealthMaxAge != 0 {
			return errors.New("ct prover configuration: log_key, log_kind, log_origin, mirror_key_file, sync_interval and health_max_age need log_url")
		}
		return nil
	}
	return checkMirrorConfig(c)
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
// without contacting any log or list server (a log list file is read
// when the prover starts).
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("ct prover configuration: %w", err)
	}
	return checkConfig(c)
}
