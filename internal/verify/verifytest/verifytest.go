// Package verifytest opens every verification back end for tests: the
// helpers come from $PKIE_VERIFIER_DIR or the module's bin directory. When
// $PKIE_REQUIRE_VERIFIERS is 1 (make test sets it) a missing helper fails
// the test; otherwise it is skipped with a log line, so a plain "go test"
// without "make verifiers" still runs the Go back ends.
package verifytest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pkie/pkie/internal/verify"
)

// Dirs are the directories searched for helper programs.
func Dirs() []string {
	var dirs []string
	if d := os.Getenv("PKIE_VERIFIER_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	_, file, _, ok := runtime.Caller(0)
	if ok {
		// internal/verify/verifytest → module root.
		dirs = append(dirs, filepath.Join(filepath.Dir(file), "..", "..", "..", "bin"))
	}
	return dirs
}

// Backends opens the named back ends (all when none are named) and closes
// them when t ends.
func Backends(t testing.TB, names ...string) []verify.Backend {
	t.Helper()
	bs, missing, err := verify.Open(context.Background(), verify.Options{Names: names, Dirs: Dirs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { verify.CloseAll(bs) })
	for _, m := range missing {
		if os.Getenv("PKIE_REQUIRE_VERIFIERS") == "1" {
			t.Fatalf("back end %s: %s", m.Name, m.Why)
		}
		t.Logf("back end %s skipped: %s", m.Name, m.Why)
	}
	return bs
}
