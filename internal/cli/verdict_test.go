package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckSaysWhatHappened runs pkie check where the notaries agree with
// this machine but CA validation fails (the site's CA is not in the
// roots given): by default that is untrusted, headlined by the CA
// failure and not as a man in the middle; --trust-agility trusts it. A
// URL is refused with a hint, and --notaries takes one bundle file.
func TestCheckSaysWhatHappened(t *testing.T) {
	w := newCheckWorld(t)
	// Without --roots the system's roots: the testbed's CA is not among them.
	base := []string{"check", "bank.test", "--notaries", w.dir, "--allow-private", "--no-cache", "--resolve", "bank.test=" + w.site}

	code, out, errOut := runCLI(t, base...)
	if code != ExitNegative || !strings.Contains(out, "UNTRUSTED") || !strings.Contains(out, "CA validation failed") || strings.Contains(out, "man-in-the-middle") {
		t.Fatalf("CA failure: exit %d, stderr %s\n%s", code, errOut, out)
	}
	code, out, errOut = runCLI(t, append(base, "--trust-agility")...)
	if code != ExitOK || !strings.Contains(out, "TRUSTED") {
		t.Fatalf("--trust-agility: exit %d, stderr %s\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, append(base, "--roots", w.roots)...)
	if code != ExitOK {
		t.Fatalf("with the site's roots: exit %d\n%s", code, out)
	}

	code, _, errOut = runCLI(t, "check", "https://bank.test/", "--notaries", w.dir)
	if code != ExitUsage || !strings.Contains(errOut, "give HOST[:PORT], not a URL") {
		t.Fatalf("URL: exit %d: %s", code, errOut)
	}

	files, err := filepath.Glob(filepath.Join(w.dir, "*.notary"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bundles in %s", w.dir)
	}
	code, out, errOut = runCLI(t, "check", "bank.test", "--notaries", files[0], "--allow-private", "--no-cache", "--roots", w.roots, "--resolve", "bank.test="+w.site, "--json")
	if code != ExitOK || strings.Count(out, `"vote":`) != 1 {
		t.Fatalf("--notaries FILE: exit %d, stderr %s\n%s", code, errOut, out)
	}
}
