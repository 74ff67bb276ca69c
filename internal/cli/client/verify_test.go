package client

import (
	"encoding/json"
	"encoding/pem"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/verifytest"
)

var updateVerifyFixtures = flag.Bool("update-verify-fixtures", false, "rewrite testdata/verify (certificates valid until 2036)")

// verifyDir holds the fixtures: a root, an intermediate and leaves for
// www.example.test valid until 2036 (expired.pem's leaf expired in 2021),
// an unrelated root, and a scan file.
const verifyDir = "testdata/verify"

// verifyAt is inside every fixture's validity but expired.pem's.
const verifyAt = "2027-06-01T00:00:00Z"

func vpath(name string) string { return filepath.Join(verifyDir, name) }

// TestVerifyFixtures rewrites the fixtures when asked
// (go test ./internal/cli -run TestVerifyFixtures -update-verify-fixtures).
func TestVerifyFixtures(t *testing.T) {
	if !*updateVerifyFixtures {
		t.Skip("without -update-verify-fixtures the committed fixtures are used")
	}
	root, err := testbed.NewRootCA("pkie verify test root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("pkie verify test intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testbed.NewRootCA("pkie verify unrelated root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	good, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(ders ...[]byte) []byte {
		var b []byte
		for _, d := range ders {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
		}
		return b
	}
	recs := []scan.Record{
		{Rank: 1, Domain: "www.example.test", IP: "192.0.2.1", Port: 443, Time: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC), Vantage: "test", Chain: good.Chain},
		{Rank: 2, Domain: "down.example.test", IP: "192.0.2.2", Port: 443, Time: time.Date(2027, 3, 1, 12, 0, 1, 0, time.UTC), Vantage: "test", Error: "connect: connection refused"},
		{Rank: 3, Domain: "old.example.test", IP: "192.0.2.3", Port: 443, Time: time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC), Vantage: "test", Chain: expired.Chain},
	}
	var sc []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sc = append(append(sc, b...), '\n')
	}
	files := map[string][]byte{
		"root.pem":         root.PEM(),
		"other-root.pem":   other.PEM(),
		"chain.pem":        pemOf(good.Chain...),
		"expired.pem":      pemOf(expired.Chain...),
		"leaf.der":         good.Chain[0],
		"intermediate.der": good.Chain[1],
		"scan.jsonl":       sc,
	}
	if err := os.MkdirAll(verifyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(vpath(name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// verifierArgs returns --verifier-dir for the helpers tests use and the
// back ends expected to run: the Go ones always, a helper when it is
// built. With PKIE_REQUIRE_VERIFIERS=1 a missing helper fails the test.
func verifierArgs(t *testing.T) ([]string, []string) {
	t.Helper()
	dirs := verifytest.Dirs()
	want := []string{"go", "go-parallel"}
	for _, n := range []string{"openssl", "webpki"} {
		if _, err := verify.FindHelper(n, dirs); err != nil {
			if os.Getenv("PKIE_REQUIRE_VERIFIERS") == "1" {
				t.Fatalf("back end %s: %v", n, err)
			}
			t.Logf("back end %s not expected: %v", n, err)
			continue
		}
		want = append(want, n)
	}
	return []string{"--verifier-dir", strings.Join(dirs, string(filepath.ListSeparator))}, want
}

// verifyJSON runs pkie verify --json and decodes the report.
func verifyJSON(t *testing.T, args ...string) (int, verifyReport, string) {
	t.Helper()
	code, out, errs := runCLI(t, append([]string{"verify", "--json"}, args...)...)
	var rep verifyReport
	if code != ExitUsage || out != "" {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("verify --json %v: exit %d: %v\nstdout: %s\nstderr: %s", args, code, err, out, errs)
		}
	}
	return code, rep, errs
}

// checkOutcomes asserts that exactly the back ends want gave a verdict,
// each with code.
func checkOutcomes(t *testing.T, rep verifyReport, want []string, code verify.Code) {
	t.Helper()
	var got []string
	for _, o := range rep.Backends {
		got = append(got, o.Name)
		if o.Result == nil {
			t.Errorf("%s: no verdict: %s", o.Name, o.Error)
			continue
		}
		if o.Result.Code != code || o.Result.Valid != (code == verify.OK) {
			t.Errorf("%s: valid=%v code %s (%s), want %s", o.Name, o.Result.Valid, o.Result.Code, o.Result.Reason, code)
		}
		if o.Library == "" {
			t.Errorf("%s: no library named", o.Name)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("back ends %v, want %v", got, want)
	}
}

func TestVerifyChains(t *testing.T) {
	dirArg, want := verifierArgs(t)
	root := []string{"--roots", vpath("root.pem"), "--time", verifyAt}
	for _, tc := range []struct {
		name  string
		args  []string
		exit  int
		code  verify.Code
		host  string
		depth int
	}{
		{"pem chain", append(root, "--host", "www.example.test", vpath("chain.pem")), ExitOK, verify.OK, "www.example.test", 3},
		{"no host", append(root, vpath("chain.pem")), ExitOK, verify.OK, "", 3},
		{"der files in order", append(root, "--host", "www.example.test", vpath("leaf.der"), vpath("intermediate.der")), ExitOK, verify.OK, "www.example.test", 3},
		{"expired", append(root, "--host", "www.example.test", vpath("expired.pem")), ExitNegative, verify.Expired, "www.example.test", 0},
		{"wrong host", append(root, "--host", "mail.example.test", vpath("chain.pem")), ExitNegative, verify.NameMismatch, "mail.example.test", 0},
		{"unknown root", []string{"--roots", vpath("other-root.pem"), "--time", verifyAt, "--host", "www.example.test", vpath("chain.pem")}, ExitNegative, verify.UnknownIssuer, "www.example.test", 0},
		{"missing intermediate", append(root, "--host", "www.example.test", vpath("leaf.der")), ExitNegative, verify.UnknownIssuer, "www.example.test", 0},
		{"client purpose", append(root, "--purpose", "client", vpath("chain.pem")), ExitNegative, verify.BadUsage, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rep, errs := verifyJSON(t, append(dirArg, tc.args...)...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.exit, errs)
			}
			checkOutcomes(t, rep, want, tc.code)
			if rep.Host != tc.host {
				t.Errorf("host %q, want %q", rep.Host, tc.host)
			}
			if !rep.Agree {
				t.Errorf("back ends disagree: %s", rep.Summary)
			}
			if rep.Input.Kind != "files" || rep.TimeSource != "flag" || rep.Time.Format(time.RFC3339) != verifyAt {
				t.Errorf("input %+v, time %v (%s)", rep.Input, rep.Time, rep.TimeSource)
			}
			for _, o := range rep.Backends {
				if o.Result == nil {
					continue
				}
				if o.Result.Depth != tc.depth {
					t.Errorf("%s: depth %d, want %d", o.Name, o.Result.Depth, tc.depth)
				}
				if o.Result.Phases.Verify <= 0 || o.Result.RoundTrip < o.Result.Phases.Total() {
					t.Errorf("%s: phases %+v, round trip %v", o.Name, o.Result.Phases, o.Result.RoundTrip)
				}
				if (o.Result.Phases.Parallel > 0) != (o.Name == "go-parallel") {
					t.Errorf("%s: parallel phase %v", o.Name, o.Result.Phases.Parallel)
				}
				if tc.code == verify.OK && (o.Result.Phases.Hostname > 0) != (tc.host != "") {
					t.Errorf("%s: hostname phase %v with host %q", o.Name, o.Result.Phases.Hostname, tc.host)
				}
			}
		})
	}
}

// TestVerifyText checks the output for people: a block per back end with
// its verdict, code and phase table, and the summary.
func TestVerifyText(t *testing.T) {
	dirArg, want := verifierArgs(t)
	code, out, errs := runCLI(t, append(append([]string{"verify"}, dirArg...), "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{
		"input      " + vpath("chain.pem") + ": 2 certificates",
		"leaf       CN=www.example.test",
		"roots      1 from PEM file " + vpath("root.pem"),
		"host       none: the hostname is not checked",
		"time       " + verifyAt + " (flag)",
		"purpose    server",
		"\ngo (crypto/x509 go",
		"\ngo-parallel (crypto/x509 go",
		"  parallel ",
		"  hostname        0.000   not checked",
		"\nagree: all " + strconv.Itoa(len(want)) + " back ends say ok\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if n := strings.Count(out, "  verdict    valid\n  code       ok\n"); n != len(want) {
		t.Errorf("%d back ends say valid/ok, want %d:\n%s", n, len(want), out)
	}
	for _, ph := range []string{"roots", "chain", "verify", "hostname", "total", "round trip"} {
		if n := strings.Count(out, "\n  "+ph+" "); n != len(want) {
			t.Errorf("phase %s in %d tables, want %d", ph, n, len(want))
		}
	}
	if n := strings.Count(out, "\n  parallel "); n != 1 {
		t.Errorf("parallel phase in %d tables, want 1 (go-parallel's)", n)
	}
	code, out, _ = runCLI(t, append(append([]string{"verify"}, dirArg...), "--roots", vpath("root.pem"), "--time", verifyAt, "--host", "www.example.test", vpath("expired.pem"))...)
	if code != ExitNegative || !strings.Contains(out, "  verdict    invalid\n  code       expired\n") || !strings.Contains(out, "not reached: the path failed") {
		t.Errorf("expired: exit %d:\n%s", code, out)
	}
}

func TestVerifyScan(t *testing.T) {
	dirArg, want := verifierArgs(t)
	sc := []string{"--roots", vpath("root.pem"), "--scan", vpath("scan.jsonl")}
	for _, tc := range []struct {
		name string
		args []string
		exit int
		code verify.Code
		host string
		at   string
	}{
		{"domain is the host", []string{"--domain", "www.example.test", "--time", verifyAt}, ExitOK, verify.OK, "www.example.test", verifyAt},
		{"case and final dot", []string{"--domain", "WWW.Example.TEST.", "--time", verifyAt}, ExitOK, verify.OK, "www.example.test", verifyAt},
		{"host flag wins", []string{"--domain", "www.example.test", "--host", "other.example.test", "--time", verifyAt}, ExitNegative, verify.NameMismatch, "other.example.test", verifyAt},
		{"record time", []string{"--domain", "www.example.test", "--time", "record"}, ExitOK, verify.OK, "www.example.test", "2027-03-01T12:00:00Z"},
		{"expired now", []string{"--domain", "old.example.test", "--host", "www.example.test"}, ExitNegative, verify.Expired, "www.example.test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rep, errs := verifyJSON(t, append(append(dirArg, sc...), tc.args...)...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.exit, errs)
			}
			checkOutcomes(t, rep, want, tc.code)
			if rep.Host != tc.host || rep.Input.Kind != "scan" || rep.Input.Certificates != 2 || rep.Input.Records != 1 {
				t.Errorf("host %q, input %+v", rep.Host, rep.Input)
			}
			if tc.at != "" && rep.Time.Format(time.RFC3339) != tc.at {
				t.Errorf("time %v, want %s", rep.Time, tc.at)
			}
			if tc.at == "" && (rep.TimeSource != "now" || time.Since(rep.Time) > time.Hour) {
				t.Errorf("time %v (%s), want now", rep.Time, rep.TimeSource)
			}
		})
	}
	for _, tc := range []struct{ domain, want string }{
		{"down.example.test", "scanned without a chain: connect: connection refused"},
		{"absent.example.test", "no record for absent.example.test among 3"},
	} {
		code, _, errs := runCLI(t, append(append([]string{"verify"}, sc...), "--domain", tc.domain)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("--domain %s: exit %d, stderr %q; want 2 and %q", tc.domain, code, errs, tc.want)
		}
	}
}

// TestVerifyConnect takes the chain from a TLS site on loopback placed at
// a distance by a delay proxy, and reports the connection's timings beside
// the verification.
func TestVerifyConnect(t *testing.T) {
	dirArg, want := verifierArgs(t)
	root, err := testbed.NewRootCA("connect root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("connect intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"site.test", "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("site.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	const rtt = 40 * time.Millisecond
	proxy, err := testbed.StartDelayProxy(site.Addr.String(), rtt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	rootFile := filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(rootFile, root.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		exit       int
		code       verify.Code
		host, sni  string
		throughRTT bool
	}{
		{"host from the flag", []string{"--connect", proxy.Addr.String(), "--host", "site.test"}, ExitOK, verify.OK, "site.test", "site.test", true},
		{"ip literal is the host", []string{"--connect", site.Addr.String()}, ExitOK, verify.OK, "127.0.0.1", "", false},
		{"wrong host", []string{"--connect", site.Addr.String(), "--host", "other.test"}, ExitNegative, verify.NameMismatch, "other.test", "other.test", false},
		// localhost may resolve to ::1 first, where nothing listens:
		// the next address is tried.
		{"name resolved", []string{"--connect", "localhost:" + strconv.Itoa(int(site.Addr.Port()))}, ExitOK, verify.OK, "localhost", "localhost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "name resolved" {
				if addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip4", "localhost"); err != nil || len(addrs) == 0 || !addrs[0].IsLoopback() {
					t.Skipf("localhost does not resolve to IPv4 loopback here: %v %v", addrs, err)
				}
			}
			code, rep, errs := verifyJSON(t, append(append(dirArg, "--roots", rootFile), tc.args...)...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.exit, errs)
			}
			checkOutcomes(t, rep, want, tc.code)
			c := rep.Connection
			if c == nil {
				t.Fatal("no connection timings")
			}
			if rep.Host != tc.host || c.ServerName != tc.sni || rep.Input.Kind != "connect" || rep.Input.Certificates != 2 {
				t.Errorf("host %q, sni %q, input %+v", rep.Host, c.ServerName, rep.Input)
			}
			if (c.DNS > 0) != (tc.name == "name resolved") {
				t.Errorf("dns %v", c.DNS)
			}
			if c.Connect <= 0 || c.Handshake <= 0 || c.Total != c.DNS+c.Connect+c.Handshake || c.TLSVersion == "" {
				t.Errorf("connection %+v", c)
			}
			// A TLS handshake needs at least one round trip through
			// the proxy: a lower bound, which load cannot break.
			if tc.throughRTT && c.Handshake < rtt {
				t.Errorf("handshake %v through a proxy adding %v", c.Handshake, rtt)
			}
		})
	}
	code, out, errs := runCLI(t, append(append([]string{"verify"}, dirArg...), "--roots", rootFile, "--connect", site.Addr.String(), "--host", "site.test")...)
	if code != ExitOK || !strings.Contains(out, "connection "+site.Addr.String()+", TLS 1.3, SNI site.test: dns 0.000 µs, tcp connect ") || !strings.Contains(out, " µs, tls handshake ") {
		t.Errorf("exit %d, stderr %s:\n%s", code, errs, out)
	}
	// A server that never answers the handshake: --connect-timeout ends
	// the wait, an operational error.
	silent, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	code, _, errs = runCLI(t, "verify", "--roots", rootFile, "--connect", silent.Addr.String(), "--connect-timeout", "300ms")
	if code != ExitUsage || !strings.Contains(errs, "TLS handshake") || !strings.Contains(errs, "deadline exceeded") {
		t.Errorf("silent server: exit %d, stderr %s", code, errs)
	}
	// Nothing listens: an operational error, named.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, errs = runCLI(t, "verify", "--roots", rootFile, "--connect", closed)
	if code != ExitUsage || !strings.Contains(errs, "--connect "+closed) || !strings.Contains(errs, "refused") {
		t.Errorf("closed port: exit %d, stderr %s", code, errs)
	}
}

func TestVerifyRepeat(t *testing.T) {
	dirArg, want := verifierArgs(t)
	code, rep, errs := verifyJSON(t, append(dirArg, "--repeat", "20", "--roots", vpath("root.pem"), "--time", verifyAt, "--host", "www.example.test", vpath("chain.pem"))...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkOutcomes(t, rep, want, verify.OK)
	if rep.Repeat != 20 {
		t.Errorf("repeat %d", rep.Repeat)
	}
	for _, o := range rep.Backends {
		st := o.Stats
		if st == nil {
			t.Errorf("%s: no stats", o.Name)
			continue
		}
		if st.Total.N != 20 || (o.Name == "go-parallel") != (st.Parallel != nil) {
			t.Errorf("%s: %d runs, parallel phase %v", o.Name, st.Total.N, st.Parallel)
		}
		for name, p := range map[string]verify.Summary{"verify": st.Verify, "total": st.Total, "round trip": st.RoundTrip, "roots": st.Roots} {
			if p.Min <= 0 || p.Min > p.P50 || p.P50 > p.P99 || p.P99 > p.Max || p.Mean < p.Min || p.Mean > p.Max {
				t.Errorf("%s %s: %+v", o.Name, name, p)
			}
		}
	}
	code, out, _ := runCLI(t, append(append([]string{"verify"}, dirArg...), "--repeat", "20", "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))...)
	if code != ExitOK || strings.Count(out, "  phase            mean        p50        p99   (µs, 20 runs)\n") != len(want) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestVerifyMissingHelpers: without the helpers, the Go back ends still
// run and stderr names the missing ones.
func TestVerifyMissingHelpers(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	code, out, errs := runCLI(t, "verify", "--verifier-dir", empty, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, n := range []string{"openssl", "webpki"} {
		if !strings.Contains(errs, "pkie verify: "+n+": not built: no pkie-verify-"+n+" in "+empty) {
			t.Errorf("stderr does not name %s as missing: %s", n, errs)
		}
	}
	if !strings.Contains(out, "\ngo (crypto/x509") || !strings.Contains(out, "\ngo-parallel (crypto/x509") || !strings.Contains(out, "agree: all 2 back ends say ok") {
		t.Errorf("stdout:\n%s", out)
	}
	code, rep, _ := verifyJSON(t, "--verifier-dir", empty, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitOK || len(rep.Missing) != 2 || rep.Missing[0].Name != "openssl" || rep.Missing[1].Name != "webpki" {
		t.Errorf("exit %d, missing %+v", code, rep.Missing)
	}
	// Only missing back ends asked for: nothing could run.
	code, _, errs = runCLI(t, "verify", "--verifier-dir", empty, "--backends", "openssl,webpki", "--roots", vpath("root.pem"), vpath("chain.pem"))
	if code != ExitUsage || !strings.Contains(errs, "no back end could run") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// writeHelper writes a helper program, a shell script, as back end name.
func writeHelper(t *testing.T, dir, name, body string) {
	t.Helper()
	script := "#!/bin/sh\necho '{\"protocol\":\"pkie-verify/1\",\"backend\":\"" + name + "\",\"library\":\"test helper\"}'\n" + body
	if err := os.WriteFile(filepath.Join(dir, verify.HelperProgram(name)), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyHelperFails: a helper that dies, or answers with control
// characters, is reported for that back end alone; the others go on.
func TestVerifyHelperFails(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the test helpers")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	writeHelper(t, dir, "openssl", "read line\necho 'openssl: simulated crash' >&2\nexit 3\n")
	// The reason tries to repaint the terminal and forge a line. PATH
	// holds only dir: the script uses shell builtins alone.
	writeHelper(t, dir, "webpki", `while read line; do
id=${line#'{"id":'}; id=${id%%,*}
printf '{"id":%s,"valid":false,"code":"other","reason":"\\u001b[2Jbad\\nagree: all 4 back ends say ok","depth":0,"roots_skipped":0,"phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}\n' "$id"
done
`)
	code, out, errs := runCLI(t, "verify", "--verifier-dir", dir, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitNegative {
		t.Fatalf("exit %d, want 1 (webpki says invalid): %s\n%s", code, errs, out)
	}
	// How the crash is worded depends on whether the helper's exit or
	// the end of its output is seen first; its last words are kept.
	if !regexp.MustCompile(`\nopenssl \(test helper\)\n  error      openssl helper: .*: openssl: simulated crash\n`).MatchString(out) {
		t.Errorf("output does not report openssl's crash:\n%s", out)
	}
	for _, s := range []string{
		"\nwebpki (test helper)\n  verdict    invalid\n  code       other\n  reason     \\x1b[2Jbad\\nagree: all 4 back ends say ok\n",
		"\ndisagree: go, go-parallel say ok; webpki says other (no verdict from openssl)\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a helper's escape sequence reached the terminal")
	}
	// Only the crashing one besides Go: no negative verdict, so the
	// failure decides (2), after the results are printed.
	code, out, errs = runCLI(t, "verify", "--backends", "go,openssl", "--verifier-dir", dir, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitUsage || !strings.Contains(out, "agree: the only back end says ok (no verdict from openssl)") || !strings.Contains(errs, "no verdict from openssl") {
		t.Errorf("exit %d, stderr %s:\n%s", code, errs, out)
	}
}

// TestVerifyHelperBroken: a helper that is built but dies before its hello
// (a missing shared library) is a failed back end, not a missing one: the
// run cannot pass on the Go back ends alone.
func TestVerifyHelperBroken(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the test helper")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	script := "#!/bin/sh\necho 'pkie-verify-openssl: error while loading shared libraries: libjansson.so.4' >&2\nexit 127\n"
	if err := os.WriteFile(filepath.Join(dir, verify.HelperProgram("openssl")), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "verify", "--backends", "go,openssl", "--verifier-dir", dir, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitUsage || !strings.Contains(errs, "libjansson.so.4") || !strings.Contains(out, "no verdict from openssl") {
		t.Errorf("exit %d (want 2), stderr %s:\n%s", code, errs, out)
	}
	// A file that is neither PEM nor DER is a usage error, not a verdict.
	junk := filepath.Join(t.TempDir(), "scan.jsonl")
	os.WriteFile(junk, []byte(`{"domain":"a.test"}`), 0o644)
	code, _, errs = runCLI(t, "verify", "--backends", "go", "--roots", vpath("root.pem"), junk)
	if code != ExitUsage || !strings.Contains(errs, "neither PEM nor DER") {
		t.Errorf("junk input: exit %d, stderr %s", code, errs)
	}
}

// TestVerifyVerdictChanges: a back end whose verdict changes from one run
// to the next gives no verdict at all.
func TestVerifyVerdictChanges(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the test helper")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	writeHelper(t, dir, "webpki", `n=0
while read line; do
id=${line#'{"id":'}; id=${id%%,*}; n=$((n+1))
if [ $n -eq 1 ]; then
printf '{"id":%s,"valid":true,"code":"ok","reason":"","depth":3,"roots_skipped":0,"phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}\n' "$id"
else
printf '{"id":%s,"valid":false,"code":"expired","reason":"","depth":0,"roots_skipped":0,"phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}\n' "$id"
fi
done
`)
	code, out, errs := runCLI(t, "verify", "--repeat", "3", "--backends", "go,webpki", "--verifier-dir", dir, "--roots", vpath("root.pem"), "--time", verifyAt, vpath("chain.pem"))
	if code != ExitUsage || !strings.Contains(out, "\nwebpki (test helper)\n  error      run 1 of 3 says expired where the first said ok\n") ||
		!strings.Contains(out, "agree: the only back end says ok (no verdict from webpki)") || !strings.Contains(errs, "no verdict from webpki") {
		t.Errorf("exit %d, stderr %s:\n%s", code, errs, out)
	}
}

func TestVerifyUsage(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(notPEM, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chain := vpath("chain.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "exactly one way"},
		{[]string{chain, "--connect", "127.0.0.1:1"}, "exactly one way"},
		{[]string{"--scan", vpath("scan.jsonl")}, "--scan and --domain go together"},
		{[]string{"--domain", "x", chain}, "--scan and --domain go together"},
		{[]string{"--repeat", "0", chain}, "--repeat must be from 1 to 1000000, got 0"},
		{[]string{"--repeat", "1000001", chain}, "--repeat must be from 1 to 1000000, got 1000001"},
		{[]string{"--purpose", "email", chain}, `--purpose "email"`},
		{[]string{"--backends", "go,nss", chain}, `unknown back end "nss"`},
		{[]string{"--backends", "go,go", chain}, "go named twice"},
		{[]string{"--time", "yesterday", chain}, "want RFC 3339"},
		{[]string{"--time", "record", chain}, "--time record needs --scan"},
		{[]string{"--helper-timeout", "-1s", chain}, "negative"},
		{[]string{"--roots", filepath.Join(t.TempDir(), "none.pem"), chain}, "--roots"},
		{[]string{filepath.Join(t.TempDir(), "none.pem")}, "no such file"},
		{[]string{notPEM}, "PEM without a CERTIFICATE block"},
		{[]string{"www.example.test"}, "for a server's chain: --connect HOST[:PORT]"},
		{[]string{"https://www.example.test/"}, "for a server's chain: --connect HOST[:PORT]"},
		{[]string{"--connect", "https://example.test/", "--roots", vpath("root.pem")}, "--connect"},
		{[]string{"--scan", chain, "--domain", "x"}, "not a pkie scan file"},
		{[]string{"--bogus", chain}, "--bogus"},
	} {
		code, out, errs := runCLI(t, append([]string{"verify"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 and %q", tc.args, code, errs, out, tc.want)
		}
	}
}

// TestVerifyConclude: the summary line and exit status for every mix of
// verdicts and failures.
func TestVerifyConclude(t *testing.T) {
	ok := &verify.Result{Valid: true, Code: verify.OK}
	res := func(c verify.Code) *verify.Result { return &verify.Result{Code: c} }
	for _, tc := range []struct {
		name  string
		outs  []verifyOutcome
		exit  int
		agree bool
		sum   string
	}{
		{"all ok", []verifyOutcome{{Name: "go", Result: ok}, {Name: "webpki", Result: ok}}, ExitOK, true, "agree: all 2 back ends say ok"},
		{"one", []verifyOutcome{{Name: "go", Result: res(verify.Expired)}}, ExitNegative, true, "agree: the only back end says expired"},
		{"invalid, codes differ", []verifyOutcome{{Name: "go", Result: res(verify.Expired)}, {Name: "openssl", Result: res(verify.Expired)}, {Name: "webpki", Result: res(verify.UnknownIssuer)}},
			ExitNegative, true, "agree on invalid, with different codes: go, openssl say expired; webpki says unknown_issuer"},
		{"disagree", []verifyOutcome{{Name: "go", Result: ok}, {Name: "webpki", Result: res(verify.NotCA)}}, ExitNegative, false, "disagree: go says ok; webpki says not_ca"},
		{"invalid and a failure", []verifyOutcome{{Name: "go", Result: res(verify.Expired)}, {Name: "openssl", Error: "crashed"}}, ExitNegative, true, "agree: the only back end says expired (no verdict from openssl)"},
		{"valid and a failure", []verifyOutcome{{Name: "go", Result: ok}, {Name: "openssl", Error: "crashed"}}, ExitUsage, true, "agree: the only back end says ok (no verdict from openssl)"},
		{"only failures", []verifyOutcome{{Name: "openssl", Error: "crashed"}}, ExitUsage, false, "no verdict from openssl"},
	} {
		rep := &verifyReport{Backends: tc.outs}
		if got := rep.conclude(); got != tc.exit || rep.Agree != tc.agree || rep.Summary != tc.sum {
			t.Errorf("%s: exit %d agree %v %q; want %d %v %q", tc.name, got, rep.Agree, rep.Summary, tc.exit, tc.agree, tc.sum)
		}
	}
}

// TestVerifyHandsCorpusOver: pkie verify with --corpus anywhere on the
// line is the corpus run, with its own flags and report.
func TestVerifyHandsCorpusOver(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "--corpus", "known", "--backends", "go", "--json"},
		{"verify", "--backends", "go", "--json", "--corpus=known"},
	} {
		code, out, errs := runCLI(t, args...)
		var rep struct {
			Corpora []string `json:"corpora"`
		}
		if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil || strings.Join(rep.Corpora, ",") != "known" {
			t.Errorf("%v: exit %d, stderr %s\n%s", args, code, errs, out)
		}
	}
}
