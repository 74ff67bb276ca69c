package oldctlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/sortedtree"
)

// SortedBuild describes one sorted-tree build.
type SortedBuild struct {
	Checkpoint []byte   // the signed sorted-tree head (package checkpoint's Head)
	Size       uint64   // keys in the sorted tree
	Root       [32]byte // its root
	LogSize    uint64   // the size of the log checkpoint the head is bound to
	// Appended reports whether this build appended its head to the log.
	// A build whose tree is the one last appended signs a fresh head and
	// appends nothing: EntryIndex is then that earlier entry.
	Appended   bool
	EntryIndex uint64 // the log entry holding a head of this tree
	TreePath   string // the published tree file
	TreeBytes  int64
}

// BuildSorted builds the sorted tree over every certificate logged so far,
// writes it to the log directory and signs a sorted-tree head (package
// checkpoint's Head) bound to the log checkpoint the tree was built from.
// If the tree differs from the one whose head was last appended to the log
// (the extended tree), it appends the head to the log. It runs even if
// nothing changed, so the head's timestamp stays fresh for verifiers'
// maximum age; then it appends nothing, so an idle log does not grow by one
// entry per build.
func (l *Log) BuildSorted(ctx context.Context) (*SortedBuild, error) {
	return l.buildSorted(ctx, buildHooks{})
}

// buildHooks make a misbehaving log, which only tests do, for the audit to
// catch: edit, if not nil, changes the keys before the tree is built (a log
// that signs and appends the root of a tree that is not its certificates);
// noAppend signs a head of a new tree without appending it.
type buildHooks struct {
	edit     func([][32]byte) [][32]byte
	noAppend bool
}

// buildSorted is BuildSorted with hooks.
func (l *Log) buildSorted(ctx context.Context, hooks buildHooks) (*SortedBuild, error) {
	l.buildMu.Lock()
	defer l.buildMu.Unlock()
	// A build in another process (pkie log build beside a running server)
	// may commit a larger tree while this one is built; this one is then
	// stale and is built again from a newer snapshot.
	for attempt := 1; ; attempt++ {
		b, err := l.buildSortedOnce(ctx, hooks)
		if errors.Is(err, errStaleBuild) && attempt < 3 {
			continue
		}
		return b, err
	}
}

// errStaleBuild means a larger sorted tree was committed while this build
// ran.
var errStaleBuild = errors.New("ctlog: a larger sorted tree was committed during this build")

// buildSortedOnce reads the keys of every logged certificate, and the log
// checkpoint that covers exactly those, from a read snapshot, builds and
// writes the sorted tree without holding the write lock (on a large log
// that takes seconds, and writers beside a running server, such as pkie
// log add, would otherwise time out on SQLITE_BUSY), then, in a short write
// transaction, signs the head, appends it to the log if the tree changed,
// and publishes the tree file. The head is bound to the snapshot's log
// checkpoint: the tree holds the certificates among that checkpoint's
// entries, which an auditor can check; certificates logged meanwhile are in
// the next build.
func (l *Log) buildSortedOnce(ctx context.Context, hooks buildHooks) (*SortedBuild, error) {
	if l.unchecked {
		return nil, errors.New("ctlog: this log was opened without checking its database against " + StateFile + " (for an audit); it signs nothing")
	}
	rtx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("ctlog: beginning read: %w", err)
	}
	// Every commit stores the log checkpoint of its new size with its
	// certificates, so in one snapshot the latest checkpoint covers exactly
	// the certificates counted.
	lmsg, err := latestLogCheckpoint(ctx, rtx)
	if err == nil && lmsg == nil {
		err = errNoCheckpoint
	}
	if err != nil {
		rtx.Rollback()
		return nil, err
	}
	n, err := queryCertCount(ctx, rtx)
	if err != nil {
		rtx.Rollback()
		return nil, err
	}
	keys, err := feed.QueryKeys(ctx, rtx, keysQuery, 0, n)
	rtx.Rollback()
	if err != nil {
		return nil, err
	}
	if hooks.edit != nil {
		keys = hooks.edit(keys)
	}
	t := sortedtree.Build(keys)
	defer t.Close()
	if t.Size() != uint64(len(keys)) {
		// The log never stores a certificate twice; a smaller tree means
		// the store is corrupt.
		return nil, fmt.Errorf("ctlog: %d logged certificates gave a sorted tree of %d keys", len(keys), t.Size())
	}
	path := filepath.Join(l.dir, SortedTreeFile)
	// Held until the temporary file is renamed or removed (the deferred
	// calls run in reverse), so that no sweep takes it for a leftover.
	release, _, err := lockTemps(l.dir, false)
	if err != nil {
		return nil, err
	}
	defer release()
	tmp := sortedTempName(l.dir)
	if err := t.WriteFile(tmp); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("ctlog: writing sorted tree: %w", err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	fi, err := os.Stat(tmp)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	a, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer a.rollback()
	var latest sql.NullInt64
	if err := a.tx.QueryRowContext(ctx, `SELECT max(size) FROM checkpoints WHERE kind = ?`, kindSorted).Scan(&latest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ctlog: reading the latest sorted head: %w", err)
	}
	if latest.Valid && uint64(latest.Int64) > t.Size() {
		return nil, errStaleBuild
	}
	now := l.now()
	h := checkpoint.Head{Origin: l.SortedOrigin(), Size: t.Size(), Root: t.Root(), Time: now}
	if err := h.BindLog(lmsg, l.verifier); err != nil {
		return nil, fmt.Errorf("ctlog: the log checkpoint to bind the sorted head to: %w", err)
	}
	msg, err := checkpoint.SignHead(h, l.headSigner)
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing sorted head: %w", err)
	}
	b := &SortedBuild{Checkpoint: msg, Size: h.Size, Root: h.Root, LogSize: h.Log.Size, TreePath: path, TreeBytes: fi.Size()}
	last, lastIdx, err := l.lastAppendedHead(ctx, a.tx)
	if err != nil {
		return nil, err
	}
	var entry any // NULL: a head not appended to the log
	if (last == nil || last.Size != h.Size || last.Root != h.Root) && !hooks.noAppend {
		idx, err := a.append(&Leaf{Timestamp: uint64(now.UnixMilli()), Type: SortedRootEntry, Data: msg})
		if err != nil {
			return nil, err
		}
		b.Appended, b.EntryIndex, entry = true, idx, int64(idx)
	} else {
		b.EntryIndex = lastIdx
	}
	if _, err := a.tx.ExecContext(ctx, `INSERT INTO checkpoints (kind, size, ts, note, entry) VALUES (?, ?, ?, ?, ?)`,
		kindSorted, int64(h.Size), now.UnixMilli(), msg, entry); err != nil {
		return nil, fmt.Errorf("ctlog: storing sorted head: %w", err)
	}
	// Publish the file before the head that names it commits, so a reader
	// never sees a head whose tree is not there yet. A crash in between
	// leaves a tree newer than the head; the next build replaces it.
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	if b.Appended {
		err = a.commit() // signs the log checkpoint covering the new entry
	} else if err = a.tx.Commit(); err != nil {
		err = fmt.Errorf("ctlog: committing: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// lastAppendedHead returns the newest sorted head appended to the log and
// its entry, or nil if there is none or it is not a head (a sorted-tree
// root signed as a checkpoint, before heads had their own type: the next
// build then appends a head).
func (l *Log) lastAppendedHead(ctx context.Context, q querier) (*checkpoint.Head, uint64, error) {
	var msg []byte
	var idx int64
	err := q.QueryRowContext(ctx, `SELECT note, entry FROM checkpoints WHERE kind = ? AND entry IS NOT NULL ORDER BY id DESC LIMIT 1`, kindSorted).Scan(&msg, &idx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ctlog: reading the last appended sorted head: %w", err)
	}
	h, err := checkpoint.OpenHeadAnyAge(msg, l.verifier)
	if errors.Is(err, checkpoint.ErrLegacyHead) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ctlog: the last appended sorted head: %w", err)
	}
	return h, uint64(idx), nil
}

// keysQuery selects keys in publication order for feed.QueryKeys.
const keysQuery = `SELECT key FROM certs WHERE seq >= ? AND seq < ? ORDER BY seq`

// SortedCheckpoint returns the latest signed sorted-tree head.
func (l *Log) SortedCheckpoint(ctx context.Context) ([]byte, error) {
	return l.latestCheckpoint(ctx, kindSorted)
}

// SortedEntry returns the log index at which a head of the same sorted tree
// as h (size and root) was appended: h itself, or, for a head signed when
// nothing had changed, the head appended for that tree before it.
func (l *Log) SortedEntry(ctx context.Context, h *checkpoint.Head) (uint64, bool, error) {
	var idx int64
	var msg []byte
	err := l.db.QueryRowContext(ctx, `SELECT entry, note FROM checkpoints WHERE kind = ? AND size = ? AND entry IS NOT NULL ORDER BY id DESC LIMIT 1`, kindSorted, int64(h.Size)).Scan(&idx, &msg)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("ctlog: %w", err)
	}
	if a, err := checkpoint.OpenHeadAnyAge(msg, l.verifier); err != nil || a.Root != h.Root {
		return 0, false, nil
	}
	return uint64(idx), true, nil
}

// Feed is the log's sorted-tree feed for provers: the latest sorted
// checkpoint and the certificate keys in log order.
func (l *Log) Feed() feed.Source { return logFeed{l} }

type logFeed struct{ l *Log }

func (f logFeed) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	m, err := f.l.SortedCheckpoint(ctx)
	if errors.Is(err, errNoCheckpoint) {
		return nil, feed.ErrNoCheckpoint
	}
	return m, err
}

func (f logFeed) Keys(ctx context.Context, start uint64, count int) ([][32]byte, error) {
	return feed.QueryKeys(ctx, f.l.db, keysQuery, start, start+uint64(max(0, min(count, feed.MaxKeys))))
}

// Run builds the sorted tree every interval until ctx ends.
func (l *Log) Run(ctx context.Context, interval time.Duration, logf func(string, ...any)) {
	feed.Every(ctx, interval, "building sorted tree", func(ctx context.Context) error {
		_, err := l.BuildSorted(ctx)
		return err
	}, logf)
}
