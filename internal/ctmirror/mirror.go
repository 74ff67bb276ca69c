// Package ctmirror is a mirror of a Certificate Transparency log's
// certificates as a sorted Merkle tree (package sortedtree): from the keys
// a follower (internal/ctfollow) verified up to a log checkpoint, it builds
// the tree file at the scale of real logs (sortedtree.BuildFile: hundreds
// of millions of keys, memory-mapped, never a Go slice of them), signs a
// sorted-tree head with the mirror's own Ed25519 key bound to that
// checkpoint (checkpoint.Head), persists both, serves them over HTTP and
// proves a certificate's presence or absence.
//
// Anyone can check a mirror: Audit rebuilds the tree from the log's public
// data at the head's checkpoint and compares.
//
// A mirror never goes back: it refuses to sign a head bound to a
// checkpoint smaller than the one it last signed for, or of the same size
// with another root, and it refuses to start from a state directory whose
// tree or head is missing or does not match (a lost or corrupt store is
// reported, never served as empty).
package ctmirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/sortedtree"
)

// Names of the files in Config.Dir.
const (
	// StateFile holds the last signed head and how many keys of the keys
	// file its tree holds (JSON, mode 0600).
	StateFile = "mirror.json"
	// treePrefix and treeSuffix name tree files: sorted-<log size>.tree.
	treePrefix = "sorted-"
	treeSuffix = ".tree"
)

// Config configures a mirror.
type Config struct {
	// Dir holds the tree file and the state; created if missing.
	Dir string
	// Signer is the mirror's Ed25519 signed-note key (ReadKey,
	// checkpoint.ReadSignerFile); its name is the heads' origin.
	Signer note.Signer
	// Verifier is Signer's verifier (checkpoint.NewVerifier), with which
	// the mirror reopens its own heads.
	Verifier note.Verifier
	// LogKey is the log's key (checkpoint.NewLogVerifier, or the
	// follower's Verifier()): every checkpoint is verified with it before
	// a head is bound to it.
	LogKey note.Verifier
	// Now returns the time; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per build and per refusal; nil means
	// slog.Default().
	Logger *slog.Logger
	// Progress, if set, receives the build stages.
	Progress func(sortedtree.BuildProgress)
}

// Snapshot is what a mirror builds from: a follower's verified state. The
// keys file holds, in entry order, the sorted-tree keys of the log's
// entries up to Checkpoint (ctwire.EntryKeys); its first KeyCount keys
// are valid.
type Snapshot struct {
	Checkpoint []byte // the log's signed checkpoint note
	KeysPath   string
	KeyCount   uint64
}

// Errors a mirror refuses with; test with errors.Is.
var (
	// ErrRollback: the checkpoint offered is smaller than the one the
	// mirror last signed for, or the keys file holds fewer keys.
	ErrRollback = errors.New("ctmirror: the log checkpoint goes back on the one the mirror last signed for")
	// ErrFork: a checkpoint of the same size as the last one signed for,
	// with another root.
	ErrFork = errors.New("ctmirror: the log checkpoint has the size of the one the mirror last signed for, and another root")
	// ErrState: the state directory is lost or corrupt.
	ErrState = errors.New("ctmirror: mirror state is missing or corrupt")
	// ErrNoTree: no head has been signed yet.
	ErrNoTree = errors.New("ctmirror: no tree built yet")
)

// Mirror is a sorted-tree mirror of one log. Its methods are safe for
// concurrent use; updates run one at a time.
type Mirror struct {
	c   Config
	log *slog.Logger

	updateMu sync.Mutex // held for a whole Update or Refresh

	mu   sync.RWMutex // guards the fields below; readers hold it while using tree
	tree *sortedtree.Tree
	path string // tree file
	head []byte // signed head note
	h    *checkpoint.Head
	keys uint64 // keys of the keys file the tree holds
}

// stateJSON is the state file.
type stateJSON struct {
	Version int    `json:"version"`
	Head    string `json:"head"`
	Tree    string `json:"tree"` // file name in Dir
	Keys    uint64 `json:"keys"`
}

const stateVersion = 1

// Open opens the mirror in c.Dir: a fresh directory gives a mirror with no
// tree yet (Update builds one); a directory a mirror wrote reopens its tree
// file memory-mapped, without rebuilding, after checking that the head
// verifies (mirror key and log key) and names exactly that tree. A state
// file that does not parse or verify, a tree file missing or not matching,
// or tree files without a state file are ErrState: never started over
// silently.
func Open(c Config) (*Mirror, error) {
	if c.Dir == "" || c.Signer == nil || c.Verifier == nil || c.LogKey == nil {
		return nil, errors.New("ctmirror: Dir, Signer, Verifier and LogKey are all required")
	}
	if c.Signer.Name() != c.Verifier.Name() || c.Signer.KeyHash() != c.Verifier.KeyHash() {
		return nil, fmt.Errorf("ctmirror: signer %q and verifier %q hold different keys", c.Signer.Name(), c.Verifier.Name())
	}
	if c.Signer.Name() == c.LogKey.Name() {
		return nil, fmt.Errorf("ctmirror: the mirror's key is named %q like the log: give the mirror a name of its own", c.Signer.Name())
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ctmirror: %w", err)
	}
	m := &Mirror{c: c, log: c.Logger.With("mirror", c.Signer.Name(), "log", c.LogKey.Name())}
	raw, err := os.ReadFile(filepath.Join(c.Dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		if trees, _ := filepath.Glob(filepath.Join(c.Dir, treePrefix+"*"+treeSuffix)); len(trees) > 0 {
			return nil, fmt.Errorf("%w: %s holds tree files (%s) but no %s: refusing to start over", ErrState, c.Dir, filepath.Base(trees[0]), StateFile)
		}
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	var st stateJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Version != stateVersion || st.Tree == "" || filepath.Base(st.Tree) != st.Tree {
		return nil, fmt.Errorf("%w: %s does not parse as a version %d state (%v)", ErrState, StateFile, stateVersion, err)
	}
	h, err := checkpoint.OpenMirrorHeadAnyAge([]byte(st.Head), c.Verifier, c.LogKey)
	if err != nil {
		return nil, fmt.Errorf("%w: the saved head does not verify: %w", ErrState, err)
	}
	path := filepath.Join(c.Dir, st.Tree)
	t, err := sortedtree.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: the tree of the saved head: %w", ErrState, err)
	}
	if t.Size() != h.Size || t.Root() != h.Root {
		t.Close()
		return nil, fmt.Errorf("%w: %s holds %d keys with root %x, the saved head %d keys with root %x", ErrState, st.Tree, t.Size(), t.Root(), h.Size, h.Root)
	}
	m.tree, m.path, m.head, m.h, m.keys = t, path, []byte(st.Head), h, st.Keys
	return m, nil
}

// Update brings the mirror to snap. A checkpoint larger than the last one
// the mirror signed for gets a new tree, the keys added since merged into
// the previous tree's (sortedtree.BuildFile), and a head bound to it; the
// same checkpoint gets a fresh head over the same tree (so the head stays
// younger than clients' maximum age). A smaller checkpoint (ErrRollback),
// one of the same size with another root (ErrFork), one that does not
// verify with the log's key, or a keys file that shrank, is refused and
// the last good tree and head are kept.
func (m *Mirror) Update(ctx context.Context, snap Snapshot) (*checkpoint.Head, error) {
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	var h checkpoint.Head
	if err := h.BindLog(snap.Checkpoint, m.c.LogKey); err != nil {
		return nil, fmt.Errorf("ctmirror: the log checkpoint: %w", err)
	}
	m.mu.RLock()
	last, lastKeys, base := m.h, m.keys, m.tree
	m.mu.RUnlock()
	if last != nil {
		switch {
		case h.Log.Size < last.Log.Size:
			return nil, m.refuse(fmt.Errorf("%w: checkpoint of %d entries, after one of %d", ErrRollback, h.Log.Size, last.Log.Size))
		case h.Log.Size == last.Log.Size && h.Log.Root != last.Log.Root:
			return nil, m.refuse(fmt.Errorf("%w: %d entries with root %x, and before %x", ErrFork, h.Log.Size, h.Log.Root, last.Log.Root))
		case h.Log.Size == last.Log.Size:
			return m.resign(h)
		}
	}
	if snap.KeyCount < lastKeys {
		return nil, m.refuse(fmt.Errorf("%w: the keys file holds %d keys, the tree already %d", ErrRollback, snap.KeyCount, lastKeys))
	}
	path := filepath.Join(m.c.Dir, fmt.Sprintf("%s%d%s", treePrefix, h.Log.Size, treeSuffix))
	start := time.Now()
	stats, err := sortedtree.BuildFile(ctx, path, snap.KeysPath, lastKeys, snap.KeyCount-lastKeys, sortedtree.BuildFileOptions{Base: base, Progress: m.c.Progress})
	if err != nil {
		return nil, fmt.Errorf("ctmirror: building the tree of %d entries: %w", h.Log.Size, err)
	}
	t, err := sortedtree.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: opening the tree just built: %w", err)
	}
	h.Origin, h.Size, h.Root, h.Time = m.c.Signer.Name(), t.Size(), t.Root(), m.now()
	if h.Size > 2*h.Log.Size {
		// EntryKeys gives at most two keys an entry.
		t.Close()
		os.Remove(path)
		return nil, fmt.Errorf("ctmirror: %d keys from a log of %d entries", h.Size, h.Log.Size)
	}
	msg, err := checkpoint.SignHead(h, m.c.Signer)
	if err != nil {
		t.Close()
		os.Remove(path)
		return nil, err
	}
	if err := m.persist(msg, path, snap.KeyCount); err != nil {
		t.Close()
		os.Remove(path)
		return nil, err
	}
	m.mu.Lock()
	old, oldPath := m.tree, m.path
	m.tree, m.path, m.head, m.h, m.keys = t, path, msg, &h, snap.KeyCount
	m.mu.Unlock()
	if old != nil {
		old.Close()
		if oldPath != path {
			os.Remove(oldPath)
		}
	}
	m.log.Info("built sorted tree", "log_size", h.Log.Size, "keys", h.Size, "added", stats.Added, "took", time.Since(start).Round(time.Millisecond))
	return &h, nil
}

// Refresh signs a fresh head over the current tree, bound to the same
// checkpoint, so that the head stays younger than clients' maximum age
// while the log does not move. ErrNoTree before the first Update.
func (m *Mirror) Refresh() (*checkpoint.Head, error) {
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	m.mu.RLock()
	last := m.h
	m.mu.RUnlock()
	if last == nil {
		return nil, ErrNoTree
	}
	return m.resign(*last)
}

// resign signs h (bound to the last checkpoint) again with the current
// time over the current tree. The caller holds updateMu.
func (m *Mirror) resign(h checkpoint.Head) (*checkpoint.Head, error) {
	m.mu.RLock()
	cur, path, keys := m.h, m.path, m.keys
	m.mu.RUnlock()
	h.Origin, h.Size, h.Root = cur.Origin, cur.Size, cur.Root
	h.Time = m.now()
	if !h.Time.After(cur.Time) {
		h.Time = cur.Time.Add(time.Millisecond)
	}
	msg, err := checkpoint.SignHead(h, m.c.Signer)
	if err != nil {
		return nil, err
	}
	if err := m.persist(msg, path, keys); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.head, m.h = msg, &h
	m.mu.Unlock()
	return &h, nil
}

func (m *Mirror) persist(head []byte, treePath string, keys uint64) error {
	b, err := json.Marshal(stateJSON{Version: stateVersion, Head: string(head), Tree: filepath.Base(treePath), Keys: keys})
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(m.c.Dir, StateFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("ctmirror: saving the head: %w", err)
	}
	return nil
}

func (m *Mirror) refuse(err error) error {
	m.log.Error("refused", "err", err)
	return err
}

func (m *Mirror) now() time.Time { return m.c.Now().Truncate(time.Millisecond) }

// Head returns the last signed head, as signed and parsed, or nil, nil
// before the first Update.
func (m *Mirror) Head() ([]byte, *checkpoint.Head) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.h == nil {
		return nil, nil
	}
	h := *m.h
	return m.head, &h
}

// Prove returns the proof of key's presence or absence under the last
// signed head, as a prover response (treeproof.Response, PKIE "ct").
func (m *Mirror) Prove(key [32]byte) (*treeproof.Response, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.tree == nil {
		return nil, ErrNoTree
	}
	p, err := m.tree.Prove(key)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: %w", err)
	}
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("ctmirror: %w", err)
	}
	return &treeproof.Response{Version: treeproof.ResponseVersion, PKIE: treeproof.CT, Key: key, Present: p.Present(), Checkpoint: string(m.head), Proof: b}, nil
}

// Ready returns a channel closed once the current tree serves proofs at
// full speed (sortedtree.Tree.Ready): a tree just built or reopened fills
// its low levels in the background (about 35 s at 100 million keys on two
// cores), and until then proofs are correct but slower. The channel is the
// current tree's: after an Update, ask again. Before the first Update it
// is closed.
func (m *Mirror) Ready() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.tree == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return m.tree.Ready()
}

// Close unmaps the tree. The mirror must not be used afterwards.
func (m *Mirror) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tree == nil {
		return nil
	}
	err := m.tree.Close()
	m.tree = nil
	return err
}
