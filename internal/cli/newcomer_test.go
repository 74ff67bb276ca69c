package cli

import (
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestNewcomerMessages: what a new user typing the wrong thing sees. Each
// answer is a usage error (exit 2) on one line that says what to do.
func TestNewcomerMessages(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "sites.csv")
	os.WriteFile(csv, []byte("1,example.com\n2,example.org\n"), 0o644)
	logDir := filepath.Join(dir, "log")
	if code, _, errOut := runCLI(t, "log", "init", "--data", logDir, "--origin", "log.test"); code != 0 {
		t.Fatalf("log init: %d %s", code, errOut)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"check", "--frob", "x"}, `flag provided but not defined: --frob (run "pkie check -h" for the flags)`},
		{"unknown subcommand", []string{"log", "frob"}, `unknown subcommand "frob"; want init, serve, add or roots`},
		{"negative duration", []string{"check", "--timeout", "-1s", "x"}, "--timeout -1s is negative"},
		{"negative duration elsewhere", []string{"probe", "--timeout", "-5s", "x"}, "--timeout -5s is negative"},
		{"URL for a host", []string{"probe", "https://example.com/"}, "give HOST[:PORT], not a URL"},
		{"bad origin", []string{"log", "init", "--data", filepath.Join(dir, "bad"), "--origin", "my log"}, "without scheme or trailing slash"},
		{"plot into a missing directory", []string{"overhead", "--plot", filepath.Join(dir, "nodir", "x"), "https://127.0.0.1:1/"}, "--plot"},
		{"roots plot into a missing directory", []string{"roots", "--plot", filepath.Join(dir, "nodir", "x"), csv}, "--plot"},
		{"roots export into a missing directory", []string{"roots", "--export", filepath.Join(dir, "nodir", "x.pem"), csv}, "--export"},
		{"roots of a file that is no scan", []string{"roots", "--quiet", csv}, "no scan record loaded"},
		{"log add without a chain", []string{"log", "add", "--url", "http://127.0.0.1:1"}, "want at least one chain file"},
		{"log roots of nothing", []string{"log", "roots"}, "want one of --data and --url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q (want 2 and %q); stdout %.200s", code, errOut, tc.want, out)
			}
			// (roots lists the lines it skipped before its one-line verdict.)
			if n := strings.Count(strings.TrimSpace(errOut), "\n"); n > 0 && tc.args[0] != "roots" {
				t.Fatalf("%d lines on stderr, want one:\n%s", n+1, errOut)
			}
		})
	}
	// A failed init leaves nothing behind: the rerun with a good origin works.
	if _, err := os.Stat(filepath.Join(dir, "bad")); !os.IsNotExist(err) {
		t.Fatalf("failed init left %s behind (%v)", filepath.Join(dir, "bad"), err)
	}
	if code, _, errOut := runCLI(t, "log", "init", "--data", filepath.Join(dir, "bad"), "--origin", "my.log"); code != 0 {
		t.Fatalf("rerun after a failed init: %d %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "version", "--json"); code != 0 || !strings.Contains(out, `"go": "go1.`) {
		t.Fatalf("version: %d %s", code, out)
	}
}

// TestServeBindsFirst: a log or authority whose port is taken must not
// sign anything before it finds out.
func TestServeBindsFirst(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	for _, role := range []string{"log", "revocation"} {
		data := filepath.Join(dir, role)
		if code, _, errOut := runCLI(t, role, "init", "--data", data, "--origin", role+".test"); code != 0 {
			t.Fatalf("%s init: %s", role, errOut)
		}
		state := filepath.Join(data, role+".state")
		before, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, role, "serve", "--data", data, "--listen", busy.Addr().String())
		after, _ := os.ReadFile(state)
		if code == 0 || !strings.Contains(errOut, "--listen") || string(after) != string(before) {
			t.Fatalf("%s serve on a busy port: exit %d, %q; state changed %v", role, code, errOut, string(after) != string(before))
		}
	}
}

// TestLogServeAndAdd: a log initialised with --roots keeps them (by
// content: the source file may go), serves them at get-roots, and accepts a
// chain to them submitted with log add, whose SCT it prints.
func TestLogServeAndAdd(t *testing.T) {
	ca, err := testbed.NewRootCA("Remembered Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"a.test"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	os.WriteFile(roots, ca.PEM(), 0o644)
	var chain []byte
	for _, der := range leaf.Chain {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	chainFile := filepath.Join(dir, "chain.pem")
	os.WriteFile(chainFile, chain, 0o644)
	data := filepath.Join(dir, "log")
	if code, _, errOut := runCLI(t, "log", "init", "--data", data, "--origin", "log.test", "--roots", roots); code != 0 {
		t.Fatalf("log init --roots: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "log", "init", "--data", data, "--origin", "log.test", "--roots", roots); code == 0 {
		t.Fatal("a second init replaced the log's key")
	}
	os.Remove(roots) // kept by content, not by path
	c := startChild(t, "log", "serve", "--data", data, "--listen", "127.0.0.1:0")
	u := "http://" + c.waitLine(t, "listening ")
	for _, args := range [][]string{{"--data", data}, {"--url", u}} {
		code, out, errOut := runCLI(t, append([]string{"log", "roots"}, args...)...)
		if code != 0 || !strings.Contains(out, string(ca.PEM())) {
			t.Errorf("log roots %v: %d %q %s", args, code, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, "log", "add", "--url", u, "--json", chainFile)
	if code != 0 || !strings.Contains(out, `"leaf_index": 0`) {
		t.Fatalf("log add: %d %s %s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "log", "add", "--url", u, "--precert", chainFile)
	if code == 0 || !strings.Contains(errOut, "not a precertificate") {
		t.Fatalf("log add --precert of a certificate: %d %s", code, errOut)
	}
}
