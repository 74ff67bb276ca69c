package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/cli/client"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/internal/testbed"
)

// evilName is the name in evil.test's certificate: a server chooses it,
// and it is made to clear the user's screen and forge a verdict line when
// an error repeats it.
const evilName = "x\x1b[2J\x1b[H\r\nforged.test  TRUSTED\n"

// pecWorld is a CT log, a revocation authority, a cloud with the built-in
// provers and three sites, good.test (logged), revoked.test (logged and
// revoked) and evil.test (not logged, a certificate for evilName), with the files a user of pkie pec get and pkie check --cloud
// has: the cloud's bundle, the CA root, the TTPs' keys.
type pecWorld struct {
	bundle, roots, mirrorKey, logKey, revKey string
	port                                     map[string]string
}

func newPECWorld(t *testing.T) *pecWorld {
	t.Helper()
	ctx := context.Background()
	root, err := testbed.NewRootCA("PEC CLI Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("PEC CLI CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	w := &pecWorld{port: map[string]string{}}
	resolve := map[string]string{}
	var revoked *testbed.Leaf
	for _, name := range []string{"good.test", "revoked.test", "evil.test"} {
		dns := []string{name}
		if name == "evil.test" {
			dns = []string{evilName}
		}
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: dns})
		if err != nil {
			t.Fatal(err)
		}
		if name == "revoked.test" {
			revoked = leaf
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		_, w.port[name], _ = net.SplitHostPort(s.Addr.String())
		resolve[name] = "127.0.0.1"
		if name == "evil.test" {
			continue // never logged
		}
		if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := ttp.Revoke(ctx, ca, revoked.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := testbed.StartCloud(ctx, testbed.CloudOptions{TTPs: ttp, Notary: true, Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dir := t.TempDir()
	w.bundle, w.roots = filepath.Join(dir, "pec.bundle"), filepath.Join(dir, "roots.pem")
	b, err := json.Marshal(c.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.bundle, b, 0o644); err != nil {
		t.Fatal(err)
	}
	writePEM(t, w.roots, "CERTIFICATE", root.Cert.Raw)
	w.logKey, w.revKey = filepath.Join(dir, "log.pub"), filepath.Join(dir, "ra.pub")
	os.WriteFile(w.logKey, []byte(ttp.LogKey+"\n"), 0o644)
	w.mirrorKey = filepath.Join(dir, "mirror.pub")
	os.WriteFile(w.mirrorKey, []byte(ttp.MirrorKey+"\n"), 0o644)
	os.WriteFile(w.revKey, []byte(ttp.RevocationKey+"\n"), 0o644)
	return w
}

func (w *pecWorld) flags(extra ...string) []string {
	return append([]string{"--cloud", w.bundle, "--ct-key", "@" + w.mirrorKey, "--ct-log-key", "@" + w.logKey, "--revocation-key", "@" + w.revKey,
		"--roots", w.roots, "--allow-private", "--resolve", "good.test=127.0.0.1", "--resolve", "revoked.test=127.0.0.1", "--resolve", "evil.test=127.0.0.1"}, extra...)
}

func (w *pecWorld) url(site string) string { return "https://" + site + ":" + w.port[site] + "/" }

func TestPECGet(t *testing.T) {
	w := newPECWorld(t)

	code, out, errs := runCLI(t, append([]string{"pec", "get"}, w.flags(w.url("good.test"))...)...)
	if code != 0 {
		t.Fatalf("pec get good.test: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{w.url("good.test") + "  TRUSTED", "ca           pass     required", "ct           pass     required",
		"revocation   pass     required", "notary       pass     required", "timings  connect", "first proof", "last proof",
		"verification", "response", "HTTP/1.1 200 OK", "<h1>good.test</h1>"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// -o FILE takes the body; --json the rest.
	body := filepath.Join(t.TempDir(), "body.html")
	code, out, errs = runCLI(t, append([]string{"pec", "get"}, w.flags("--json", "-o", body, w.url("good.test"))...)...)
	if code != 0 {
		t.Fatalf("pec get --json: exit %d %s", code, errs)
	}
	var res struct {
		Verdict struct {
			Result  string `json:"verdict"`
			Sources []struct {
				Source, Status string
			} `json:"sources"`
		} `json:"verdict"`
		Timings map[string]int64 `json:"timings"`
		Status  int              `json:"status"`
		Body    int64            `json:"body_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	page, _ := os.ReadFile(body)
	if res.Verdict.Result != "trusted" || res.Status != 200 || res.Body != int64(len(page)) || !strings.Contains(string(page), "good.test") {
		t.Fatalf("json %+v, body %q", res, page)
	}
	if len(res.Verdict.Sources) != 4 {
		t.Errorf("sources %+v", res.Verdict.Sources)
	}
	for _, k := range []string{"handshake_ns", "first_proof_ns", "last_proof_ns", "verification_ns", "total_ns", "response_ns"} {
		if res.Timings[k] <= 0 {
			t.Errorf("timing %s = %d", k, res.Timings[k])
		}
	}

	// A revoked certificate: refused before the request, exit 1, the
	// verdict says why.
	code, out, errs = runCLI(t, append([]string{"pec", "get"}, w.flags(w.url("revoked.test"))...)...)
	if code != 1 || !strings.Contains(out, "UNTRUSTED") || !strings.Contains(out, "revoked") || strings.Contains(out, "HTTP/1.1") {
		t.Fatalf("pec get revoked.test: exit %d\n%s\n%s", code, out, errs)
	}
	// --require names what must pass; the rest is reported.
	code, out, _ = runCLI(t, append([]string{"pec", "get"}, w.flags("--require", "ca,ct,notary", w.url("revoked.test"))...)...)
	if code != 0 || !strings.Contains(out, "revocation   fail     reported") {
		t.Fatalf("pec get --require ca,ct,notary revoked.test: exit %d\n%s", code, out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pec", "get", "https://good.test/"}, "--cloud BUNDLE is required"},
		{[]string{"pec", "get", "--cloud", w.bundle, "http://good.test/"}, "not an https URL"},
		{[]string{"pec", "get", "--cloud", w.bundle, "--require", "ca,ct", "--roots", w.roots, w.url("good.test")}, `required source "ct" is not configured`},
		{[]string{"pec", "nope"}, "unknown subcommand"},
	} {
		if code, _, errs := runCLI(t, tt.args...); code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, errs, tt.want)
		}
	}
}

func TestCheckCloud(t *testing.T) {
	w := newPECWorld(t)
	base := (w.flags("--require", "ca,ct,revocation,notary", "--allow-private", "--no-cache", "--json"))
	for _, tt := range []struct {
		site   string
		code   int
		result string
		failed string
	}{
		{"good.test", 0, "trusted", ""},
		{"revoked.test", 1, "untrusted", "revocation"},
	} {
		code, out, errs := runCLI(t, append(append([]string{"check"}, base...), tt.site+":"+w.port[tt.site])...)
		if code != tt.code {
			t.Fatalf("check --cloud %s: exit %d\n%s\n%s", tt.site, code, out, errs)
		}
		var v struct {
			Result  string `json:"verdict"`
			Sources []struct {
				Source   string `json:"source"`
				Status   string `json:"status"`
				Detail   string `json:"detail"`
				Required bool   `json:"required"`
			} `json:"sources"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if v.Result != tt.result {
			t.Fatalf("%s: verdict %s", tt.site, out)
		}
		seen := map[string]bool{}
		for _, s := range v.Sources {
			seen[s.Source] = true
			want := "pass"
			if s.Source == tt.failed {
				want = "fail"
			}
			if s.Status != want || !s.Required {
				t.Errorf("%s: %s is %s (required %v), want %s: %s", tt.site, s.Source, s.Status, s.Required, want, s.Detail)
			}
			if s.Source == "ct" && !strings.Contains(s.Detail, "cloud") {
				t.Errorf("%s: ct detail does not say the proof came from the cloud: %s", tt.site, s.Detail)
			}
		}
		if len(seen) != 4 {
			t.Errorf("%s: sources %v", tt.site, seen)
		}
	}
	if code, _, errs := runCLI(t, append([]string{"check", "--ct-prover", "http://127.0.0.1:1"}, w.flags("good.test:"+w.port["good.test"])...)...); code != 2 || !strings.Contains(errs, "--cloud proves") {
		t.Errorf("--ct-prover with --cloud: exit %d %s", code, errs)
	}
}

// With no time to wait for the proofs, pkie pec get fails closed and names
// what is missing; with --warn it fetches and says so.
func TestPECGetDeadline(t *testing.T) {
	w := newPECWorld(t)
	code, out, errs := runCLI(t, append([]string{"pec", "get"}, w.flags("--proof-timeout", "1ns", w.url("good.test"))...)...)
	if code != 1 || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, "missing  no answer from the cloud for: ct, revocation, notary") || strings.Contains(out, "HTTP/1.1") {
		t.Fatalf("pec get with no time for proofs: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append([]string{"pec", "get"}, w.flags("--proof-timeout", "1ns", "--warn", w.url("good.test"))...)...)
	if code != client.ExitFetchedWithWarnings || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, "HTTP/1.1 200 OK") ||
		!strings.HasPrefix(errs, "pkie pec get: WARNING: the verdict is INCONCLUSIVE") {
		t.Fatalf("pec get --warn: exit %d\n%s\n%s", code, out, errs)
	}
	for _, name := range []string{"ct", "revocation", "notary"} {
		if !strings.Contains(errs, "missing "+name+" evidence (unknown): no answer from the cloud by the deadline") {
			t.Errorf("stderr does not say %s was missing at the deadline:\n%s", name, errs)
		}
	}
}

// A cloud that withholds evidence (here one that hosts only the notary:
// asked for ct and revocation proofs, it gives none) lets pkie pec get
// --warn fetch a revoked site. That fetch must not pass for a clean one:
// standard error leads with a warning naming each missing enhancement and
// why, the text output and --json say so, and the exit status is 3.
// Without --warn nothing is fetched.
func TestPECGetWarnWithholdingCloud(t *testing.T) {
	w := newPECWorld(t)
	c, err := testbed.StartCloud(context.Background(), testbed.CloudOptions{Name: "withholding.test", Notary: true,
		Resolve: map[string]string{"revoked.test": "127.0.0.1:" + w.port["revoked.test"]}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := json.Marshal(c.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "withholding.bundle")
	if err := os.WriteFile(bundle, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"pec", "get", "--cloud", bundle, "--ct-key", "@" + w.mirrorKey, "--ct-log-key", "@" + w.logKey, "--revocation-key", "@" + w.revKey,
			"--roots", w.roots, "--allow-private", "--resolve", "revoked.test=127.0.0.1"}, append(extra, w.url("revoked.test"))...)
	}

	code, out, errs := runCLI(t, args()...)
	if code != ExitNegative || strings.Contains(out, "HTTP/1.1") {
		t.Fatalf("without --warn: exit %d\n%s\n%s", code, out, errs)
	}

	code, out, errs = runCLI(t, args("--warn")...)
	if code != client.ExitFetchedWithWarnings {
		t.Errorf("--warn: exit %d, want %d\n%s\n%s", code, client.ExitFetchedWithWarnings, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "pkie pec get: WARNING: the verdict is INCONCLUSIVE, not trusted: fetched anyway because of --warn") {
		t.Errorf("stderr does not lead with the warning:\n%s", errs)
	}
	for _, name := range []string{"ct", "revocation"} {
		if !strings.Contains(errs, "WARNING: missing "+name+" evidence (unknown): ") || !strings.Contains(errs, "does not host enhancement "+name) {
			t.Errorf("stderr does not name the missing %s evidence and why:\n%s", name, errs)
		}
	}
	if last := lines[len(lines)-1]; last != "pkie pec get: WARNING: fetched WITHOUT the required evidence (ct, revocation); exit status 3" {
		t.Errorf("last stderr line %q", last)
	}
	if !strings.Contains(out, "WARNING  fetched anyway because of --warn, WITHOUT the required evidence (ct, revocation)") ||
		!strings.Contains(out, "HTTP/1.1 200 OK") || !strings.Contains(out, "<h1>revoked.test</h1>") {
		t.Errorf("stdout:\n%s", out)
	}

	code, out, errs = runCLI(t, args("--warn", "--json")...)
	var res struct {
		Verdict struct {
			Result string `json:"verdict"`
		} `json:"verdict"`
		Warnings   []string `json:"warnings"`
		ExitStatus int      `json:"exit_status"`
		Status     int      `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != client.ExitFetchedWithWarnings || res.ExitStatus != client.ExitFetchedWithWarnings || res.Status != 200 || res.Verdict.Result != "inconclusive" ||
		len(res.Warnings) != 3 || !strings.Contains(res.Warnings[2], "missing revocation evidence") {
		t.Errorf("--json: exit %d, %+v\n%s", code, res, errs)
	}
}

// countingCloud is a PEC cloud that is not one: a pair of sockets behind a
// bundle that count what arrives. reached returns the count since its
// last call.
func countingCloud(t *testing.T) (bundle string, reached func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
	}()
	b, err := json.Marshal(pecwire.Bundle{Version: 1, Name: "counting", Points: []pecwire.Point{{QUIC: pc.LocalAddr().String(), TCP: ln.Addr().String()}},
		SPKISHA256: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	bundle = filepath.Join(t.TempDir(), "counting.bundle")
	if err := os.WriteFile(bundle, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle, func() int {
		mu.Lock()
		defer mu.Unlock()
		r := n
		n = 0
		return r
	}
}

// pkie pec get checks what it can without the network (the pinned keys,
// --require) before it reaches the cloud: the cloud here counts what
// arrives, and nothing may.
func TestPECGetValidatesBeforeNetwork(t *testing.T) {
	bundle, reached := countingCloud(t)
	_, key, err := checkpoint.GenerateKey("mirror.test")
	if err != nil {
		t.Fatal(err)
	}
	lkey := testLogKey(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad ct key", []string{"--ct-key", "not a key", "--ct-log-key", lkey}, "--ct-key: "},
		{"missing ct key file", []string{"--ct-key", "@/nonexistent/log.pub", "--ct-log-key", lkey}, "--ct-key: "},
		{"require unconfigured", []string{"--revocation-key", key, "--require", "ca,ct"}, `required source "ct" is not configured (have ca, revocation)`},
		{"require not built in", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct,my-pkie"}, `--require: enhancement my-pkie: this pkie binary was not built with it (built in: ct, revocation, notary)`},
		{"require by identifier not built in", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct,0xff10"}, `enhancement 0xff10: this pkie binary was not built with it`},
		{"require built in, not configured", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct,notary"}, `required source "notary" is not configured (have ca, ct)`},
		{"require only ca", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ca"}, "--require names no enhancement"},
		{"no enhancement", nil, "no enhancement to check"},
		{"loopback site", []string{"--ct-key", key, "--ct-log-key", lkey, "--resolve", "site.test=127.0.0.1"}, "site.test is 127.0.0.1 (Loopback), which pkie pec get refuses to connect to without --allow-private"},
		{"private IP literal", []string{"--ct-key", key, "--ct-log-key", lkey, "--url", "https://10.1.2.3/"}, "10.1.2.3 is 10.1.2.3 (Private-Use)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := "https://site.test/"
			args := []string{"pec", "get", "--cloud", bundle, "--transport", "tcp", "--max-time", "20s"}
			for i := 0; i < len(tt.args); i++ {
				if tt.args[i] == "--url" {
					url = tt.args[i+1]
					i++
					continue
				}
				args = append(args, tt.args[i])
			}
			code, out, errs := runCLI(t, append(args, url)...)
			n := reached()
			if code != ExitUsage || out != "" || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, tt.want)
			}
			if n != 0 {
				t.Errorf("the cloud was reached %d times before the usage error", n)
			}
		})
	}
}

// pkie check --cloud, like pkie pec get, refuses what the flags and files
// get wrong before it reaches the cloud. Before, it dialled the cloud
// first and only then read the pinned keys and --require.
func TestCheckCloudValidatesBeforeNetwork(t *testing.T) {
	bundle, reached := countingCloud(t)
	_, key, err := checkpoint.GenerateKey("mirror.test")
	if err != nil {
		t.Fatal(err)
	}
	lkey := testLogKey(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad ct key", []string{"--ct-key", "not a key", "--ct-log-key", lkey, "--require", "ct"}, "--ct-key: "},
		{"missing revocation key file", []string{"--revocation-key", "@/nonexistent/rev.pub", "--require", "revocation"}, "--revocation-key: "},
		{"require unconfigured", []string{"--revocation-key", key, "--require", "ct"}, `required source "ct" is not configured (have ca, revocation)`},
		{"require not built in", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct,my-pkie"}, "enhancement my-pkie: this pkie binary was not built with it"},
		{"no enhancement required", []string{"--ct-key", key, "--ct-log-key", lkey}, "no notaries configured, and no enhancement required in their place"},
		{"fingerprint with ip", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct", "--fingerprint", strings.Repeat("ab", 32), "--ip", "192.0.2.1"}, "--ip does not apply"},
		{"bad ip", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct", "--ip", "not-an-ip"}, `--ip "not-an-ip" is not an IP address`},
		{"bad transport", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct", "--transport", "udp"}, `--transport "udp": want auto, quic or tcp`},
		{"bad proof timeout", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct", "--proof-timeout", "0s"}, "--proof-timeout must be positive"},
		{"missing forwarder", []string{"--ct-key", key, "--ct-log-key", lkey, "--require", "ct", "--forwarder", "/nonexistent/fw.bundle"}, "--forwarder: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"check", "--cloud", bundle, "--transport", "tcp", "--no-cache",
				"--notaries", t.TempDir()}, tt.args...)
			code, out, errs := runCLI(t, append(args, "site.test:443")...)
			n := reached()
			if code != ExitUsage || out != "" || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, tt.want)
			}
			if n != 0 {
				t.Errorf("the cloud was reached %d times before the usage error", n)
			}
		})
	}
}

// Without --allow-private, pkie pec get refuses a site on a non-public
// address as pkie check does: one mapped by --resolve before any I/O
// (TestPECGetValidatesBeforeNetwork), one found by DNS when dialled.
func TestPECGetRefusesLoopback(t *testing.T) {
	w := newPECWorld(t)
	code, out, errs := runCLI(t, "pec", "get", "--cloud", w.bundle, "--ct-key", "@"+w.mirrorKey, "--ct-log-key", "@"+w.logKey, "--revocation-key", "@"+w.revKey,
		"--roots", w.roots, "https://localhost:"+w.port["good.test"]+"/")
	if code != ExitUsage || strings.Contains(out, "HTTP/1.1") || !strings.Contains(errs, "address is not public (Loopback): refusing to connect") ||
		!strings.Contains(errs, "--allow-private allows it") {
		t.Fatalf("localhost without --allow-private: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "pec", "get", "--cloud", w.bundle, "--ct-key", "@"+w.mirrorKey, "--ct-log-key", "@"+w.logKey, "--revocation-key", "@"+w.revKey,
		"--roots", w.roots, "--resolve", "good.test=127.0.0.1", w.url("good.test"))
	if code != ExitUsage || out != "" || !strings.Contains(errs, "without --allow-private") {
		t.Fatalf("good.test mapped to loopback without --allow-private: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestPECGetCloudUnreachable: when no point of presence answers, pkie pec
// get says so on one line (each point's failure joined into it) and exits
// 2, the operational-error status; pkie check --cloud does the same.
// What the bundle's operator named it is shown escaped.
func TestPECGetCloudUnreachable(t *testing.T) {
	_, key, err := checkpoint.GenerateKey("mirror.test")
	if err != nil {
		t.Fatal(err)
	}
	lkey := testLogKey(t)
	// Two points, each a port that was just bound and released, so
	// nothing listens on it over TCP or UDP.
	var points []pecwire.Point
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		points = append(points, pecwire.Point{QUIC: addr, TCP: addr})
	}
	// The bundle's name, which the error repeats, is its operator's
	// choice: it must not break the line either.
	b, err := json.Marshal(pecwire.Bundle{Version: 1, Name: "closed\x1b[2J\nforged", Points: points, SPKISHA256: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "closed.bundle")
	if err := os.WriteFile(bundle, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"pec", "get", "--cloud", bundle, "--ct-key", key, "--ct-log-key", lkey, "https://good.test:1/"},
		{"check", "--cloud", bundle, "--require", "ct", "--ct-key", key, "--ct-log-key", lkey, "good.test:1"},
	} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || out != "" {
			t.Errorf("%s: exit %d, stdout %q", args[0], code, out)
		}
		if !strings.HasPrefix(errs, "pkie "+args[0]+": reaching the cloud: ") || strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n") ||
			!strings.Contains(errs, `cloud closed\x1b[2J\nforged: `) {
			t.Errorf("%s: stderr is not one line naming the cloud:\n%s", args[0], errs)
		}
		for _, p := range points {
			if !strings.Contains(errs, p.TCP) {
				t.Errorf("%s: stderr does not name point %s: %s", args[0], p.TCP, errs)
			}
		}
	}
}

// TestPECRemoteTextIsEscaped: text a remote party chooses (here the names
// in a server's certificate, which CA validation's error repeats) reaches
// the terminal escaped, whether in a verdict or in an error: no escape
// sequence, no carriage return, no line of its own.
func TestPECRemoteTextIsEscaped(t *testing.T) {
	w := newPECWorld(t)
	for _, args := range [][]string{
		append([]string{"pec", "get"}, w.flags(w.url("evil.test"))...),
		append([]string{"pec", "get"}, w.flags("--warn", w.url("evil.test"))...),
		append([]string{"check"}, w.flags("--require", "ca,ct", "--allow-private", "--no-cache", "evil.test:"+w.port["evil.test"])...),
	} {
		code, out, errs := runCLI(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0 for a certificate not valid for the name", args)
		}
		all := out + errs
		if !strings.Contains(all, `\x1b[2J`) {
			t.Errorf("%v: the certificate's name is not shown escaped:\n%s\n%s", args, out, errs)
		}
		for _, line := range strings.Split(all, "\n") {
			if strings.ContainsFunc(line, termtext.Unsafe) {
				t.Errorf("%v: printed a control character: %q", args, line)
			}
			if strings.HasPrefix(line, "forged.test") {
				t.Errorf("%v: a forged line: %q", args, line)
			}
		}
	}
}

// testLogKey returns a CT log's RFC 6962 note verifier key (ECDSA P-256),
// as a client pins it with --ct-log-key.
func testLogKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := fnote.RFC6962VerifierString("ctlog.test", k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}
