// Package prover holds the HTTP server that serves the proofs of the two
// proof-based PKI enhancements (CT log presence / absence and revocation),
// and the Prover that mirrors a revocation authority's sorted-tree feed.
// (A CT log publishes no such feed: the ct prover, internal/provers/ct's
// Mirror, follows any log by its own read API and is a Source here too.)
// It is server code: the verifiers that check what it sends, and the
// Response it sends, are the client's, in package internal/pkies/treeproof.
//
// A Prover mirrors one trusted third party's sorted tree. It syncs over HTTP
// (package feed): it fetches the latest signed sorted-tree head (package
// checkpoint's Head), verifies its signature against the TTP's pinned key,
// its origin and its age, and that the log checkpoint it is bound to is
// signed by the same key and does not go back on the one bound to the head
// accepted before; it fetches only the keys published since its last sync,
// rebuilds the tree and checks that the rebuilt root is the signed one (and,
// for revocation, whose key log is exactly the feed, that the feed's keys
// in order hash to the bound log root) before it serves anything. A prover
// is never trusted by clients: every Response carries the TTP's signed
// head, and treeproof.VerifyCT and VerifyRevocation check it, the proof and the
// head's freshness against keys the client pinned. The freshness check is
// what defeats replay (the PEC paper, §7): an old "not revoked" proof carries an
// old head, which a verifier with a maximum age rejects once the TTP has
// had time to publish the revocation.
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
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/ttpstate"
	"github.com/pkie/pkie/sortedtree"
)

// PKIE names, as they appear in responses and on the command line.
const (
	CT         = treeproof.CT
	Revocation = treeproof.Revocation
)

// Config configures a Prover.
type Config struct {
	// PKIE is Revocation: the revocation authority serves its sorted
	// tree as a feed. (CT's prover follows any CT log by its own read
	// API: internal/provers/ct's Mirror.)
	PKIE string
	Feed feed.Source // the TTP's feed
	// Verifier is the TTP's pinned key, from checkpoint.NewVerifier: the
	// key of its log checkpoints, from which the heads' key is derived
	// (checkpoint.HeadVerifier).
	Verifier note.Verifier
	// Origin is the sorted-tree head origin to accept. Empty means the
	// only one there is, checkpoint.HeadOrigin of the key's name; any
	// other is an error.
	Origin string
	// MaxAge rejects a TTP checkpoint older than this at sync: a prover
	// should not relay what clients will refuse. Zero means 24h.
	MaxAge time.Duration
	Skew   time.Duration // allowed clock skew for future timestamps; zero means 1 minute
	Now    func() time.Time
	// Progress, if set, is told how many of the new keys have arrived.
	Progress func(done, total uint64)
	// StateDir, if set, is a directory (created 0700 if missing) where
	// the prover keeps the last head it accepted from this TTP (one file
	// per PKIE, head key and origin; see StatePath), so that after a
	// restart it still refuses a tree that shrinks or, at the same size,
	// has another root, and a bound log checkpoint that goes back. Without
	// it a restarted prover accepts whatever the TTP signs first. A file
	// left by a prover from before heads had their own type (a sorted-tree
	// root signed as a checkpoint, under the name LegacyStatePath gives) is
	// read once as the floor and replaced at the first sync.
	StateDir string
	// Floors, if set, is asked at each sync while the prover has no floor
	// (no state: a fresh replica, or a lost state file) for heads the TTP
	// signed before that others kept (the host's peer replicas). Each is
	// verified with the TTP's key and the one bound to the largest log
	// becomes the floor, saved to StateDir like an accepted head; one
	// that does not verify is ignored. Two that differ at the same log
	// size are the TTP's fork: the sync is refused.
	Floors func(ctx context.Context) [][]byte
	// RequireFloor refuses a sync while the prover has no floor (from
	// StateDir or Floors): it serves nothing rather than accept whatever
	// the TTP signs first, which may be a fork of what it published.
	RequireFloor bool
}

// StatePath returns the file in dir where a prover of pkie keeps the last
// head it accepted from the TTP with head key v (checkpoint.HeadVerifier)
// and head origin.
func StatePath(dir, pkie string, v note.Verifier, origin string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%08x\n%s", pkie, v.Name(), v.KeyHash(), origin))
	return filepath.Join(dir, fmt.Sprintf("%s-%x.state", pkie, h[:8]))
}

// ErrRollback is wrapped by Sync's error when the TTP's tree does not
// extend the one the prover accepted before: smaller, or of the same size
// with another root. The prover keeps serving what it had.
var ErrRollback = errors.New("the TTP's tree does not extend the one accepted before")

// ErrNoFloor is wrapped by Sync's error when Config.RequireFloor is set and
// the prover knows nothing the TTP signed before.
var ErrNoFloor = errors.New("no record of what the TTP signed before")

// LegacyStatePath returns the state file a prover kept before sorted-tree
// heads had their own type, for the TTP with key v: named by that key and
// the origin its sorted-tree roots were then signed under.
func LegacyStatePath(dir, pkie string, v note.Verifier) string {
	return StatePath(dir, pkie, v, v.Name())
}

// Prover serves proofs from a verified mirror of a TTP's sorted tree.
type Prover struct {
	cfg Config

	syncMu sync.Mutex // one sync at a time

	mu       sync.RWMutex
	tree     *sortedtree.Tree
	list     *sortedtree.List // revocation: the feed's keys in order, the key log
	cpMsg    []byte
	cp       *checkpoint.Head
	lastSync time.Time
	lastErr  error

	// floor is the last head accepted, this run or (with a state
	// directory) an earlier one; refused counts trees refused against it.
	// A floor read from a legacy state file has no bound log (empty
	// Log.Origin).
	floor      *checkpoint.Head
	floorMsg   []byte // floor's signed note; nil for a legacy floor
	statePath  string
	legacyPath string // a legacy state file to remove once statePath is written
	refused    uint64
}

// New returns a prover with an empty mirror; call Sync before serving.
func New(cfg Config) (*Prover, error) {
	if cfg.PKIE == CT {
		return nil, errors.New("prover: CT logs publish no sorted-tree feed; the ct prover is internal/provers/ct's Mirror")
	}
	if cfg.PKIE != Revocation {
		return nil, fmt.Errorf("prover: unknown PKIE %q", cfg.PKIE)
	}
	if cfg.Feed == nil || cfg.Verifier == nil {
		return nil, errors.New("prover: a feed and a pinned TTP key are required")
	}
	headV, err := checkpoint.HeadVerifier(cfg.Verifier)
	if err != nil {
		return nil, fmt.Errorf("prover %s: %w", cfg.PKIE, err)
	}
	if cfg.Origin == "" {
		cfg.Origin = treeproof.DefaultOrigin(cfg.PKIE, cfg.Verifier)
	}
	if cfg.Origin != headV.Name() {
		return nil, fmt.Errorf("prover %s: origin %q: the heads of key %q have origin %q", cfg.PKIE, cfg.Origin, cfg.Verifier.Name(), headV.Name())
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
		p.statePath = StatePath(cfg.StateDir, cfg.PKIE, headV, cfg.Origin)
		st, err := ttpstate.Read(p.statePath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := p.readLegacyState(); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, fmt.Errorf("prover %s: %w", cfg.PKIE, err)
		default:
			if p.floor, err = checkpoint.OpenHeadAnyAge([]byte(st.Checkpoint), cfg.Verifier); err != nil {
				return nil, fmt.Errorf("prover %s: %s: %w", cfg.PKIE, p.statePath, err)
			}
			p.floorMsg = []byte(st.Checkpoint)
		}
	}
	return p, nil
}

// readLegacyState takes the floor from a state file a prover wrote before
// sorted-tree heads had their own type, if there is one: the sorted tree's
// size, root and time, verified with the TTP's key under the origin it then
// signed. Sync replaces the file with one under StatePath. A legacy file
// that does not verify is refused, as any corrupted state is.
func (p *Prover) readLegacyState() error {
	path := LegacyStatePath(p.cfg.StateDir, p.cfg.PKIE, p.cfg.Verifier)
	st, err := ttpstate.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // first contact with this TTP
	}
	if err != nil {
		return fmt.Errorf("prover %s: %w", p.cfg.PKIE, err)
	}
	origin := p.cfg.Verifier.Name()
	c, err := checkpoint.OpenLegacyHead([]byte(st.Checkpoint), p.cfg.Verifier, origin)
	if err != nil {
		return fmt.Errorf("prover %s: %s (a state file from before sorted-tree heads): %w", p.cfg.PKIE, path, err)
	}
	p.floor = &checkpoint.Head{Origin: p.cfg.Origin, Size: c.Size, Root: c.Root, Time: c.Time}
	p.legacyPath = path
	return nil
}

// checkFloor refuses a head that goes back on floor: a smaller sorted
// tree, another root at the same size, or a bound log checkpoint smaller
// than floor's or of the same size with another root. Whether a larger log
// checkpoint extends floor's takes a consistency proof the feed does not
// serve; for revocation the rebuilt key log checks it (sync).
func checkFloor(floor, h *checkpoint.Head) error {
	when := floor.Time.UTC().Format(time.RFC3339)
	switch {
	case h.Size < floor.Size:
		return fmt.Errorf("sorted tree of %d entries is behind the %d last signed and accepted (root %x…, %s)", h.Size, floor.Size, floor.Root[:8], when)
	case h.Size == floor.Size && h.Root != floor.Root:
		return fmt.Errorf("sorted tree of %d keys has root %x…, but the head accepted at that size (%s) has root %x…", h.Size, h.Root[:8], when, floor.Root[:8])
	case floor.Log.Origin == "":
		return nil // a legacy floor names no log
	case h.Log.Size < floor.Log.Size:
		return fmt.Errorf("head bound to a log of %d entries, behind the %d of the head accepted before (%s)", h.Log.Size, floor.Log.Size, when)
	case h.Log.Size == floor.Log.Size && h.Log.Root != floor.Log.Root:
		return fmt.Errorf("head bound to a log of %d entries with root %x…, but the head accepted before (%s) was bound to root %x… at that size", h.Log.Size, h.Log.Root[:8], when, floor.Log.Root[:8])
	}
	return nil
}

// floorLogSize is the size of the key log floor was bound to, or 0 when it
// names none (a legacy floor) or there is no floor.
func floorLogSize(floor *checkpoint.Head) uint64 {
	if floor == nil || floor.Log.Origin == "" {
		return 0
	}
	return floor.Log.Size
}

// learnFloor asks Config.Floors for heads the TTP signed before, takes the
// one bound to the largest log as the floor and saves it to the state
// directory. It returns nil, nil when no head verifies: the caller then
// has no floor, as before.
func (p *Prover) learnFloor(ctx context.Context) (*checkpoint.Head, error) {
	var best *checkpoint.Head
	var bestMsg []byte
	for _, msg := range p.cfg.Floors(ctx) {
		h, err := checkpoint.OpenHeadAnyAge(msg, p.cfg.Verifier)
		if err != nil || treeproof.CheckLogSize(p.cfg.PKIE, h) != nil {
			continue // not the TTP's: a peer cannot forge one, only withhold
		}
		switch {
		case best == nil || h.Log.Size > best.Log.Size:
			best, bestMsg = h, msg
		case h.Log.Size == best.Log.Size && h.Log.Root != best.Log.Root:
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			return nil, fmt.Errorf("prover %s: REFUSED: %w: peers hold two heads of the TTP bound to a log of %d entries with roots %x… and %x…: it forked",
				p.cfg.PKIE, ErrRollback, h.Log.Size, best.Log.Root[:8], h.Log.Root[:8])
		case h.Log.Size == best.Log.Size && h.Time.After(best.Time):
			best, bestMsg = h, msg
		}
	}
	if best == nil {
		return nil, nil
	}
	if p.statePath != "" {
		if err := ttpstate.Write(p.statePath, &ttpstate.State{Checkpoint: string(bestMsg)}); err != nil {
			return nil, fmt.Errorf("prover %s: saving the head a peer held: %w", p.cfg.PKIE, err)
		}
	}
	p.mu.Lock()
	p.floor, p.floorMsg = best, bestMsg
	p.mu.Unlock()
	return best, nil
}

// Floor returns the signed head the prover refuses to go back on (the last
// it accepted, this run or before, or one a peer held), as the TTP signed
// it, or nil when it has none.
func (p *Prover) Floor() []byte {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.floorMsg
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
	cp, err := checkpoint.OpenHead(msg, p.cfg.Verifier, p.cfg.MaxAge, p.cfg.Skew, p.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("prover %s: TTP head rejected: %w", p.cfg.PKIE, err)
	}
	if err := treeproof.CheckLogSize(p.cfg.PKIE, cp); err != nil {
		return nil, fmt.Errorf("prover %s: TTP head rejected: %w", p.cfg.PKIE, err)
	}
	p.mu.RLock()
	old, list, floor := p.tree, p.list, p.floor
	p.mu.RUnlock()
	if floor == nil && p.cfg.Floors != nil {
		if floor, err = p.learnFloor(ctx); err != nil {
			return nil, err
		}
	}
	if floor == nil && p.cfg.RequireFloor {
		return nil, fmt.Errorf("prover %s: %w: no state, and no peer holds a head it signed; not serving the tree it signs now, which may be a fork of what it published", p.cfg.PKIE, ErrNoFloor)
	}
	var have uint64
	if old != nil {
		have = old.Size()
	}
	if floor != nil {
		if err := checkFloor(floor, cp); err != nil {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			return nil, fmt.Errorf("prover %s: REFUSED: %w: %w; keeping the last good tree", p.cfg.PKIE, ErrRollback, err)
		}
		if cp.Time.Before(floor.Time) {
			return nil, fmt.Errorf("prover %s: TTP head of %s is older than the one accepted before (%s)", p.cfg.PKIE,
				cp.Time.UTC().Format(time.RFC3339), floor.Time.UTC().Format(time.RFC3339))
		}
	}
	tree := old
	if cp.Size > have || old == nil {
		fresh, err := feed.FetchAll(ctx, p.cfg.Feed, have, cp.Size, p.cfg.Progress)
		if err != nil {
			return nil, fmt.Errorf("prover %s: %w", p.cfg.PKIE, err)
		}
		if p.cfg.PKIE == Revocation {
			// The key log is the feed: hash it in order before the tree
			// sorts the keys in place.
			if list == nil || old == nil {
				list = &sortedtree.List{}
				// A key log rebuilt from nothing must hold, as its prefix,
				// the one the floor was bound to: checkFloor compared only
				// sizes, and a forked authority's longer log is
				// consistent in itself.
				rest := fresh
				if n := floorLogSize(floor); n > 0 {
					if n > uint64(len(fresh)) {
						return nil, fmt.Errorf("prover %s: the feed gave %d keys, fewer than the %d of the key log accepted before", p.cfg.PKIE, len(fresh), n)
					}
					list.Append(fresh[:n]...)
					if r := list.Root(); r != floor.Log.Root {
						p.mu.Lock()
						p.refused++
						p.mu.Unlock()
						return nil, fmt.Errorf("prover %s: REFUSED: %w: the key log's first %d keys hash to %x…, but the head accepted before (%s) was bound to root %x… at that size; keeping the last good tree",
							p.cfg.PKIE, ErrRollback, n, r[:8], floor.Time.UTC().Format(time.RFC3339), floor.Log.Root[:8])
					}
					rest = fresh[n:]
				}
				list.Append(rest...)
			} else {
				list = list.Clone()
				list.Append(fresh...)
			}
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
	if list != nil && list.Root() != cp.Log.Root {
		return nil, fmt.Errorf("prover %s: the feed's %d keys in order hash to %x, the head is bound to a key log with root %x; not serving it", p.cfg.PKIE, list.Size(), list.Root(), cp.Log.Root)
	}
	// Persist before serving: once a client holds a proof on this tree, a
	// restarted prover must not go back behind it.
	if p.statePath != "" && (floor == nil || floor.Size != cp.Size || !floor.Time.Equal(cp.Time) || floor.Log.Size != cp.Log.Size || floor.Log.Root != cp.Log.Root) {
		if err := ttpstate.Write(p.statePath, &ttpstate.State{Checkpoint: string(msg)}); err != nil {
			return nil, fmt.Errorf("prover %s: %w; not serving the new tree", p.cfg.PKIE, err)
		}
		if p.legacyPath != "" {
			// Converted: the new file holds a later head.
			if err := os.Remove(p.legacyPath); err == nil || errors.Is(err, os.ErrNotExist) {
				p.legacyPath = ""
			}
		}
	}
	p.mu.Lock()
	p.tree, p.list, p.cp, p.cpMsg, p.floor, p.floorMsg = tree, list, cp, msg, cp, msg
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
// signed head it verifies against.
func (p *Prover) Prove(key [32]byte) (*treeproof.Response, error) {
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
	return &treeproof.Response{Version: treeproof.ResponseVersion, PKIE: p.cfg.PKIE, Key: key, Present: pr.Present(),
		Checkpoint: string(msg), Proof: bin}, nil
}

// Status is a prover's sync state.
type Status struct {
	PKIE           string    `json:"pkie"`
	Origin         string    `json:"origin"`
	Synced         bool      `json:"synced"`
	Size           uint64    `json:"size"`
	LogSize        uint64    `json:"log_size"` // of the log checkpoint the head is bound to
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
		s.Size, s.LogSize, s.CheckpointTime = p.cp.Size, p.cp.Log.Size, p.cp.Time
	}
	if p.lastErr != nil {
		s.LastError = p.lastErr.Error()
	}
	return s
}
