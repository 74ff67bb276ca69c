package ct

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
)

// MirrorConfig configures a Mirror: which log to follow and how to sign.
type MirrorConfig struct {
	// LogKind is ctfollow.KindStatic (the default) or KindRFC6962.
	LogKind string
	// LogURL is the log's static-ct-api monitoring prefix or RFC 6962 URL.
	// Unused with Fetch.
	LogURL string
	// LogKey is the log's key as ctfollow.Config.Key takes it: its RFC
	// 6962 note verifier key, or its SubjectPublicKeyInfo (PEM or base64)
	// with LogOrigin.
	LogKey    string
	LogOrigin string
	// Fetch, if set, reads a static-ct-api log in the same process
	// (ctlog's Reader) instead of over HTTP.
	Fetch *ctfollow.Fetchers
	// MirrorKeyFile is the mirror's Ed25519 signer key
	// (ctmirror.GenerateKey), mode 0600.
	MirrorKeyFile string
	// Dir holds the follower's and the mirror's state (subdirectories
	// "follow" and "mirror"); required: a mirror that forgot what it
	// verified would take a forked log for the truth after a restart.
	Dir string
	// Interval is how often Run syncs; zero means 30s.
	Interval time.Duration
	// HealthMaxAge is the head age past which Health reports the mirror
	// unhealthy; zero means treeproof.DefaultClientMaxAge.
	HealthMaxAge time.Duration
	HTTP         *http.Client
	Now          func() time.Time
	Logger       *slog.Logger
}

// Mirror is the CT prover's server half for any CT log: a follower
// (internal/ctfollow) that verifies every checkpoint and entry of the log,
// and a sorted-tree mirror (internal/ctmirror) of its certificates signed
// with the mirror's own key. A log that forks, rolls back or serves entries
// not matching its checkpoint is refused, counted (RefusedSyncs; Status's
// refused_trees) and logged, and the last good tree keeps being served.
type Mirror struct {
	f        *ctfollow.Follower
	m        *ctmirror.Mirror
	interval time.Duration
	maxAge   time.Duration
	now      func() time.Time
	log      *slog.Logger
	refused  atomic.Uint64

	mu       sync.Mutex
	lastSync time.Time
	lastErr  string
}

// OpenMirror opens (or creates) the follower and the mirror in c.Dir. It
// does not sync; Sync or Run does.
func OpenMirror(ctx context.Context, c MirrorConfig) (*Mirror, error) {
	if c.Dir == "" {
		return nil, errors.New("ct mirror: a state directory is required")
	}
	if c.MirrorKeyFile == "" {
		return nil, errors.New("ct mirror: mirror_key_file, the mirror's signing key, is required (pkie prover init-mirror-key, or ctmirror.GenerateKey)")
	}
	if c.LogKind == "" {
		c.LogKind = ctfollow.KindStatic
	}
	if c.Interval == 0 {
		c.Interval = 30 * time.Second
	}
	if c.HealthMaxAge == 0 {
		c.HealthMaxAge = treeproof.DefaultClientMaxAge
	}
	if c.Interval < 0 || c.HealthMaxAge < 0 {
		return nil, errors.New("ct mirror: sync interval and health maximum age must be positive")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	signer, verifier, err := ctmirror.ReadKey(c.MirrorKeyFile)
	if err != nil {
		return nil, fmt.Errorf("ct mirror: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ct mirror: %w", err)
	}
	mm := &Mirror{interval: c.Interval, maxAge: c.HealthMaxAge, now: c.Now, log: c.Logger}
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: c.LogKind, URL: c.LogURL, Key: c.LogKey, Origin: c.LogOrigin, Fetch: c.Fetch,
		Dir: filepath.Join(c.Dir, "follow"), HTTP: c.HTTP, Now: c.Now, Logger: c.Logger,
		OnRefuse: func(string, error) { mm.refused.Add(1) }})
	if err != nil {
		return nil, err
	}
	m, err := ctmirror.Open(ctmirror.Config{Dir: filepath.Join(c.Dir, "mirror"), Signer: signer, Verifier: verifier, LogKey: f.Verifier(),
		Now: c.Now, Logger: c.Logger})
	if err != nil {
		f.Close()
		return nil, err
	}
	mm.f, mm.m = f, m
	return mm, nil
}

// Sync follows the log one step and brings the mirror to what was
// verified. On a refusal the last good tree is kept and served.
func (m *Mirror) Sync(ctx context.Context) (*ctfollow.State, error) {
	st, err := m.f.Sync(ctx, nil)
	if err == nil {
		_, err = m.m.Update(ctx, ctmirror.Snapshot{Checkpoint: st.Checkpoint, KeysPath: m.f.KeysPath(), KeyCount: st.KeyCount})
		if errors.Is(err, ctmirror.ErrRollback) || errors.Is(err, ctmirror.ErrFork) {
			m.refused.Add(1)
		}
	}
	m.mu.Lock()
	m.lastSync = m.now()
	m.lastErr = ""
	if err != nil {
		m.lastErr = err.Error()
	}
	m.mu.Unlock()
	return st, err
}

// Run syncs every interval until ctx ends, logging failures.
func (m *Mirror) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := m.Sync(ctx); err != nil && ctx.Err() == nil {
				m.log.Error("ct mirror: sync failed; serving the last good tree", "err", err)
			}
		}
	}
}

// Prove returns the proof for key under the last signed head.
func (m *Mirror) Prove(key [32]byte) (*treeproof.Response, error) {
	r, err := m.m.Prove(key)
	if errors.Is(err, ctmirror.ErrNoTree) {
		return nil, fmt.Errorf("%w: %w", prover.ErrNotSynced, err)
	}
	return r, err
}

// PKIE returns prover.CT.
func (m *Mirror) PKIE() string { return prover.CT }

// RefusedSyncs counts syncs refused because the log went back on what was
// verified (rollback, fork, bad signature, entries not matching).
func (m *Mirror) RefusedSyncs() uint64 { return m.refused.Load() }

// Status reports the mirror as prover.Status.
func (m *Mirror) Status() prover.Status {
	_, h := m.m.Head()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := prover.Status{PKIE: prover.CT, Synced: h != nil, LastSync: m.lastSync, LastError: m.lastErr, RefusedTrees: m.refused.Load()}
	if h != nil {
		s.Origin, s.Size, s.LogSize, s.CheckpointTime = h.Origin, h.Size, h.Log.Size, h.Time
	}
	return s
}

// Health reports an unsynced mirror or one whose head is older than the
// health maximum age.
func (m *Mirror) Health() error {
	st := m.Status()
	if !st.Synced {
		if st.LastError != "" {
			return fmt.Errorf("ct prover: not synced: %s", st.LastError)
		}
		return errors.New("ct prover: not synced")
	}
	if age := m.now().Sub(st.CheckpointTime); age > m.maxAge {
		msg := fmt.Sprintf("ct prover: head of %s is %s old, over the %s maximum clients accept (health_max_age)",
			st.CheckpointTime.UTC().Format(time.RFC3339), age.Round(time.Second), m.maxAge)
		if st.LastError != "" {
			msg += "; last sync: " + st.LastError
		}
		return errors.New(msg)
	}
	return nil
}

// SignedHead returns the last signed head, or nil. (Not Head: a cloud
// hands a prover's Head to peer replicas as its TTP's statement, and this
// head is the mirror's own.)
func (m *Mirror) SignedHead() []byte {
	msg, _ := m.m.Head()
	return msg
}

// Handler serves the mirror's head, tree file and health
// (ctmirror.Mirror.Handler) under the prefix the caller mounts it at.
func (m *Mirror) Handler() http.Handler {
	return m.m.Handler(ctmirror.HandlerOptions{HealthMaxAge: m.maxAge})
}

// Close closes the follower and the mirror.
func (m *Mirror) Close() error {
	return errors.Join(m.m.Close(), m.f.Close())
}
