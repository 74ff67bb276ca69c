package oldctlog_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/oldctlog"
)

// TestLegacySortedRoots: a log whose database holds sorted-tree roots
// signed as checkpoints (before heads had their own type) serves the old
// root until its next build, which verifiers refuse as such, and the next
// build appends a head even though the tree is unchanged: an old root is
// never taken for the head of that tree.
func TestLegacySortedRoots(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 3)
	b, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(b.Checkpoint, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	old := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.SortedOrigin(), Size: h.Size, Root: h.Root, Time: h.Time})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(l.Dir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE checkpoints SET note = ? WHERE note = ?`, old, b.Checkpoint); err != nil {
		t.Fatal(err)
	}
	db.Close()
	served, err := l.SortedCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.OpenHead(served, l.Verifier(), time.Hour, time.Minute, time.Now()); !errors.Is(err, checkpoint.ErrLegacyHead) {
		t.Fatalf("the old root served before the next build: %v, want ErrLegacyHead", err)
	}
	n, _ := l.Size(ctx)
	b2, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !b2.Appended || b2.EntryIndex != n {
		t.Fatalf("build after old roots: appended %v at %d, want a head appended at %d", b2.Appended, b2.EntryIndex, n)
	}
	if rep, err := l.Audit(ctx, AuditOptions{}); err != nil || !rep.OK() {
		t.Fatalf("audit after the migration: %v %+v", err, rep)
	}
}
