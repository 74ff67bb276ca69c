package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctbench"
)

// TestMain lets "bench ct" run its mirror child from the test binary, as
// the pkie binary does from itself: with PKIE_BENCH_TEST_MAIN set, the
// binary is this package's command line instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("PKIE_BENCH_TEST_MAIN") == "1" {
		os.Exit(Main(context.Background(), command.OSEnv(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestBenchCT runs "bench ct" on a small log end to end, the mirror in a
// child process (this test binary), and checks the report's shape: the
// ceiling and the mirror read every entry, the child's own peak RSS is
// reported, and the text names each ceiling beside its figure.
func TestBenchCT(t *testing.T) {
	t.Setenv("PKIE_BENCH_TEST_MAIN", "1")
	dir := t.TempDir()
	code, out, errs := runCLI(t, "bench", "ct", "--entries", "700", "--data", filepath.Join(dir, "log"), "--chains", "0", "--parallel", "2", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r ctbench.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Entries != 700 || r.Ceiling == nil || r.Ceiling.Entries != 700 || r.Mirror == nil || r.Mirror.Entries != 700 || r.Mirror.PeakRSSBytes == 0 {
		t.Fatalf("result: %s", out)
	}
	// The same log again, as text.
	code, out, errs = runCLI(t, "bench", "ct", "--entries", "700", "--data", filepath.Join(dir, "log"), "--chains", "0", "--no-mirror")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"700 entries (reused", "ceiling: GET + parse + leaf hash + key hash", "bare SHA-256 audit path", "one Ed25519 verify", "PEC paper Table 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestBenchCTUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--entries", "0"}, {"--keys", "10"}, {"--parallel", "0"}, {"--concurrency", "0"}, {"extra"},
	} {
		if code, _, _ := runCLI(t, append([]string{"bench", "ct"}, args...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want usage", args, code)
		}
	}
}
