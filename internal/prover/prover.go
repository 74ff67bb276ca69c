// Package prover holds the provers of the two proof-based PKI enhancements
// (CT log presence / absence and revocation) and the client-side verifiers
// that check what they send.
//
// A Prover mirrors one trusted third party's sorted tree. It syncs over HTTP
// (package feed): it fetches the latest signed checkpoint, verifies its
// signature against the TTP's pinned key, its origin and its age, fetches
// only the keys published since its last sync, rebuilds the tree and checks
// that the rebuilt root is the signed one before it serves anything. A
// prover is never trusted by clients: every Response carries the TTP's
// signed checkpoint, and VerifyCT and VerifyRevocation check it, the proof
// and the checkpoint's freshness against keys the client pinned. The
// freshness check is what defeats replay (the PEC paper, §7): an old "not
// revoked" proof carries an old checkpoint, which a verifier with a maximum
// age rejects once the TTP has had time to publish the revocation.
package prover

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/ttpstate"
	"github.com/pkie/pkie/sortedtree"
)

// PKIE names, as they appear in responses and on the command line.
const (
	CT         = "ct"
	Revocation = "revocation"
)

// Config configures a Prover.
type Config struct {
	PKIE     string        // CT or Revocation
	Feed     feed.Source   // the TTP's feed
	Verifier note.Verifier // the TTP's pinned key
	// Origin is the checkpoint origin to accept. Empty means the default
	// for the PKIE: the key's name plus "/sorted" for CT (the log's sorted
	// tree), the key's name for revocation.
	Origin string
	// MaxAge rejects a TTP checkpoint older than this at sync: a prover
	// should not relay what clients will refuse. Zero means 24h.
	MaxAge time.Duration
	Skew   time.Duration // allowed clock skew for future timestamps; zero means 1 minute
	Now    func() time.Time
	// Progress, if set, is told how many of the new keys have arrived.
	Progress func(done, total uint64)
	// StateDir, if set, is a directory (created 0700 if missing) where
	// the prover keeps the last checkpoint it accepted from this TTP (one
	// file per PKIE, key and origin; see StatePath), so that after a
	// restart it still refuses a tree that shrinks or, at the same size,
	// has another root. Without it a restarted prover accepts whatever the
	// TTP signs first.
	StateDir string
}

// StatePath returns the file in dir where a prover of pkie keeps the last
// checkpoint it accepted from the TTP with key v and checkpoint origin.
func StatePath(dir, pkie string, v note.Verifier, origin string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%08x\n%s", pkie, v.Name(), v.KeyHash(), origin))
	return filepath.Join(dir, fmt.Sprintf("%s-%x.state", pkie, h[:8]))
}

// ErrRollback is wrapped by Sync's error when the TTP's tree does not
// extend the one the prover accepted before: smaller, or of the same size
// with another root. The prover keeps serving what it had.
var ErrRollback = errors.New("the TTP's tree does not extend the one accepted before")

// DefaultOrigin returns the checkpoint origin a PKIE's TTP key signs.
func DefaultOrigin(pkie string, v note.Verifier) string {
	if pkie == CT {
		return v.Name() + "/sorted"
	}
	return v.Name()
}

// Prover serves proofs from a verified mirror of a TTP's sorted tree.
type Prover struct {
	cfg Config

	syncMu sync.Mutex // one sync at a time

	mu       sync.RWMutex
	tree     *sortedtree.Tree
	cpMsg    []byte
	cp       *checkpoint.Checkpoint
	lastSync time.Time
	lastErr  error

	// floor is the last checkpoint accepted, this run or (with a state
	// directory) an earlier one; refused counts trees refused against it.
	floor     *checkpoint.Checkpoint
	statePath string
	refused   uint64
}

// New returns a prover with an empty mirror; call Sync before serving.
func New(cfg Config) (*Prover, error) {
	if cfg.PKIE != CT && cfg.PKIE != Revocation {
		return nil, fmt.Errorf("prover: unknown PKIE %q", cfg.PKIE)
	}
	if cfg.Feed == nil || cfg.Verifier == nil {
		return nil, errors.New("prover: a feed and a pinned TTP key are required")
	}
	if cfg.Origin == "" {
		cfg.Origin = DefaultOrigin(cfg.PKIE, cfg.Verifier)
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.Skew == 0 {
		cfg.Skew = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Prover{cfg: cfg}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("prover %s: state directory: %w", cfg.PKIE, err)
		}
		p.statePath = StatePath(cfg.StateDir, cfg.PKIE, cfg.Verifier, cfg.Origin)
		st, err := ttpstate.Read(p.statePath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// First contact with this TTP.
		case err != nil:
			return nil, fmt.Errorf("prover %s: %w", cfg.PKIE, err)
		default:
			if p.floor, err = ttpstate.Open(st.Checkpoint, cfg.Verifier, cfg.Origin); err != nil {
				return nil, fmt.Errorf("prover %s: %s: %w", cfg.PKIE, p.statePath, err)
			}
		}
	}
	return p, nil
}

// PKIE returns the prover's PKIE name.
func (p *Prover) PKIE() string { return p.cfg.PKIE }

// SyncResult describes one sync.
type SyncResult struct {
	Size     uint64    `json:"size"`
	NewKeys  uint64    `json:"new_keys"`
	Time     time.Time `json:"checkpoint_time"`
	Duration time.Duration
}

// Sync brings the mirror up to the TTP's latest checkpoint. On any error
// the mirror keeps serving what it had (whose checkpoint verifiers will
// judge by age).
func (p *Prover) Sync(ctx context.Context) (*SyncResult, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	start := time.Now()
	res, err := p.sync(ctx)
	p.mu.Lock()
	p.lastErr = err
	if err == nil {
		p.lastSync = p.cfg.Now()
	}
	p.mu.Unlock()
	if res != nil {
		res.Duration = time.Since(start)
	}
	return res, err
}

func (p *Prover) sync(ctx context.Context) (*SyncResult, error) {
	msg, err := p.cfg.Feed.LatestCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("prover %s: fetching checkpoint: %w", p.cfg.PKIE, err)
	}
	cp, err := checkpoint.Open(msg, p.cfg.Verifier, p.cfg.Origin, p.cfg.MaxAge, p.cfg.Skew, p.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("prover %s: TTP checkpoint rejected: %w", p.cfg.PKIE, err)
	}
	p.mu.RLock()
	old, floor := p.tree, p.floor
	p.mu.RUnlock()
	var have uint64
	if old != nil {
		have = old.Size()
	}
	if floor != nil {
		if err := ttpstate.CheckExtends(floor, cp); err != nil {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			return nil, fmt.Errorf("prover %s: REFUSED: %w: %w; keeping the last good tree", p.cfg.PKIE, ErrRollback, err)
		}
		if cp.Time.Before(floor.Time) {
			return nil, fmt.Errorf("prover %s: TTP checkpoint of %s is older than the one accepted before (%s)", p.cfg.PKIE,
				cp.Time.UTC().Format(time.RFC3339), floor.Time.UTC().Format(time.RFC3339))
		}
	}
	tree := old
	if cp.Size > have || old == nil {
		fresh, err := feed.FetchAll(ctx, p.cfg.Feed, have, cp.Size, p.cfg.Progress)
		if err != nil {
			return nil, fmt.Errorf("prover %s: %w", p.cfg.PKIE, err)
		}
		// Merging the new keys into the held tree costs one linear pass
		// instead of sorting every key again.
		if old != nil {
			tree = old.Merge(fresh)
		} else {
			tree = sortedtree.Build(fresh)
		}
	}
	if tree.Size() != cp.Size {
		return nil, fmt.Errorf("prover %s: feed gave %d distinct keys, checkpoint signs %d", p.cfg.PKIE, tree.Size(), cp.Size)
	}
	if tree.Root() != cp.Root {
		return nil, fmt.Errorf("prover %s: rebuilt root %x does not match the signed root %x; not serving it", p.cfg.PKIE, tree.Root(), cp.Root)
	}
	// Persist before serving: once a client holds a proof on this tree, a
	// restarted prover must not go back behind it.
	if p.statePath != "" && (floor == nil || floor.Size != cp.Size || !floor.Time.Equal(cp.Time)) {
		if err := ttpstate.Write(p.statePath, &ttpstate.State{Checkpoint: string(msg)}); err != nil {
			return nil, fmt.Errorf("prover %s: %w; not serving the new tree", p.cfg.PKIE, err)
		}
	}
	p.mu.Lock()
	p.tree, p.cp, p.cpMsg, p.floor = tree, cp, msg, cp
	p.mu.Unlock()
	return &SyncResult{Size: cp.Size, NewKeys: cp.Size - have, Time: cp.Time}, nil
}

// Run syncs every interval until ctx ends, reporting errors to logf.
func (p *Prover) Run(ctx context.Context, interval time.Duration, logf func(format string, a ...any)) {
	feed.Every(ctx, interval, "sync", func(ctx context.Context) error {
		_, err := p.Sync(ctx)
		return err
	}, logf)
}

// ErrNotSynced is returned by Prove before the first successful sync.
var ErrNotSynced = errors.New("prover: not synced with its TTP yet")

// Prove returns a presence or absence proof for key, bundled with the
// signed checkpoint it verifies against.
func (p *Prover) Prove(key [32]byte) (*Response, error) {
	p.mu.RLock()
	tree, msg := p.tree, p.cpMsg
	p.mu.RUnlock()
	if tree == nil {
		return nil, ErrNotSynced
	}
	pr, err := tree.Prove(key)
	if err != nil {
		return nil, fmt.Errorf("prover %s: %w", p.cfg.PKIE, err)
	}
	bin, err := pr.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("prover %s: %w", p.cfg.PKIE, err)
	}
	return &Response{Version: ResponseVersion, PKIE: p.cfg.PKIE, Key: key, Present: pr.Present(),
		Checkpoint: string(msg), Proof: bin}, nil
}

// Status is a prover's sync state.
type Status struct {
	PKIE           string    `json:"pkie"`
	Origin         string    `json:"origin"`
	Synced         bool      `json:"synced"`
	Size           uint64    `json:"size"`
	CheckpointTime time.Time `json:"checkpoint_time,omitzero"`
	LastSync       time.Time `json:"last_sync,omitzero"`
	LastError      string    `json:"last_error,omitempty"`
	// RefusedTrees counts syncs that refused a tree not extending the one
	// accepted before (ErrRollback): alert on any.
	RefusedTrees uint64 `json:"refused_trees"`
}

// Status reports the prover's sync state.
func (p *Prover) Status() Status {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := Status{PKIE: p.cfg.PKIE, Origin: p.cfg.Origin, Synced: p.tree != nil, LastSync: p.lastSync, RefusedTrees: p.refused}
	if p.cp != nil {
		s.Size, s.CheckpointTime = p.cp.Size, p.cp.Time
	}
	if p.lastErr != nil {
		s.LastError = p.lastErr.Error()
	}
	return s
}
