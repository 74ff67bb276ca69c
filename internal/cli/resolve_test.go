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

func TestResolves(t *testing.T) {
	var r resolves
	for _, s := range []string{"a.test:443=127.0.0.1:8443", "a.test=127.0.0.2", "B.test=[::1]:9000", "c.test=::1", "d.test.:8443=[::ffff:127.0.0.3]"} {
		if err := r.add(s); err != nil {
			t.Fatalf("add(%q): %v", s, err)
		}
	}
	for _, tc := range []struct {
		host string
		port int
		want string
	}{
		{"a.test", 443, "127.0.0.1:8443"}, // HOST:PORT wins for its port
		{"A.test", 80, "127.0.0.2:80"},    // HOST for the others, keeping the port asked for
		{"b.test", 80, "[::1]:9000"},
		{"c.test", 443, "[::1]:443"},
		{"d.test", 8443, "127.0.0.3:8443"},
	} {
		got, err := r.lookup(t.Context(), tc.host, tc.port)
		if err != nil || len(got) != 1 || got[0].String() != tc.want {
			t.Errorf("lookup(%s, %d) = %v, %v; want %s", tc.host, tc.port, got, err, tc.want)
		}
	}
	if _, ok := r.find("d.test", 443); ok {
		t.Error("an entry for d.test:8443 answers for port 443")
	}
	for _, tc := range []struct{ spec, want string }{
		{"a.test", "want HOST[:PORT]=IP[:PORT]"},
		{"=127.0.0.1", "want HOST[:PORT]=IP[:PORT]"},
		{"a.test=localhost:80", "is not an IP or IP:PORT address"},
		{"a.test:http=127.0.0.1:80", "is not a number"},
		{"a.test=127.0.0.1:0", "port 0"},
	} {
		if err := r.add(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add(%q) = %v; want an error mentioning %q", tc.spec, err, tc.want)
		}
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
	var r resolves
	if err := r.addFile(path[:len(path)-4]); err == nil {
		t.Error("a missing file reads")
	}
}

func firstLines(s string) string {
	if i := strings.Index(s, "\nUsage"); i >= 0 {
		return s[:i]
	}
	return s
}

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

// FuzzResolveLine: a resolve-file line either fails with an error or adds
// an entry that lookups then answer with a usable address; nothing panics.
func FuzzResolveLine(f *testing.F) {
	for _, s := range []string{"a.test 127.0.0.1:1", "a.test:443=[::1]:8443", "# x", "", "b=1.2.3.4", "[::1]:80 ::1", "x y z", "a.test=[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var r resolves
		if err := r.addLine(line); err != nil {
			if !r.empty() {
				t.Fatalf("a failed line %q added an entry", line)
			}
			return
		}
		for _, a := range r.addrs() {
			if !a.IsValid() || a.Is4In6() {
				t.Fatalf("line %q mapped to %v", line, a)
			}
		}
		for h := range r.byHost {
			as, ok := r.find(h, 443)
			if !ok || len(as) == 0 || as[0].Port() == 0 {
				t.Fatalf("line %q: find(%q, 443) = %v, %v", line, h, as, ok)
			}
		}
	})
}
