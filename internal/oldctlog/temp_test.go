//go:build unix

package oldctlog_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// logLines collects what Open tells Options.Logf.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestOpenRemovesStaleSortedTemps: Open removes exactly the temporary files
// a sorted-tree build leaves when it is killed (sorted.tree.tmp-<12 hex>
// and sortedtree's .sorted.tree.tmp-<12 hex>.tmp<digits>), logging each,
// and leaves every other file, lookalikes included; the log then builds
// and serves as before. While a build (here: its lock, held as a build in
// another process holds it) is writing, Open removes nothing.
func TestOpenRemovesStaleSortedTemps(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 3)
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	l.Close()
	stale := []string{"sorted.tree.tmp-0123456789ab", ".sorted.tree.tmp-0123456789ab.tmp2837461"}
	keep := []string{
		SortedTreeFile, DBFile, KeyFile, PubFile,
		"sorted.tree.tmp-0123456789abc", // 13 hex digits
		"sorted.tree.tmp-0123456789AB",  // upper case: never written
		"sorted.tree.tmp-notes",
		"sorted.tree.tmp-0123456789ab.bak",
		"xsorted.tree.tmp-0123456789ab",
		".sorted.tree.tmp-0123456789ab.tmp",
		".sorted.tree.tmp-0123456789ab.tmp12x",
		"log.key.tmp-0123456789ab",
	}
	plant := func() {
		t.Helper()
		for _, name := range append(stale, keep[4:]...) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("half a tree"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A directory of a temporary file's name is not a file to remove.
		if err := os.MkdirAll(filepath.Join(dir, "sorted.tree.tmp-abcdefabcdef"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(dir, name))
		return err == nil
	}

	// A build in another process holds the lock: its file is not stale.
	plant()
	lock, err := os.OpenFile(filepath.Join(dir, TempLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	var logs logLines
	l2, err := Open(dir, Options{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	for _, name := range stale {
		if !exists(name) {
			t.Errorf("%s removed while a build held the lock", name)
		}
	}
	lock.Close()

	logs = logLines{}
	l3, err := Open(dir, Options{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	for _, name := range stale {
		if exists(name) {
			t.Errorf("stale %s not removed", name)
		}
		if !strings.Contains(logs.String(), filepath.Join(dir, name)) {
			t.Errorf("removal of %s not logged:\n%s", name, logs.String())
		}
	}
	for _, name := range append(keep, "sorted.tree.tmp-abcdefabcdef") {
		if !exists(name) {
			t.Errorf("%s removed: it is not a build's temporary file", name)
		}
	}
	if _, err := l3.SortedCheckpoint(ctx); err != nil {
		t.Fatalf("the published tree after the sweep: %v", err)
	}
	if _, err := l3.BuildSorted(ctx); err != nil {
		t.Fatalf("building after the sweep: %v", err)
	}
}

// TestHelperBuilder is not a test: TestKillDuringBuild runs the test binary
// with PKIE_CTLOG_BUILD_DIR set, and this builds that log's sorted tree
// back to back until it is killed.
func TestHelperBuilder(t *testing.T) {
	dir := os.Getenv("PKIE_CTLOG_BUILD_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	l, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for {
		if _, err := l.BuildSorted(context.Background()); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
	}
}

// TestKillDuringBuild kills (SIGKILL) a process while it writes the sorted
// tree, which leaves its temporary file behind, and checks that the next
// Open removes it and logs it.
func TestKillDuringBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	l, _ := filledLog(t, 2)
	dir := l.Dir()
	l.Close()
	// 20,000 keys make a tree file of over a megabyte, so a build spends
	// most of its time with a temporary file on disk.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 20000)
		INSERT INTO certs (seq, key, idx, ts, chain) SELECT (SELECT MAX(seq) FROM certs) + i, randomblob(32), 0, 0, x'' FROM n`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	temp := regexp.MustCompile(`^\.?sorted\.tree\.tmp-`)
	leftovers := func() []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			if temp.MatchString(e.Name()) {
				out = append(out, e.Name())
			}
		}
		return out
	}
	// The kill may land just after a rename, leaving nothing: try again.
	var left []string
	for attempt := 0; attempt < 5 && len(left) == 0; attempt++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBuilder$")
		cmd.Env = append(os.Environ(), "PKIE_CTLOG_BUILD_DIR="+dir)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(leftovers()) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if strings.Contains(out.String(), "error") {
			t.Fatalf("helper: %s", out.String())
		}
		left = leftovers()
	}
	if len(left) == 0 {
		t.Fatal("no kill caught a build with its temporary file on disk")
	}
	var logs logLines
	l2, err := Open(dir, Options{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if now := leftovers(); len(now) != 0 {
		t.Fatalf("after Open the killed build's files remain: %v (were %v)", now, left)
	}
	for _, name := range left {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("removal of %s not logged:\n%s", name, logs.String())
		}
	}
}
