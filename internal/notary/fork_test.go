package notary_test

import (
	"net/http"
	"testing"

	"github.com/pkie/pkie/internal/notary"
)

// TestConvergenceClientFormsSigned sends the requests real Convergence clients
// send: the maintained fork's trailing address segment, and the
// fingerprint in the query string (the original notary reads Twisted's
// merged arguments).
func TestConvergenceClientFormsSigned(t *testing.T) {
	w := newWorld(t, notary.Config{})
	good := sha1Colon(w.site.Leaf().Cert.Raw)
	bad := sha1Colon([]byte("forged"))
	for _, tc := range []struct {
		name, target, body string
		want               int
	}{
		{"fork's trailing address", "site.test+443/93.184.216.34", "fingerprint=" + good, http.StatusOK},
		{"fork's trailing IPv6 address", "site.test+443/2001:db8::1", "fingerprint=" + good, http.StatusOK},
		// The trailing address is not probed: a client whose DNS an
		// attacker controls would send the attacker's address.
		{"trailing address of another server", "site.test+443/127.0.0.9", "fingerprint=" + bad, http.StatusConflict},
		{"trailing segment not an address", "site.test+443/evil", "fingerprint=" + good, http.StatusBadRequest},
		{"fingerprint in the query", "site.test+443?fingerprint=" + good, "", http.StatusOK},
		{"fingerprint in query and body, agreeing", "site.test+443?fingerprint=" + good, "fingerprint=" + good, http.StatusOK},
		{"fingerprint in query and body, differing", "site.test+443?fingerprint=" + bad, "fingerprint=" + good, http.StatusBadRequest},
		{"no fingerprint anywhere", "site.test+443", "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := w.post(t, tc.target, tc.body)
			if code != tc.want {
				t.Fatalf("POST /target/%s: %d %s, want %d", tc.target, code, body, tc.want)
			}
			if code == http.StatusOK {
				if fps := convergenceVerify(t, body, w.notary.Identity.Cert); len(fps) != 1 || fps[0] != good {
					t.Fatalf("list = %v, want [%s]", fps, good)
				}
			}
		})
	}
}

func TestParseTargetPathForms(t *testing.T) {
	for _, tc := range []struct {
		path string
		host string
		port int
		ok   bool
	}{
		{"/target/example.com+443", "example.com", 443, true},
		{"/target/example.com+443/192.0.2.1", "example.com", 443, true},
		{"/target/example.com+8443/[2001:db8::1]", "example.com", 8443, true},
		{"/target/example.com+443/", "", 0, false},
		{"/target/example.com+443/192.0.2.1/x", "", 0, false},
		{"/target/example.com+443/example.org", "", 0, false},
	} {
		host, port, err := notary.ParseTargetPath(tc.path)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("ParseTargetPath(%q) = %q, %d, %v", tc.path, host, port, err)
		}
	}
}
