package oldctlog_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/ttpstate"
)

func removeLogDB(t *testing.T, dir string) {
	t.Helper()
	for _, s := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, DBFile+s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}

// forkLog replaces dir's database with a second history of n chains under
// the same key, as the old code signed after losing the database, and puts
// the state file back as the honest log left it.
func forkLog(t *testing.T, dir string, n int) {
	t.Helper()
	state, _ := os.ReadFile(filepath.Join(dir, StateFile))
	removeLogDB(t, dir)
	f, err := OpenUnchecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, chains := issue(t, n)
	if _, err := f.AddChains(context.Background(), chains); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BuildSorted(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, StateFile), state, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLogRefusesDatabaseBehindState is the rollback attack on a log: a log whose
// database was lost, truncated, rolled back or replaced must not start and
// sign a second history under its key.
func TestLogRefusesDatabaseBehindState(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir, backup string)
		want  string
	}{
		{"deleted", func(t *testing.T, dir, _ string) { removeLogDB(t, dir) }, "holds 0 entries, but the log last signed a tree of 5"},
		{"truncated", func(t *testing.T, dir, _ string) {
			if err := os.Truncate(filepath.Join(dir, DBFile), 0); err != nil {
				t.Fatal(err)
			}
		}, "holds 0 entries, but the log last signed a tree of 5"},
		{"older backup", func(t *testing.T, dir, backup string) {
			removeLogDB(t, dir)
			copyFile(t, backup, filepath.Join(dir, DBFile))
		}, "holds 2 entries, but the log last signed a tree of 5"},
		{"another history of the same size", func(t *testing.T, dir, _ string) { forkLog(t, dir, 4) }, "do not extend the tree of 5"},
		{"another, longer history", func(t *testing.T, dir, _ string) { forkLog(t, dir, 9) }, "do not extend the tree of 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, chains := filledLog(t, 2)
			dir := l.Dir()
			l.Close()
			backup := filepath.Join(t.TempDir(), "backup.db")
			copyFile(t, filepath.Join(dir, DBFile), backup)
			l, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, more := issue(t, 2)
			if _, err := l.AddChains(ctx, append(more, chains[0])); err != nil { // 2 new, 1 duplicate
				t.Fatal(err)
			}
			if _, err := l.BuildSorted(ctx); err != nil {
				t.Fatal(err)
			}
			if n, _ := l.Size(ctx); n != 5 {
				t.Fatalf("log of %d entries, want 5", n)
			}
			l.Close()
			tc.spoil(t, dir, backup)
			_, err = Open(dir, Options{})
			if !errors.Is(err, ErrBehind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v\nwant ErrBehind naming %q", err, tc.want)
			}
		})
	}
}

// TestLogStateCrashAndUpgrade: a checkpoint recorded as pending whose
// commit never happened does not stop the log; a log from before the state
// file adopts its database's checkpoint; a key with neither is refused.
func TestLogStateCrashAndUpgrade(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 3)
	dir := l.Dir()
	before, _ := l.Checkpoint(ctx)
	_, one := issue(t, 1)
	if _, err := l.AddChains(ctx, one); err != nil {
		t.Fatal(err)
	}
	cpMsg, _ := l.Checkpoint(ctx)
	// While running, the last commit is pending beside the one before it:
	// a crash before a commit must not leave the state ahead of the
	// database as if committed.
	if st, err := ttpstate.Read(filepath.Join(dir, StateFile)); err != nil || st.Checkpoint != string(before) || st.Pending != string(cpMsg) {
		t.Fatalf("state while running: %+v %v", st, err)
	}
	cp, err := checkpoint.Open(cpMsg, l.Verifier(), l.Origin(), time.Hour, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	state := filepath.Join(dir, StateFile)
	if st, err := ttpstate.Read(state); err != nil || st.Checkpoint != string(cpMsg) || st.Pending != "" {
		t.Fatalf("state after a commit: %+v %v", st, err)
	}
	// Killed between recording a pending checkpoint and committing it.
	pending := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.Origin(), Size: cp.Size + 2, Root: randKey(t), Time: time.Now()})
	if err := ttpstate.Write(state, &ttpstate.State{Checkpoint: string(cpMsg), Pending: string(pending)}); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("after a crash before the commit: %v", err)
	}
	// But a database that reaches the pending size must extend it.
	_, chains := issue(t, 2)
	if _, err := l2.AddChains(ctx, chains[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.AddChains(ctx, chains[1:]); err != nil {
		t.Fatal(err)
	}
	cur, _ := l2.Checkpoint(ctx)
	l2.Close()
	if err := ttpstate.Write(state, &ttpstate.State{Checkpoint: string(cpMsg), Pending: string(pending)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("database at the pending size with another root: %v", err)
	}
	// Upgrade: no state file, the database's latest checkpoint is adopted.
	os.Remove(state)
	var logged int
	l3, err := Open(dir, Options{Logf: func(string, ...any) { logged++ }})
	if err != nil || logged != 1 {
		t.Fatalf("upgrade: %v (logged %d)", err, logged)
	}
	l3.Close()
	if st, err := ttpstate.Read(state); err != nil || st.Checkpoint != string(cur) {
		t.Fatalf("adopted state %+v %v", st, err)
	}
	// Neither state nor database: refused.
	os.Remove(state)
	removeLogDB(t, dir)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("key alone: %v", err)
	}
}

// TestAuditCatchesForkedDatabase: a database replaced by a second history
// under the same key is consistent in itself; the local audit catches it
// against the state file, a remote audit with a saved checkpoint catches
// it, and a stateless remote audit cannot.
func TestAuditCatchesForkedDatabase(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 3)
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	auditState := filepath.Join(t.TempDir(), "audit.state")
	if rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier(), State: auditState}); err != nil || !rep.OK() {
		t.Fatalf("honest log: %v\n%s", err, reportText(rep))
	}
	if rep, err := l.Audit(ctx, AuditOptions{}); err != nil || !rep.OK() {
		t.Fatalf("honest local audit: %v\n%s", err, reportText(rep))
	}
	srv.Close()
	l.Close()

	forkLog(t, dir, 1)
	f, err := Open(dir, Options{NoStateCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := f.Audit(ctx, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(reportText(rep), "holds 2 entries, but the log last signed a tree of 4") {
		t.Fatalf("local audit of a forked database:\n%s", reportText(rep))
	}
	srv = httptest.NewServer(f.Handler(HandlerOptions{}))
	defer srv.Close()
	if rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: f.Verifier(), State: auditState}); err != nil || rep.OK() {
		t.Fatalf("remote audit with a saved checkpoint: %v\n%s", err, reportText(rep))
	}
	// The limit, documented: the fork is consistent in itself.
	if rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: f.Verifier()}); err != nil || !rep.OK() {
		t.Fatalf("stateless remote audit: %v\n%s", err, reportText(rep))
	}
}

// TestUncheckedLogSignsNothing: a log opened for an audit without the state
// check cannot append, so it cannot sign a forked database's tree.
func TestUncheckedLogSignsNothing(t *testing.T) {
	l, _ := filledLog(t, 1)
	dir := l.Dir()
	l.Close()
	u, err := Open(dir, Options{NoStateCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_, chains := issue(t, 1)
	if _, err := u.AddChains(context.Background(), chains); err == nil {
		t.Error("append through an unchecked log")
	}
	if _, err := u.BuildSorted(context.Background()); err == nil {
		t.Error("build through an unchecked log")
	}
}
