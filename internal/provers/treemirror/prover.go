// Package treemirror is a PKIE prover (pkie.Prover) over a Prover of
// package prover: it mirrors a trusted third party that publishes its
// sorted tree as a feed, the revocation authority, for the cloud.
package treemirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
)

// Defaults of a mirror, as `pkie prover serve` has them.
const (
	DefaultSyncInterval = 30 * time.Second
	DefaultMaxAge       = 24 * time.Hour
)

// MirrorConfig is how a prover reaches and trusts its TTP.
type MirrorConfig struct {
	PKIE     string // prover.Revocation (CT logs publish no feed: internal/provers/ct mirrors them)
	URL      string // the TTP's base URL (its feed is URL/v1/sorted)
	Key      string // the TTP's pinned note verifier key
	Interval time.Duration
	MaxAge   time.Duration // refuse heads older than this at sync
	// HealthMaxAge is the head age past which Health reports the prover
	// unhealthy: the oldest head its clients accept. Zero means
	// treeproof.DefaultClientMaxAge, the verifiers' default.
	HealthMaxAge time.Duration
	Now          func() time.Time // nil: time.Now
}

// Prover is an enhancement's server half on a verified mirror of a TTP's
// sorted tree: package prover's Prover, built, synced and kept in sync as
// `pkie prover serve` does, with the TTP's head persisted in the host's data
// directory so that a restart still refuses a tree that goes back.
type Prover struct {
	id       pkie.ID
	p        *prover.Prover
	keyOf    func(*pkie.ProveRequest) ([32]byte, error)
	interval time.Duration
	maxAge   time.Duration // Health's limit: MirrorConfig.HealthMaxAge
	now      func() time.Time
	log      *slog.Logger
}

// NewProver builds the mirror, syncs it once (verifying what it fetched) and
// returns the prover; keyOf computes the key to prove for a request. A
// configuration that cannot work (no URL, a malformed key) is an
// error. A first sync that fails (the TTP unreachable, its tree refused as
// not extending what it signed before, or no record of that when
// env.RequireHistory asks for one) is not: the prover is returned without a
// tree, answers every request with pkie.ErrUnavailable, reports itself
// unhealthy, and retries at every sync while the host runs it, so that one
// TTP's trouble does not take the host's other enhancements down with it.
func NewProver(ctx context.Context, id pkie.ID, env pkie.ProverEnv, c MirrorConfig, keyOf func(*pkie.ProveRequest) ([32]byte, error)) (*Prover, error) {
	if c.URL == "" || c.Key == "" {
		return nil, fmt.Errorf("%s prover: the TTP's URL and its pinned key are both required", c.PKIE)
	}
	if c.Interval == 0 {
		c.Interval = DefaultSyncInterval
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.HealthMaxAge == 0 {
		c.HealthMaxAge = treeproof.DefaultClientMaxAge
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Interval < 0 || c.MaxAge < 0 || c.HealthMaxAge < 0 {
		return nil, fmt.Errorf("%s prover: sync interval, maximum age and health maximum age must be positive", c.PKIE)
	}
	v, err := checkpoint.NewVerifier(c.Key)
	if err != nil {
		return nil, fmt.Errorf("%s prover: TTP key: %w", c.PKIE, err)
	}
	hc := env.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := strings.TrimSuffix(c.URL, "/")
	cfg := prover.Config{PKIE: c.PKIE, Verifier: v, MaxAge: c.MaxAge, StateDir: env.DataDir, Now: c.Now,
		Feed: &feed.Client{Base: base + "/v1/sorted", HTTP: hc}, Floors: env.Peers, RequireFloor: env.RequireHistory}
	if env.DataDir == "" && !env.RequireHistory {
		log.Warn("no data directory: after a restart this prover accepts whatever tree its TTP signs first")
	}
	p, err := prover.New(cfg)
	if err != nil {
		return nil, err
	}
	if res, err := p.Sync(ctx); err != nil {
		log.Error("first sync failed: not serving this enhancement until a sync succeeds", "err", err, "retry_every", c.Interval)
	} else {
		log.Info("synced", "size", res.Size, "checkpoint_time", res.Time, "took", res.Duration)
	}
	return &Prover{id: id, p: p, keyOf: keyOf, interval: c.Interval, maxAge: c.HealthMaxAge, now: c.Now, log: log}, nil
}

// ID returns the enhancement's identifier.
func (p *Prover) ID() pkie.ID { return p.id }

// Mirror returns the underlying prover (its Status, a manual Sync).
func (p *Prover) Mirror() *prover.Prover { return p.p }

// Prove returns the proof for req's key under the last head synced.
func (p *Prover) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	key, err := p.keyOf(req)
	if err != nil {
		return nil, err
	}
	resp, err := p.p.Prove(key)
	if errors.Is(err, prover.ErrNotSynced) {
		return nil, fmt.Errorf("%w: %s prover holds no verified tree of its TTP: %w", pkie.ErrUnavailable, p.p.PKIE(), err)
	}
	if err != nil {
		return nil, err
	}
	b, err := treeproof.FromResponse(resp)
	if err != nil {
		return nil, err
	}
	body, err := b.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%s prover: %w", p.p.PKIE(), err)
	}
	return &pkie.Proof{ID: p.id, Version: treeproof.Version, Body: body}, nil
}

// Run syncs with the TTP every interval until ctx ends.
func (p *Prover) Run(ctx context.Context) {
	p.p.Run(ctx, p.interval, func(f string, a ...any) {
		p.log.Error(fmt.Sprintf(f, a...))
	})
}

// Head returns the signed head the mirror refuses to go back on (the last it
// accepted, or one a peer held), as the TTP signed it, or nil: what a
// fresh replica of the host learns from this one (pkie.ProverEnv.Peers).
func (p *Prover) Head() []byte { return p.p.Floor() }

// Health reports an unsynced mirror, or one whose head is older than the
// health maximum age (MirrorConfig.HealthMaxAge): clients with that
// max_age refuse its proofs.
func (p *Prover) Health() error {
	st := p.p.Status()
	if !st.Synced {
		if st.LastError != "" {
			return fmt.Errorf("%s prover: not synced: %s", st.PKIE, st.LastError)
		}
		return fmt.Errorf("%s prover: not synced", st.PKIE)
	}
	if age := p.now().Sub(st.CheckpointTime); age > p.maxAge {
		msg := fmt.Sprintf("%s prover: head of %s is %s old, over the %s maximum clients accept (health_max_age)", st.PKIE,
			st.CheckpointTime.UTC().Format(time.RFC3339), age.Round(time.Second), p.maxAge)
		if st.LastError != "" {
			msg += "; last sync: " + st.LastError
		}
		return errors.New(msg)
	}
	return nil
}
