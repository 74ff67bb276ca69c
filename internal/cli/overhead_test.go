package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/overhead"
	"github.com/pkie/pkie/internal/testbed"
)

func TestOverheadCommand(t *testing.T) {
	tw, err := testbed.StartTwins(testbed.TwinOptions{Objects: 2, CSSImages: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(roots, tw.CA.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"overhead", tw.Host, "twin.test/missing", "-n", "2", "--allow-private", "--roots", roots,
		"--resolve", "twin.test:80=" + tw.HTTP.String(), "--resolve", "twin.test:443=" + tw.HTTPS.String()}

	t.Run("table and plots", func(t *testing.T) {
		prefix := filepath.Join(dir, "ov")
		code, out, errs := runCLI(t, append(base, "--plot", prefix)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range []string{"nonpersistent", "persistent, no redirects", "twin.test/", "from CSS", "unresponsive (2)", "twin.test/missing (http nonpersistent)", "page answered HTTP status 404"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errs, "page loads") {
			t.Errorf("no progress on stderr: %q", errs)
		}
		for _, name := range []string{"run-overhead-ms", "run-overhead-pct", "site-overhead-ms", "site-overhead-pct", "overhead-vs-http-ms", "overhead-vs-http-pct", "size-time"} {
			for _, ext := range []string{".svg", ".png"} {
				if st, err := os.Stat(prefix + "-" + name + ext); err != nil || st.Size() == 0 {
					t.Errorf("plot %s%s: %v", name, ext, err)
				}
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, errs := runCLI(t, append(base, "--json", "--mode", "persistent", "--objects")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep overhead.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if rep.Runs != 2 || len(rep.Modes) != 1 || len(rep.Sites) != 2 || len(rep.Unresponsive) != 2 || len(rep.Aggregates.Sites) != 1 {
			t.Fatalf("report: runs %d, modes %v, %d sites, %d unresponsive, %d aggregated", rep.Runs, rep.Modes, len(rep.Sites), len(rep.Unresponsive), len(rep.Aggregates.Sites))
		}
		l := rep.Sites[0].Loads[0]
		// The page, 2 objects, 2 stylesheets and 4 background images, 5
		// of them found in CSS (the @import'ed sheet and the images).
		if len(l.Objects) != 9 || l.CSSObjects != 5 || l.Objects[0].Kind != overhead.KindPage || l.Objects[0].Status != 200 {
			t.Errorf("first load: %d from CSS, objects %+v", l.CSSObjects, l.Objects)
		}
		if sa := rep.Aggregates.Sites[0]; sa.CSSObjects != 5 {
			t.Errorf("aggregate: %.1f objects from CSS per load, want 5", sa.CSSObjects)
		}
	})
	t.Run("no-css", func(t *testing.T) {
		code, out, errs := runCLI(t, append(base, "--json", "--mode", "persistent", "--no-css", "-n", "1")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep overhead.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		// The page, 2 objects and the linked stylesheet.
		if l := rep.Sites[0].Loads[0]; l.Requests != 4 || l.CSSObjects != 0 {
			t.Errorf("--no-css load: %d requests, %d from CSS; want 4 and 0", l.Requests, l.CSSObjects)
		}
	})
}

func TestOverheadCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"overhead"}, ExitUsage, "want at least one URL"},
		{[]string{"overhead", "ftp://x.test/"}, ExitUsage, `scheme "ftp" is not http or https`},
		{[]string{"overhead", "http://x.test:8080/"}, ExitUsage, "names port 8080"},
		{[]string{"overhead", "http://%zz/"}, ExitUsage, "malformed URL"},
		{[]string{"overhead", "x.test", "-n", "0"}, ExitUsage, "want 1 to 100000 runs"},
		{[]string{"overhead", "x.test", "--mode", "sometimes"}, ExitUsage, "not persistent, nonpersistent or both"},
		{[]string{"overhead", "x.test", "--resolve", "x.test"}, ExitUsage, "want HOST[:PORT]=IP[:PORT]"},
		{[]string{"overhead", "x.test", "--resolve", "x.test=localhost:80"}, ExitUsage, "is not an IP or IP:PORT address"},
		{[]string{"overhead", "x.test", "--resolve", "x.test:http=127.0.0.1:80"}, ExitUsage, "is not a number"},
		{[]string{"overhead", "x.test", "--tls-max", "1.1"}, ExitUsage, "want 1.2 or 1.3"},
		{[]string{"overhead", "x.test", "--roots", "/nonexistent.pem"}, ExitUsage, "--roots"},
		{[]string{"overhead", "x.test", "--parallel", "0"}, ExitUsage, "--parallel 0"},
		// Loopback without --allow-private: measured, refused, listed; exit 1.
		{[]string{"overhead", "x.test", "-n", "1", "--resolve", "x.test=127.0.0.1:9"}, ExitNegative, "refusing to connect to 127.0.0.1 (Loopback)"},
	}
	for _, tc := range tests {
		code, out, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%q: exit %d, output %q %q; want exit %d mentioning %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}
