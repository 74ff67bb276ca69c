package client

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOBCJar: cookies go back only to the origin that set them (scheme,
// host and port), on matching paths, until they expire or the origin
// deletes them; the file survives a reopen, is 0600, and stays bounded.
func TestOBCJar(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "jar.json")
	j, err := openOBCJar(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	u := func(s string) *url.URL {
		t.Helper()
		p, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	names := func(cs []*http.Cookie) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name+"="+c.Value)
		}
		return strings.Join(out, " ")
	}
	j.SetCookies(u("https://a.test:8443/login"), []*http.Cookie{
		{Name: "sid", Value: "1", Path: "/", MaxAge: 60},
		{Name: "deep", Value: "2", Path: "/app"},
		{Name: "here", Value: "3"}, // default path of /login: /
	})
	for _, tc := range []struct{ url, want string }{
		{"https://a.test:8443/app/x", "deep=2 sid=1 here=3"},
		{"https://a.test:8443/", "sid=1 here=3"},
		{"https://a.test:8443/apple", "sid=1 here=3"},
		{"https://a.test:9443/", ""},   // another port: another origin
		{"https://b.a.test:8443/", ""}, // another host
		{"http://a.test:8443/", ""},    // not https
	} {
		if got := names(j.Cookies(u(tc.url))); got != tc.want {
			t.Errorf("Cookies(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
	if err := j.save(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("jar file: %v %v, want 0600", fi, err)
	}
	j2, err := openOBCJar(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j2.origins, j.origins) {
		t.Fatalf("reopened jar %v, saved %v", j2.origins, j.origins)
	}
	// Max-Age counts from when it was set; deletion by MaxAge < 0.
	now = now.Add(61 * time.Second)
	j2.SetCookies(u("https://a.test:8443/logout"), []*http.Cookie{{Name: "here", Value: "", MaxAge: -1}})
	if got := names(j2.Cookies(u("https://a.test:8443/app/"))); got != "deep=2" {
		t.Errorf("after expiry and deletion: %q, want deep=2", got)
	}
	for i := 0; i < 2*obcJarMaxPerOrigin; i++ {
		j2.SetCookies(u("https://a.test:8443/"), []*http.Cookie{{Name: "c" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Value: "x"}})
	}
	if n := len(j2.origins["https://a.test:8443"]); n != obcJarMaxPerOrigin {
		t.Errorf("an origin holds %d cookies, want the bound %d", n, obcJarMaxPerOrigin)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", "cookies", "not a pkie cookie jar"},
		{"version", `{"version":2,"origins":{}}`, "version 2"},
		{"unknown field", `{"version":1,"origins":{},"x":1}`, "not a pkie cookie jar"},
		{"trailing data", `{"version":1,"origins":{}} {}`, "data after"},
		{"not an origin", `{"version":1,"origins":{"https://a.test/x":[]}}`, "not an origin"},
		{"origin not as written", `{"version":1,"origins":{"https://A.test":[]}}`, "not an origin"},
		{"bad cookie", `{"version":1,"origins":{"https://a.test:443":[{"name":"a b","value":"","path":"/"}]}}`, "not valid"},
		{"relative path", `{"version":1,"origins":{"https://a.test:443":[{"name":"a","value":"","path":"x"}]}}`, "not valid"},
		{"too big", `{"version":1,"origins":{}}` + strings.Repeat(" ", obcJarMaxBytes), "more than"},
	} {
		p := filepath.Join(t.TempDir(), "bad.json")
		os.WriteFile(p, []byte(tc.body), 0o600)
		if _, err := openOBCJar(p, clock); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzOBCJar: a jar file is parsed without panicking, and whatever parses
// writes back to the same jar.
func FuzzOBCJar(f *testing.F) {
	f.Add([]byte(`{"version":1,"origins":{"https://a.test:8443":[{"name":"sid","value":"v1.x","path":"/","expires":"2030-01-01T00:00:00Z","http_only":true}]}}`))
	f.Add([]byte(`{"version":1,"origins":{}}`))
	f.Add([]byte(`{"version":1,"origins":{"https://[::1]:443":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		origins, err := parseOBCJar(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(obcJarFile{Version: 1, Origins: origins})
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseOBCJar(out)
		if err != nil {
			t.Fatalf("a parsed jar does not parse once written: %v\n%s", err, out)
		}
		if len(again) != len(origins) {
			t.Fatalf("%d origins, %d after writing", len(origins), len(again))
		}
	})
}
