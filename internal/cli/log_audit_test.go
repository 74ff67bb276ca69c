package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/checkpoint"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/testbed"
)

func TestLogAuditRemote(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	vkey, err := ctlog.Init(logDir, "cli.test/log")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ctlog.Open(logDir, ctlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ca, err := testbed.NewRootCA("CLI Audit Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"audit.test"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AddChain(ctx, leaf.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	defer srv.Close()
	keyFile := filepath.Join(dir, "log.pub")
	if err := os.WriteFile(keyFile, []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "audit.state")
	_, otherKey, _ := checkpoint.GenerateKey("cli.test/log")
	down := httptest.NewServer(nil)
	down.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // stdout must hold it
		err  string // stderr must hold it
	}{
		{"honest log, first run", []string{"--url", srv.URL, "--key", "@" + keyFile, "--state", state, "--json"}, ExitOK, `"ok": true`, ""},
		{"honest log, second run", []string{"--url", srv.URL, "--key", vkey, "--state", state}, ExitOK, "ok   log checkpoint consistent with the saved one\n", ""},
		{"wrong key", []string{"--url", srv.URL, "--key", otherKey}, ExitNegative, "FAIL log checkpoint signed by the log", ""},
		{"no key", []string{"--url", srv.URL}, ExitUsage, "", "--url needs --key"},
		{"bad key", []string{"--url", srv.URL, "--key", "nonsense"}, ExitUsage, "", "--key"},
		{"local flag with --url", []string{"--url", srv.URL, "--key", vkey, "--tree", "x"}, ExitUsage, "", "--tree is for a local audit"},
		{"remote flag without --url", []string{"--data", logDir, "--state", state}, ExitUsage, "", "--state is for a remote audit"},
		{"log down", []string{"--url", down.URL, "--key", vkey}, ExitUsage, "", "connection refused"},
		{"local audit still works", []string{"--data", logDir}, ExitOK, "ok   same set as the log's certificates", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"log", "audit"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.err) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			if strings.Contains(strings.Join(tc.args, " "), "--json") {
				var v struct {
					OK     bool
					Report ctlog.AuditReport
				}
				if err := json.Unmarshal([]byte(out), &v); err != nil || !v.OK || len(v.Report.Checks) != 12 {
					t.Errorf("JSON report %s: %v", out, err)
				}
			}
		})
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v %v, want mode 0600", fi, err)
	}
}
