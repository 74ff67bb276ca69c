package ctlog

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
	Checkpoint []byte   // the signed sorted-tree checkpoint
	Size       uint64   // keys in the sorted tree
	Root       [32]byte // its root
	EntryIndex uint64   // where the signed root was appended to the log
	TreePath   string   // the published tree file
	TreeBytes  int64
}

// BuildSorted builds the sorted tree over every certificate logged so far,
// writes it to the log directory, signs its root and appends the signed
// root to the log (the extended tree). It runs even if nothing changed, so
// the sorted checkpoint's timestamp stays fresh for verifiers' maximum age.
func (l *Log) BuildSorted(ctx context.Context) (*SortedBuild, error) {
	return l.buildSorted(ctx, nil)
}

// buildSorted is BuildSorted; a non-nil edit changes the keys before the
// tree is built, which only tests do: it makes a log that signs and appends
// the root of a tree that is not its certificates, for the audit to catch.
func (l *Log) buildSorted(ctx context.Context, edit func([][32]byte) [][32]byte) (*SortedBuild, error) {
	l.buildMu.Lock()
	defer l.buildMu.Unlock()
	// A build in another process (pkie log build beside a running server)
	// may commit a larger tree while this one is built; this one is then
	// stale and is built again from a newer snapshot.
	for attempt := 1; ; attempt++ {
		b, err := l.buildSortedOnce(ctx, edit)
		if errors.Is(err, errStaleBuild) && attempt < 3 {
			continue
		}
		return b, err
	}
}

// errStaleBuild means a larger sorted tree was committed while this build
// ran.
var errStaleBuild = errors.New("ctlog: a larger sorted tree was committed during this build")

// buildSortedOnce reads the keys of every logged certificate from a read
// snapshot, builds and writes the sorted tree without holding the write
// lock (on a large log that takes seconds, and writers beside a running
// server, such as pkie log add, would otherwise time out on SQLITE_BUSY),
// then, in a short write transaction, signs the root, appends it to the
// log and publishes the tree file. The tree covers the first n
// certificates as of the snapshot, which is what its checkpoint says;
// certificates logged meanwhile are in the next build.
func (l *Log) buildSortedOnce(ctx context.Context, edit func([][32]byte) [][32]byte) (*SortedBuild, error) {
	if l.unchecked {
		return nil, errors.New("ctlog: this log was opened without checking its database against " + StateFile + " (for an audit); it signs nothing")
	}
	rtx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("ctlog: beginning read: %w", err)
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
	if edit != nil {
		keys = edit(keys)
	}
	t := sortedtree.Build(keys)
	defer t.Close()
	if t.Size() != uint64(len(keys)) {
		// The log never stores a certificate twice; a smaller tree means
		// the store is corrupt.
		return nil, fmt.Errorf("ctlog: %d logged certificates gave a sorted tree of %d keys", len(keys), t.Size())
	}
	path := filepath.Join(l.dir, SortedTreeFile)
	tmp := fmt.Sprintf("%s.tmp-%x", path, randBytes(6))
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
	if err := a.tx.QueryRowContext(ctx, `SELECT size FROM checkpoints WHERE kind = ? ORDER BY entry DESC LIMIT 1`, kindSorted).Scan(&latest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ctlog: reading the latest sorted checkpoint: %w", err)
	}
	if latest.Valid && uint64(latest.Int64) > t.Size() {
		return nil, errStaleBuild
	}
	now := l.now()
	cp := checkpoint.Checkpoint{Origin: l.SortedOrigin(), Size: t.Size(), Root: t.Root(), Time: now}
	msg, err := checkpoint.Sign(cp, l.signer)
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing sorted checkpoint: %w", err)
	}
	idx, err := a.append(&Leaf{Timestamp: uint64(now.UnixMilli()), Type: SortedRootEntry, Data: msg})
	if err != nil {
		return nil, err
	}
	if _, err := a.tx.ExecContext(ctx, `INSERT INTO checkpoints (kind, size, ts, note, entry) VALUES (?, ?, ?, ?, ?)`,
		kindSorted, int64(cp.Size), now.UnixMilli(), msg, int64(idx)); err != nil {
		return nil, fmt.Errorf("ctlog: storing sorted checkpoint: %w", err)
	}
	// Publish the file before the checkpoint that names it commits, so a
	// reader never sees a checkpoint whose tree is not there yet. A crash
	// in between leaves a tree newer than the checkpoint; the next build
	// replaces it.
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	if err := a.commit(); err != nil {
		return nil, err
	}
	return &SortedBuild{Checkpoint: msg, Size: cp.Size, Root: cp.Root, EntryIndex: idx, TreePath: path, TreeBytes: fi.Size()}, nil
}

// keysQuery selects keys in publication order for feed.QueryKeys.
const keysQuery = `SELECT key FROM certs WHERE seq >= ? AND seq < ? ORDER BY seq`

// SortedCheckpoint returns the latest signed sorted-tree checkpoint.
func (l *Log) SortedCheckpoint(ctx context.Context) ([]byte, error) {
	return l.latestCheckpoint(ctx, kindSorted)
}

// SortedEntry returns the log index at which a sorted checkpoint was
// appended.
func (l *Log) SortedEntry(ctx context.Context, msg []byte) (uint64, bool, error) {
	var idx int64
	err := l.db.QueryRowContext(ctx, `SELECT entry FROM checkpoints WHERE kind = ? AND note = ?`, kindSorted, msg).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("ctlog: %w", err)
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
