package notary_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
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

// TestBouncerTriesEveryListedNotary speaks to the bouncer as the
// Convergence client does: CONNECT to the bundle's first host, one
// X-Convergence-Notary header per other host. The first host is down; the
// bouncer must relay to the one that answers, say which, and refuse the
// whole request if any named destination is not a configured notary.
func TestBouncerTriesEveryListedNotary(t *testing.T) {
	w := newWorld(t, notary.Config{})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now
	live := w.notary.Addr.String()
	b := notary.NewBouncer([]string{deadAddr, live}, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go notary.ServeBouncer(ctx, ln, b)
	plus := func(a string) string { h, p, _ := net.SplitHostPort(a); return h + "+" + p }

	connect := func(t *testing.T, target string, headers ...string) (net.Conn, *http.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
		for _, h := range headers {
			req += "X-Convergence-Notary: " + h + "\r\n"
		}
		conn.Write([]byte(req + "\r\n"))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 && br.Buffered() > 0 {
			t.Fatal("bouncer sent bytes after its response head")
		}
		return conn, resp
	}

	t.Run("first down, replica answers", func(t *testing.T) {
		conn, resp := connect(t, deadAddr, plus(live))
		if resp.StatusCode != 200 || resp.Header.Get("Proxy-Agent") == "" || resp.Header.Get("X-Convergence-Notary") != plus(live) {
			t.Fatalf("CONNECT: %s, headers %v", resp.Status, resp.Header)
		}
		// The tunnel reaches the live notary: a TLS handshake there
		// presents its pinned certificate.
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.ConnectionState().PeerCertificates[0].Raw, w.notary.Identity.Cert.Raw) {
			t.Fatal("tunnel reached something other than the notary")
		}
	})
	t.Run("a listed destination not allowed", func(t *testing.T) {
		_, resp := connect(t, live, "evil.example+443")
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT with a forbidden replica: %s", resp.Status)
		}
	})
	t.Run("none answers", func(t *testing.T) {
		_, resp := connect(t, deadAddr)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("CONNECT to a dead notary: %s", resp.Status)
		}
	})
}
