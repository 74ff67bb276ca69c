// Package ctfollow follows a Certificate Transparency log as a monitor
// does: a static-ct-api log (C2SP static-ct-api) by its checkpoint and
// tiles, or an RFC 6962 log by get-sth, get-sth-consistency and
// get-entries. Every checkpoint is verified with the log's key before it is
// used; each new one must be consistent with the last one verified, and
// the new entries must hash to its root, before the follower moves on. It
// keeps, in a directory, the last verified checkpoint and an append-only
// file of the sorted-tree keys (ctwire.EntryKeys) of every entry up to it:
// what a mirror builds its sorted tree from.
//
// A log that rolls back, forks, signs with another key or serves entries
// that do not match its checkpoint is refused with a typed error
// (CheckpointError, RollbackError, ForkError, EntriesError) and nothing is
// persisted: the follower keeps its last verified state.
package ctfollow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// The kinds of log a follower reads.
const (
	KindStatic  = "static-ct-api"
	KindRFC6962 = "rfc6962"
)

// Names of the files in Config.Dir.
const (
	StateFile = "state.json"
	KeysFile  = "keys"
)

// KeySize is the size of one key in the keys file.
const KeySize = 32

// Config says which log to follow and where to keep what was verified.
type Config struct {
	// Kind is KindStatic or KindRFC6962.
	Kind string
	// URL is a static-ct-api log's monitoring prefix (where checkpoint and
	// tile/ are) or an RFC 6962 log's URL (ct/v1/... is appended). Unused
	// when Fetch is set.
	URL string
	// Key is the log's public key, ECDSA P-256, in one of two forms:
	//   - a signed-note verifier key for RFC 6962 note signatures, as
	//     transparency-dev/formats/note.NewRFC6962Verifier parses it
	//     ("<name>+<hash>+<base64(0x05 || SPKI)>"); its name is the origin;
	//   - the log's SubjectPublicKeyInfo, PEM ("PUBLIC KEY") or base64 DER,
	//     as CT log lists publish it; the name is then Origin, or for an
	//     RFC 6962 log the URL without scheme and trailing slash.
	Key string
	// Origin is a static-ct-api log's origin, the first line of its
	// checkpoints. Optional when Key names it; if both are given they must
	// agree. For an RFC 6962 log it is derived.
	Origin string
	// Dir holds the follower's state; created if missing.
	Dir string
	// Fetch, if set, reads a static-ct-api log without HTTP.
	Fetch *Fetchers
	// HTTP is the client for the log; nil means a client with a
	// per-request timeout.
	HTTP *http.Client
	// Parallel bounds concurrent tile or get-entries fetches; 0 means 8.
	Parallel int
	// Now returns the time; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per refusal and per advance; nil means
	// slog.Default().
	Logger *slog.Logger
	// OnRefuse, if set, is called once per refusal with Reason(err), for a
	// metric.
	OnRefuse func(reason string, err error)
}

// State is what the follower last verified.
type State struct {
	// Checkpoint is the log's checkpoint as a signed note: as the log
	// published it for a static-ct-api log, the STH converted to a
	// checkpoint (formats/note.RFC6962STHToCheckpoint) for an RFC 6962 log.
	// Empty before the first sync.
	Checkpoint []byte
	Origin     string
	Size       uint64
	Root       []byte
	// KeyCount is the number of valid keys at the start of the keys file.
	KeyCount uint64
	// Range is the compact range of the tree of Size entries, which the
	// next sync extends.
	Range [][]byte
	// Verified is when the follower last verified Checkpoint (or found the
	// log unchanged).
	Verified time.Time
}

func (s *State) clone() *State {
	c := *s
	c.Checkpoint = bytes.Clone(s.Checkpoint)
	c.Root = bytes.Clone(s.Root)
	c.Range = make([][]byte, len(s.Range))
	for i, h := range s.Range {
		c.Range[i] = bytes.Clone(h)
	}
	return &c
}

// Progress reports how far a sync is.
type Progress struct {
	Done, Total uint64 // entries of this sync
}

// Follower follows one log. Its methods are safe for concurrent use; syncs
// run one at a time.
type Follower struct {
	c        Config
	v        note.Verifier
	origin   string
	src      source
	log      *slog.Logger
	rf       *compact.RangeFactory
	syncMu   sync.Mutex // held for a whole sync
	mu       sync.Mutex // guards st
	st       *State
	keys     *os.File
	keysPath string
}

// Open opens the follower state in c.Dir, creating it if the directory
// holds neither a state file nor a keys file. It refuses (StateError) a
// keys file without a state file, a state file that does not parse, is for
// another log or whose checkpoint the key does not verify, and a keys file
// shorter than the state says: a follower never starts over silently. Keys
// past the state's KeyCount (left by a sync that did not finish) are
// truncated.
func Open(ctx context.Context, c Config) (*Follower, error) {
	if c.Dir == "" {
		return nil, errors.New("ctfollow: no state directory")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Parallel <= 0 {
		c.Parallel = defaultParallel
	}
	v, origin, err := verifier(c)
	if err != nil {
		return nil, err
	}
	f := &Follower{
		c: c, v: v, origin: origin,
		log:      c.Logger.With("log", origin),
		rf:       &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren},
		keysPath: filepath.Join(c.Dir, KeysFile),
	}
	switch c.Kind {
	case KindStatic:
		if c.Fetch != nil {
			if c.Fetch.Checkpoint == nil || c.Fetch.Tile == nil || c.Fetch.EntryBundle == nil {
				return nil, errors.New("ctfollow: Fetch needs Checkpoint, Tile and EntryBundle")
			}
			f.src = &staticSource{f: *c.Fetch, issuers: map[[32]byte][32]byte{}}
		} else {
			g, err := newGetter(c)
			if err != nil {
				return nil, err
			}
			f.src = newHTTPStatic(g)
		}
	case KindRFC6962:
		if c.Fetch != nil {
			return nil, errors.New("ctfollow: Fetch is for static-ct-api logs")
		}
		g, err := newGetter(c)
		if err != nil {
			return nil, err
		}
		f.src = &rfc6962Source{g: g, v: v}
	default:
		return nil, fmt.Errorf("ctfollow: log kind %q, want %q or %q", c.Kind, KindStatic, KindRFC6962)
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func newGetter(c Config) (*httpGetter, error) {
	if c.URL == "" {
		return nil, errors.New("ctfollow: no log URL")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ctfollow: log URL %q: want an http or https URL", c.URL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	hc := c.HTTP
	if hc == nil {
		// Keep a connection per parallel fetch: the default transport
		// keeps two idle ones per host, so the rest would be redialled
		// for every tile.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = c.Parallel
		hc = &http.Client{Timeout: requestTimeout, Transport: t}
	}
	return &httpGetter{c: hc, base: u}, nil
}

// State returns the last verified state.
func (f *Follower) State() *State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.clone()
}

// KeysPath returns the keys file: 32-byte keys (ctwire.EntryKeys of each
// entry, entries in log order), of which the first State().KeyCount are
// valid. A sync in progress may have appended more.
func (f *Follower) KeysPath() string { return f.keysPath }

// Verifier returns the log's checkpoint verifier.
func (f *Follower) Verifier() note.Verifier { return f.v }

// Origin returns the log's checkpoint origin.
func (f *Follower) Origin() string { return f.origin }

// Close closes the keys file.
func (f *Follower) Close() error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if f.keys == nil {
		return nil
	}
	err := f.keys.Close()
	f.keys = nil
	return err
}

// refuse logs and counts a refusal, and returns err.
func (f *Follower) refuse(err error) error {
	if r := Reason(err); r != "" {
		f.log.Warn("ctfollow: refused the log's view; keeping the last verified state", "reason", r, "err", err)
		if f.c.OnRefuse != nil {
			f.c.OnRefuse(r, err)
		}
	}
	return err
}

// Sync runs one step: it fetches and verifies the log's newest
// checkpoint, checks it is consistent with the last verified one, fetches
// the entries in between, checks that they hash to the new root, appends
// their keys to the keys file, syncs it, and then persists the new state.
// progress, if not nil, is called as entries are done. On any error
// nothing is persisted and State is unchanged.
func (f *Follower) Sync(ctx context.Context, progress func(Progress)) (*State, error) {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if f.keys == nil {
		return nil, errors.New("ctfollow: follower closed")
	}
	old := f.State()

	raw, err := f.src.checkpoint(ctx)
	if err != nil {
		return nil, f.refuse(err)
	}
	cp, _, _, err := log.ParseCheckpoint(raw, f.origin, f.v)
	if err != nil {
		return nil, f.refuse(&CheckpointError{Err: err})
	}
	if len(cp.Hash) != 32 {
		return nil, f.refuse(&CheckpointError{Err: fmt.Errorf("root hash of %d bytes", len(cp.Hash))})
	}
	switch {
	case cp.Size < old.Size:
		return nil, f.refuse(&RollbackError{Verified: old.Size, Got: cp.Size})
	case cp.Size == old.Size:
		if !bytes.Equal(cp.Hash, old.Root) && !(old.Size == 0 && bytes.Equal(cp.Hash, rfc6962.DefaultHasher.EmptyRoot())) {
			return nil, f.refuse(&ForkError{VerifiedSize: old.Size, GotSize: cp.Size, VerifiedRoot: old.Root, GotRoot: cp.Hash})
		}
		st := old.clone()
		st.Verified = f.c.Now()
		if !bytes.Equal(raw, old.Checkpoint) {
			// The log signed its tree again (a new timestamp): keep the
			// newest signature, which a mirror's head can be bound to.
			st.Checkpoint, st.Root = raw, cp.Hash
			if err := f.writeState(st); err != nil {
				return nil, err
			}
		}
		f.set(st)
		return st.clone(), nil
	}
	if old.Size > 0 {
		p, err := f.src.consistency(ctx, old.Size, cp.Size)
		if err != nil {
			return nil, fmt.Errorf("ctfollow: consistency proof %d→%d: %w", old.Size, cp.Size, err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old.Size, cp.Size, p, old.Root, cp.Hash); err != nil {
			return nil, f.refuse(&ForkError{VerifiedSize: old.Size, GotSize: cp.Size, VerifiedRoot: old.Root, GotRoot: cp.Hash, Err: err})
		}
	}

	st, err := f.ingest(ctx, old, cp.Size, cp.Hash, progress)
	if err != nil {
		// Drop whatever this sync appended; the state still counts only
		// the keys before it.
		if terr := f.rewindKeys(old.KeyCount); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, f.refuse(err)
	}
	st.Checkpoint, st.Verified = raw, f.c.Now()
	if err := f.writeState(st); err != nil {
		if terr := f.rewindKeys(old.KeyCount); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	f.set(st)
	f.log.Info("ctfollow: advanced", "size", st.Size, "from", old.Size, "keys", st.KeyCount)
	return st.clone(), nil
}

func (f *Follower) set(st *State) {
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
}

func (f *Follower) rewindKeys(count uint64) error {
	if err := f.keys.Truncate(int64(count) * KeySize); err != nil {
		return fmt.Errorf("ctfollow: rewinding the keys file: %w", err)
	}
	if _, err := f.keys.Seek(int64(count)*KeySize, io.SeekStart); err != nil {
		return fmt.Errorf("ctfollow: rewinding the keys file: %w", err)
	}
	return nil
}

// ingest fetches entries [old.Size, size), hashes them onto old's compact
// range, appends their keys, and returns the new state if the range
// reaches root, with the keys file synced.
func (f *Follower) ingest(ctx context.Context, old *State, size uint64, root []byte, progress func(Progress)) (*State, error) {
	r, err := f.rf.NewRange(0, old.Size, old.Range)
	if err != nil {
		return nil, fmt.Errorf("ctfollow: compact range: %w", err)
	}
	w := bufio.NewWriterSize(f.keys, 1<<20)
	keyCount := old.KeyCount
	from := old.Size
	firstChunk := from / chunkWidth
	chunks := (size-1)/chunkWidth - firstChunk + 1
	total := size - from
	next := from
	err = ordered(ctx, chunks, f.c.Parallel,
		func(ctx context.Context, job uint64) ([]ctwire.Entry, error) {
			c := firstChunk + job
			lo, hi := max(from, c*chunkWidth), min(size, (c+1)*chunkWidth)
			return f.src.chunk(ctx, lo, hi, size)
		},
		func(job uint64, entries []ctwire.Entry) error {
			for i := range entries {
				e := &entries[i]
				if e.Index != next {
					return &EntriesError{Index: next, Err: fmt.Errorf("got entry %d", e.Index)}
				}
				lh, err := e.LeafHash()
				if err != nil {
					return &EntriesError{Index: next, Err: err}
				}
				if err := r.Append(lh[:], nil); err != nil {
					return fmt.Errorf("ctfollow: compact range: %w", err)
				}
				for _, k := range ctwire.EntryKeys(e) {
					if _, err := w.Write(k[:]); err != nil {
						return fmt.Errorf("ctfollow: keys file: %w", err)
					}
					keyCount++
				}
				next++
			}
			if progress != nil {
				progress(Progress{Done: next - from, Total: total})
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if next != size {
		return nil, &EntriesError{Index: next, Err: fmt.Errorf("got entries up to %d, the checkpoint has %d", next, size)}
	}
	got, err := r.GetRootHash(nil)
	if err != nil {
		return nil, fmt.Errorf("ctfollow: compact range: %w", err)
	}
	if !bytes.Equal(got, root) {
		return nil, &EntriesError{Index: from, Err: fmt.Errorf("entries %d to %d hash to root %s, the checkpoint says %s", from, size, b64(got), b64(root))}
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("ctfollow: keys file: %w", err)
	}
	if err := f.keys.Sync(); err != nil {
		return nil, fmt.Errorf("ctfollow: keys file: %w", err)
	}
	return &State{Origin: f.origin, Size: size, Root: bytes.Clone(root), KeyCount: keyCount, Range: r.Hashes()}, nil
}
