package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestLostDatabaseRefused: with the database gone and the key kept, the
// commands that sign refuse loudly, naming both sizes; the revocation
// authority starts over only with --dangerously-accept-fork; the log's
// local audit reports the loss.
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

	logDir := filepath.Join(dir, "log")
	if code, _, errs := runCLI(t, "log", "init", "--data", logDir, "--origin", "cli.test/log"); code != 0 {
		t.Fatal(errs)
	}
	ca, _ := testbed.NewRootCA("State Root", testbed.ECDSAP256)
	l, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"state.test"}})
	chain := filepath.Join(dir, "chain.pem")
	writePEM(t, chain, "CERTIFICATE", l.Chain...)
	if code, _, errs := runCLI(t, "log", "add", "--data", logDir, "--roots", "any", chain); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := runCLI(t, "log", "build", "--data", logDir); code != 0 {
		t.Fatal(errs)
	}
	rm(logDir, "log.db")
	for _, args := range [][]string{
		{"log", "add", "--data", logDir, "--roots", "any", chain},
		{"log", "build", "--data", logDir},
		{"log", "serve", "--data", logDir, "--listen", "127.0.0.1:0"},
	} {
		code, _, errs := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(errs, "holds 0 entries, but the log last signed a tree of 2") {
			t.Errorf("%v on a lost database: exit %d %q", args[:2], code, errs)
		}
	}
}
