package cli

import (
	"crypto/sha1"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"crypto/tls"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// TestCheckResolveHostPort: check --resolve HOST:PORT=IP:PORT maps only
// that port of HOST, as overhead's does, so two ports of one name can lead
// to two places: here the site on one, a MitM on the other.
func TestCheckResolveHostPort(t *testing.T) {
	w := newCheckWorld(t)
	base := []string{"check", "--notaries", w.dir, "--allow-private", "--roots", w.roots, "--no-cache",
		"--resolve", "bank.test:8443=" + w.site, "--resolve", "bank.test:443=" + w.mitm}
	code, out, errs := runCLI(t, append(base, "bank.test:8443")...)
	if code != 0 || !strings.Contains(out, "TRUSTED") {
		t.Fatalf("bank.test:8443 (the site): exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append(base, "bank.test:443")...)
	if code != 1 {
		t.Fatalf("bank.test:443 (the MitM): exit %d; want 1 (untrusted)\n%s%s", code, out, errs)
	}
}

// TestNotaryServeResolve: pkie notary serve --resolve sends a named target
// to a loopback site, so an operator can try named sites; without
// --allow-private it refuses to start, naming the flag.
func TestNotaryServeResolve(t *testing.T) {
	data := filepath.Join(t.TempDir(), "notary")
	if code, _, errs := runCLI(t, "notary", "init", "--data", data); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	ca, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	leaf, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	site, err := testbed.StartSite("site.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()

	code, _, errs := runCLI(t, "notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--resolve", "site.test:443="+site.Addr.String())
	if code != ExitUsage || !strings.Contains(errs, "--allow-private") || !strings.Contains(errs, "127.0.0.1") {
		t.Fatalf("a --resolve to loopback without --allow-private: exit %d %q; want 2 naming --allow-private", code, firstLines(errs))
	}

	file := filepath.Join(t.TempDir(), "resolve.txt")
	os.WriteFile(file, []byte("site.test:443 "+site.Addr.String()+"\n"), 0o644)
	for _, flags := range [][]string{{"--resolve", "site.test:443=" + site.Addr.String()}, {"--resolve-file", file}} {
		c := startChild(t, append([]string{"notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--allow-private"}, flags...)...)
		addr := c.waitLine(t, "listening ")
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		sum := sha1.Sum(leaf.Cert.Raw)
		resp, err := client.Post("https://"+addr+"/target/site.test+443", "application/x-www-form-urlencoded", strings.NewReader("fingerprint="+probe.ColonHex(sum[:])))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%v: the named site: %d; want 200", flags, resp.StatusCode)
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// TestResolveFileNamesTheLine: a bad line in --resolve-file is reported
// with the file and the line, whichever command reads it.
func TestResolveFileNamesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolve.txt")
	if err := os.WriteFile(path, []byte("# sites\na.test 127.0.0.1:1\n\nb.test:443=127.0.0.1:2\nc.test=not-an-ip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + ":5:"
	for _, args := range [][]string{
		{"scan", "x", "--resolve-file", path},
		{"check", "bank.test", "--resolve-file", path},
		{"notary", "serve", "--resolve-file", path},
	} {
		code, _, errs := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(errs, want) || !strings.Contains(errs, "not-an-ip") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s and the bad address", args, code, firstLines(errs), want)
		}
	}
}

func firstLines(s string) string {
	if i := strings.Index(s, "\nUsage"); i >= 0 {
		return s[:i]
	}
	return s
}
