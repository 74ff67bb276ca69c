package command

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestResolves(t *testing.T) {
	var r Resolves
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
		got, err := r.Lookup(t.Context(), tc.host, tc.port)
		if err != nil || len(got) != 1 || got[0].String() != tc.want {
			t.Errorf("lookup(%s, %d) = %v, %v; want %s", tc.host, tc.port, got, err, tc.want)
		}
	}
	if _, ok := r.Find("d.test", 443); ok {
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

func TestResolveFileMissing(t *testing.T) {
	var r Resolves
	if err := r.addFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file reads")
	}
}

// FuzzResolveLine: a resolve-file line either fails with an error or adds
// an entry that lookups then answer with a usable address; nothing panics.
func FuzzResolveLine(f *testing.F) {
	for _, s := range []string{"a.test 127.0.0.1:1", "a.test:443=[::1]:8443", "# x", "", "b=1.2.3.4", "[::1]:80 ::1", "x y z", "a.test=[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var r Resolves
		if err := r.addLine(line); err != nil {
			if !r.Empty() {
				t.Fatalf("a failed line %q added an entry", line)
			}
			return
		}
		for _, a := range r.Addrs() {
			if !a.IsValid() || a.Is4In6() {
				t.Fatalf("line %q mapped to %v", line, a)
			}
		}
		for h := range r.byHost {
			as, ok := r.Find(h, 443)
			if !ok || len(as) == 0 || as[0].Port() == 0 {
				t.Fatalf("line %q: find(%q, 443) = %v, %v", line, h, as, ok)
			}
		}
	})
}
