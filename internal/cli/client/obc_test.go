package client

import (
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/obc"
)

// obcTestSite starts a loopback TLS server for names that asks for a client
// certificate when ask is set and answers with the identity it saw ("-"
// for none); it returns the server's port and a PEM file of its root.
func obcTestSite(t *testing.T, ask bool, names ...string) (port string, cacert string) {
	t.Helper()
	ca, err := testbed.NewRootCA("obc cli root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: names})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.Write([]byte("-"))
			return
		}
		w.Write([]byte(obc.IdentityOf(r.TLS.PeerCertificates[0]).String()))
	}))
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}}
	if ask {
		cfg.ClientAuth = tls.RequireAnyClientCert
	}
	srv.TLS = cfg
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cacert = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(cacert, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port), cacert
}

// obcGetJSON runs "pkie obc get --json" with the body written to a file,
// and returns the result and the body (the identity the server saw).
func obcGetJSON(t *testing.T, args ...string) (obcGetResult, string) {
	t.Helper()
	body := filepath.Join(t.TempDir(), "body")
	code, out, errs := runCLI(t, append([]string{"obc", "get", "--json", "-o", body}, args...)...)
	if code != 0 {
		t.Fatalf("obc get %v: exit %d: %s", args, code, errs)
	}
	var r obcGetResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("obc get --json: %v\n%s", err, out)
	}
	b, err := os.ReadFile(body)
	if err != nil {
		t.Fatal(err)
	}
	return r, string(b)
}

// TestOBCGetListForget: a first get makes and presents a key, the server
// sees the identity printed; a second reuses it; list shows it; forget
// deletes it, says what it deleted, and refuses a second time; the next
// get is a new client.
func TestOBCGetListForget(t *testing.T) {
	port, cacert := obcTestSite(t, true, "site.test")
	store := filepath.Join(t.TempDir(), "cfg", "obc.db")
	url := "https://site.test:" + port + "/"
	scope := "https://site.test:" + port
	flags := []string{url, "--store", store, "--cacert", cacert, "--resolve", "site.test=127.0.0.1"}

	first, seen := obcGetJSON(t, flags...)
	if first.Status != 200 || !first.Presented || !first.Created || first.FromPool {
		t.Fatalf("first get: %+v, want 200, presented, created, not from the pool", first)
	}
	if first.Identity != seen || first.Scope != scope || first.Alg != "ecdsa-p256" || first.Mode != "strict" {
		t.Errorf("first get: identity %s scope %s alg %s mode %s; server saw %s, want scope %s", first.Identity, first.Scope, first.Alg, first.Mode, seen, scope)
	}
	if first.Timings.Key <= 0 || first.Timings.Cert <= 0 || first.Timings.TLS <= 0 || first.Timings.Total < first.Timings.FirstByte {
		t.Errorf("first get timings %+v: want key, cert and tls measured", first.Timings)
	}

	second, seen2 := obcGetJSON(t, flags...)
	if second.Created || second.Identity != first.Identity || seen2 != first.Identity || second.Timings.Key != 0 {
		t.Errorf("second get: created %v identity %s (server saw %s) key time %s; want the first's key %s reused", second.Created, second.Identity, seen2, second.Timings.Key, first.Identity)
	}

	code, out, errs := runCLI(t, "obc", "list", "--store", store, "--json")
	if code != 0 {
		t.Fatalf("list: %d %s", code, errs)
	}
	var recs []obcRecord
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Scope != scope || recs[0].Identity != first.Identity || recs[0].Alg != "ecdsa-p256" || recs[0].LastUsed.Before(recs[0].Created) {
		t.Errorf("list: %+v, want one record for %s with identity %s", recs, scope, first.Identity)
	}
	code, out, _ = runCLI(t, "obc", "list", "--store", store)
	if code != 0 || !strings.Contains(out, scope) || !strings.Contains(out, first.Identity) || !strings.Contains(out, "1 keys, strict mode") {
		t.Errorf("list (text): exit %d\n%s", code, out)
	}

	code, out, errs = runCLI(t, "obc", "forget", "--store", store, url[:len(url)-1])
	if code != 0 || !strings.Contains(out, "forgot "+scope) || !strings.Contains(out, first.Identity) {
		t.Errorf("forget: exit %d out %q err %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "obc", "forget", "--store", store, scope)
	if code != ExitNegative || !strings.Contains(errs, "no key for") {
		t.Errorf("second forget: exit %d err %q, want 1 and no key", code, errs)
	}
	third, seen3 := obcGetJSON(t, flags...)
	if !third.Created || third.Identity == first.Identity || seen3 != third.Identity {
		t.Errorf("get after forget: created %v identity %s (server saw %s), want a new key (old %s)", third.Created, third.Identity, seen3, first.Identity)
	}
	fi, err := os.Stat(store)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file: %v %v, want mode 0600", fi.Mode().Perm(), err)
	}
}

// TestOBCGetModes: legacy mode gives subdomains of one registrable domain
// one key, strict mode one each; a store keeps the mode it was made with.
func TestOBCGetModes(t *testing.T) {
	port, cacert := obcTestSite(t, true, "a.example.com", "b.example.com")
	for _, tc := range []struct {
		mode   string
		same   bool
		scopeA string
	}{
		{"legacy", true, "example.com"},
		{"strict", false, "https://a.example.com:" + port},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "obc.db")
			common := []string{"--store", store, "--mode", tc.mode, "--cacert", cacert, "--resolve", "a.example.com=127.0.0.1", "--resolve", "b.example.com=127.0.0.1"}
			a, seenA := obcGetJSON(t, append([]string{"https://a.example.com:" + port + "/"}, common...)...)
			b, seenB := obcGetJSON(t, append([]string{"https://b.example.com:" + port + "/"}, common...)...)
			if (seenA == seenB) != tc.same {
				t.Errorf("server saw %s and %s: same = %v, want %v", seenA, seenB, seenA == seenB, tc.same)
			}
			if a.Scope != tc.scopeA || !a.Created || b.Created == tc.same {
				t.Errorf("a: scope %s created %v; b: created %v", a.Scope, a.Created, b.Created)
			}
			other := map[string]string{"legacy": "strict", "strict": "legacy"}[tc.mode]
			code, _, errs := runCLI(t, "obc", "get", "https://a.example.com:"+port+"/", "--store", store, "--mode", other, "--cacert", cacert, "--resolve", "a.example.com=127.0.0.1")
			if code != ExitUsage || !strings.Contains(errs, "is in "+tc.mode+" mode") {
				t.Errorf("get --mode %s on a %s store: exit %d %q", other, tc.mode, code, errs)
			}
		})
	}
}

// TestOBCGetPoolAndAlgs: with --pool the first visit's key comes from the
// pool (no key time); every algorithm works end to end.
func TestOBCGetPoolAndAlgs(t *testing.T) {
	port, cacert := obcTestSite(t, true, "site.test")
	for _, tc := range []struct {
		alg  string
		pool string
	}{
		{"ecdsa-p256", "2"},
		{"ed25519", "0"},
		{"rsa-2048", "1"},
		{"rsa-1024", "0"},
	} {
		t.Run(tc.alg+" pool "+tc.pool, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "obc.db")
			r, seen := obcGetJSON(t, "https://site.test:"+port+"/", "--store", store, "--alg", tc.alg, "--pool", tc.pool, "--cacert", cacert, "--resolve", "site.test=127.0.0.1")
			pooled := tc.pool != "0"
			if !r.Created || r.FromPool != pooled || (r.Timings.Key == 0) == !pooled || r.Alg != tc.alg || seen != r.Identity {
				t.Errorf("%+v (server saw %s): want created, from pool %v, alg %s", r, seen, pooled, tc.alg)
			}
		})
	}
}

// TestOBCGetServerDoesNotAsk: a server that asks for no client
// certificate gets none, and no key is made for it.
func TestOBCGetServerDoesNotAsk(t *testing.T) {
	port, cacert := obcTestSite(t, false, "plain.test")
	store := filepath.Join(t.TempDir(), "obc.db")
	r, seen := obcGetJSON(t, "https://plain.test:"+port+"/", "--store", store, "--cacert", cacert, "--resolve", "plain.test=127.0.0.1")
	if r.Presented || r.Created || r.Identity != "" || seen != "-" {
		t.Errorf("%+v (server saw %s): want nothing presented", r, seen)
	}
	code, out, _ := runCLI(t, "obc", "list", "--store", store, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("list: exit %d %q, want no keys", code, out)
	}
	code, out, _ = runCLI(t, "obc", "get", "https://plain.test:"+port+"/", "--store", store, "--cacert", cacert, "--resolve", "plain.test=127.0.0.1")
	if code != 0 || !strings.Contains(out, "no client certificate presented") || !strings.HasPrefix(out, "-\n") {
		t.Errorf("get (text): exit %d %q", code, out)
	}
}

// TestOBCText: the text output says what was presented and the timings.
func TestOBCText(t *testing.T) {
	port, cacert := obcTestSite(t, true, "site.test")
	store := filepath.Join(t.TempDir(), "obc.db")
	args := []string{"obc", "get", "https://site.test:" + port + "/x", "--store", store, "--cacert", cacert, "--resolve", "site.test=127.0.0.1"}
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"200 OK", "(HTTP/2.0)", "scope     https://site.test:" + port + " (strict mode)", "created now, key generated during the handshake", "timings   key ", "first byte"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	id := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(out, "identity  "+id+" (ecdsa-p256)") {
		t.Errorf("output does not show the identity the server saw (%s):\n%s", id, out)
	}
	code, out, _ = runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "reused (made on an earlier visit)") {
		t.Errorf("second get: exit %d\n%s", code, out)
	}
}

// TestOBCGetDamagedRecord: a damaged key makes get fail with a message
// naming the scope, list shows the damage, and the record is left for
// the user to forget.
func TestOBCGetDamagedRecord(t *testing.T) {
	port, cacert := obcTestSite(t, true, "site.test")
	store := filepath.Join(t.TempDir(), "obc.db")
	flags := []string{"https://site.test:" + port + "/", "--store", store, "--cacert", cacert, "--resolve", "site.test=127.0.0.1"}
	obcGetJSON(t, flags...)
	db, err := sql.Open("sqlite", "file:"+store+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE keys SET key = x'3003020101'"); err != nil {
		t.Fatal(err)
	}
	scope := "https://site.test:" + port
	code, _, errs := runCLI(t, append([]string{"obc", "get"}, flags...)...)
	if code != ExitUsage || !strings.Contains(errs, "the record of "+scope+" is corrupted") {
		t.Errorf("get with a damaged key: exit %d %q, want 2 naming the scope", code, errs)
	}
	code, out, _ := runCLI(t, "obc", "list", "--store", store)
	if code != 0 || !strings.Contains(out, "corrupted: key:") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "obc", "forget", "--store", store, scope); code != 0 || !strings.Contains(out, "forgot "+scope) {
		t.Errorf("forget: exit %d %q", code, out)
	}
	if r, _ := obcGetJSON(t, flags...); !r.Created {
		t.Errorf("get after forget: %+v, want a new key", r)
	}
}
