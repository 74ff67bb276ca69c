package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestLostDatabaseRefused: with the database gone and the key kept, the
// commands that sign refuse loudly, naming both sizes; the revocation
// authority starts over only with --dangerously-accept-fork; the log
// refuses to serve.
func TestLostDatabaseRefused(t *testing.T) {
	dir := t.TempDir()
	rm := func(d, db string) {
		for _, s := range []string{"", "-wal", "-shm"} {
			os.Remove(filepath.Join(d, db+s))
		}
	}
	revDir := filepath.Join(dir, "rev")
	if code, _, errs := runCLI(t, "revocation", "init", "--data", revDir, "--origin", "cli.test/rev"); code != 0 {
		t.Fatal(errs)
	}
	serials := filepath.Join(dir, "serials.txt")
	os.WriteFile(serials, []byte("01\n02\n"), 0o644)
	if code, _, errs := runCLI(t, "revocation", "add-serials", "--data", revDir, "--issuer-key-id", "abcd", serials); code != 0 {
		t.Fatal(errs)
	}
	rm(revDir, "revocation.db")
	for _, args := range [][]string{
		{"revocation", "serve", "--data", revDir, "--listen", "127.0.0.1:0"},
		{"revocation", "publish", "--data", revDir},
		{"revocation", "add-serials", "--data", revDir, "--issuer-key-id", "abcd", serials},
	} {
		code, _, errs := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(errs, "holds 0 revoked keys, but the authority last signed a tree of 2") {
			t.Errorf("%v on a lost database: exit %d %q", args[:2], code, errs)
		}
	}
	code, out, errs := runCLI(t, "revocation", "publish", "--data", revDir, "--dangerously-accept-fork")
	if code != 0 || !strings.Contains(out, "published 0 revoked keys") || !strings.Contains(errs, "ACCEPTING A FORK") {
		t.Fatalf("publish --dangerously-accept-fork: %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, "revocation", "add-serials", "--data", revDir, "--issuer-key-id", "abcd", serials); code != 0 {
		t.Fatalf("after the accepted fork: %s", errs)
	}

	// The log: its storage lost after it signed entries.
	logDir := filepath.Join(dir, "log")
	ca, _ := testbed.NewRootCA("State Root", testbed.ECDSAP256)
	rootPEM := filepath.Join(dir, "root.pem")
	writePEM(t, rootPEM, "CERTIFICATE", ca.Cert.Raw)
	if code, _, errs := runCLI(t, "log", "init", "--data", logDir, "--origin", "cli.test/log", "--roots", rootPEM); code != 0 {
		t.Fatal(errs)
	}
	l, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"state.test"}})
	chain := filepath.Join(dir, "chain.pem")
	writePEM(t, chain, "CERTIFICATE", l.Chain...)
	c := startChild(t, "log", "serve", "--data", logDir, "--listen", "127.0.0.1:0")
	if code, _, errs := runCLI(t, "log", "add", "--url", "http://"+c.waitLine(t, "listening "), chain); code != 0 {
		t.Fatal(errs)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
	os.RemoveAll(filepath.Join(logDir, "tiles"))
	code, _, errs = runCLI(t, "log", "serve", "--data", logDir, "--listen", "127.0.0.1:0")
	if code != ExitUsage || !strings.Contains(errs, "holds no checkpoint, but the log last signed a tree of 1 entries") {
		t.Errorf("log serve on a lost storage: exit %d %q", code, errs)
	}
}

// TestServeRemovesStaleTemp: temporary tree files a killed publication
// left are gone once "revocation serve" listens; files of other names stay.
func TestServeRemovesStaleTemp(t *testing.T) {
	revDir := filepath.Join(t.TempDir(), "rev")
	if code, _, errs := runCLI(t, "revocation", "init", "--data", revDir, "--origin", "cli.test/rev"); code != 0 {
		t.Fatal(errs)
	}
	stale := []string{"revoked.tree.tmp-00112233aabb", ".revoked.tree.tmp-00112233aabb.tmp123"}
	keep := "revoked.tree.tmp-notours"
	for _, f := range append(stale, keep) {
		os.WriteFile(filepath.Join(revDir, f), []byte("stale"), 0o600)
	}
	c := startChild(t, "revocation", "serve", "--data", revDir, "--listen", "127.0.0.1:0")
	c.waitLine(t, "listening ")
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(revDir, f)); err == nil {
			t.Errorf("%s still there", f)
		}
	}
	if _, err := os.Stat(filepath.Join(revDir, keep)); err != nil {
		t.Errorf("%s removed: %v", keep, err)
	}
}

// TestProverStateAcrossRestart: "prover serve --state" remembers the tree
// it served; restarted against an authority that now signs a smaller tree
// under the same key, it refuses to start instead of serving it.
func TestProverStateAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	revDir, stateDir := filepath.Join(dir, "rev"), filepath.Join(dir, "prover-state")
	if code, _, errs := runCLI(t, "revocation", "init", "--data", revDir, "--origin", "cli.test/rev"); code != 0 {
		t.Fatal(errs)
	}
	serials := filepath.Join(dir, "serials.txt")
	os.WriteFile(serials, []byte("01\n02\n03\n"), 0o644)
	if code, _, errs := runCLI(t, "revocation", "add-serials", "--data", revDir, "--issuer-key-id", "abcd", serials); code != 0 {
		t.Fatal(errs)
	}
	ra := startChild(t, "revocation", "serve", "--data", revDir, "--listen", "127.0.0.1:0")
	url := "http://" + ra.waitLine(t, "listening ")
	key := "@" + filepath.Join(revDir, "revocation.pub")
	p := startChild(t, "prover", "serve", "--revocation", url, "--revocation-key", key, "--state", stateDir, "--listen", "127.0.0.1:0")
	p.waitLine(t, "listening ")
	p.cmd.Process.Kill()
	p.cmd.Wait()
	ra.cmd.Process.Kill()
	ra.cmd.Wait()
	ents, err := os.ReadDir(stateDir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("state directory: %v %v", ents, err)
	}
	if fi, _ := ents[0].Info(); fi.Mode().Perm() != 0o600 {
		t.Errorf("prover state file mode %v", fi.Mode().Perm())
	}

	// The authority loses its database; started over deliberately, it signs
	// the empty tree under the same key.
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(revDir, "revocation.db"+s))
	}
	forged := startChild(t, "revocation", "serve", "--data", revDir, "--listen", "127.0.0.1:0", "--dangerously-accept-fork")
	url = "http://" + forged.waitLine(t, "listening ")
	code, _, errs := runCLI(t, "prover", "serve", "--revocation", url, "--revocation-key", key, "--state", stateDir, "--listen", "127.0.0.1:0")
	if code != ExitUsage || !strings.Contains(errs, "REFUSED") || !strings.Contains(errs, "tree of 0 entries is behind the 3 last signed") {
		t.Fatalf("restarted prover against a shrunk tree: exit %d %q", code, errs)
	}
}
