package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/pecwire"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCloudInitBundle: init creates the key 0600, a certificate, the
// configuration and the notary enhancement's key, and refuses to run twice;
// bundle prints a bundle that parses, pins the cloud's key and carries the
// notary's verifier key.
func TestCloudInitBundle(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cloud")
	if code, out, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "pec.test", "--json"); code != 0 {
		t.Fatalf("init: %d %s %s", code, out, errs)
	}
	fi, err := os.Stat(filepath.Join(data, cloud.FileKey))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key: %v %v", fi, err)
	}
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "other"); code != 2 || !strings.Contains(errs, "refusing to overwrite") {
		t.Fatalf("second init: %d %s", code, errs)
	}
	code, out, errs := runCLI(t, "cloud", "bundle", "--data", data, "--point", "127.0.0.1:4433,127.0.0.1:4434", "--point", ",[::1]:443")
	if code != 0 {
		t.Fatalf("bundle: %d %s", code, errs)
	}
	b, err := pecwire.ParseBundle([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	d, err := cloud.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	want := pecwire.Point{QUIC: "127.0.0.1:4433", TCP: "127.0.0.1:4434"}
	if b.Name != "pec.test" || len(b.Points) != 2 || b.Points[0] != want || b.Points[1] != (pecwire.Point{TCP: "[::1]:443"}) || b.SPKISHA256 != d.SPKIHash() {
		t.Fatalf("bundle %+v", b)
	}
	key, err := notaryprover.PublicKey(d.ProverDir("notary"))
	if err != nil {
		t.Fatal(err)
	}
	var vc pkienotary.VerifierConfig
	if err := json.Unmarshal(b.Verifiers["notary"], &vc); err != nil || vc.Key != key {
		t.Fatalf("notary verifier %s, want key %s", b.Verifiers["notary"], key)
	}
	if _, ok := b.Verifiers["ct"]; ok {
		t.Fatal("a log's key in a cloud bundle")
	}
	for _, k := range []struct {
		args []string
		want string
	}{
		{[]string{"cloud", "bundle", "--data", data}, "--point"},
		{[]string{"cloud", "bundle", "--data", data, "--point", "nohost"}, "not host:port"},
		{[]string{"cloud", "init", "--data", t.TempDir(), "--pkie", "nosuch"}, "unknown enhancement"},
		{[]string{"cloud", "serve", "--data", data, "--quic", "", "--tcp", ""}, "at least one listener"},
		{[]string{"cloud", "serve", "--data", filepath.Join(t.TempDir(), "none")}, "pkie cloud init"},
		{[]string{"cloud", "frobnicate"}, "unknown subcommand"},
	} {
		if code, _, errs := runCLI(t, k.args...); code != 2 || !strings.Contains(errs, k.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: %d %q, want one line with %q", k.args, code, errs, k.want)
		}
	}
}

// TestCloudServeOptions: cloud serve's flags are checked by
// cloud.ServeOptions.Validate, before the data directory is read (here it
// does not exist), and its messages name the flags.
func TestCloudServeOptions(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--quic", "", "--tcp", ""}, "--quic and --tcp are both empty: a cloud needs at least one listener"},
		{[]string{"--max-clients", "0"}, "--max-clients must be positive"},
		{[]string{"--missed-pings", "-1"}, "--missed-pings must be positive"},
		{[]string{"--max-sessions-per-addr", "0"}, "--max-sessions-per-addr must be positive"},
		{[]string{"--max-jobs-per-client", "0"}, "--max-jobs-per-client must be positive"},
		{[]string{"--max-prover-calls", "0"}, "--max-prover-calls must be positive"},
		{[]string{"--max-jobs-per-addr", "-1"}, "--max-sessions and --max-jobs-per-addr must not be negative"},
		{[]string{"--max-sessions", "1000000000"}, "--max-sessions asks for 1000000000: raise the limit (ulimit -n) or lower --max-sessions"},
		{[]string{"--peer", "http://10.0.0.2:9433", "--peer", "10.0.0.3"}, `--peer "10.0.0.3": want the base URL of a replica's HTTP listener`},
		{[]string{"--max-frame", "1000"}, "--max-frame must be between 16384 and"},
		{[]string{"--write-timeout", "0s"}, "--keepalive, --handshake-timeout, --write-timeout and --max-budget must be positive"},
		{[]string{"--keepalive", "1200h"}, "--keepalive 1200h0m0s does not fit the wire format"},
	} {
		code, out, errs := runCLI(t, append([]string{"cloud", "serve", "--data", none}, tt.args...)...)
		if code != ExitUsage || out != "" || !strings.HasPrefix(errs, "pkie cloud: ") || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tt.args, code, errs, tt.want)
		}
	}
}

// TestCloudServe runs `pkie cloud serve` as a process with the built-in
// notary enhancement probing a site on loopback, pins it from `pkie cloud
// bundle`, and proves the site's chain over QUIC and over TCP: each proof
// verifies under the notary key the bundle carries. /healthz and /metrics
// answer on the HTTP listener.
func TestCloudServe(t *testing.T) {
	root, err := testbed.NewRootCA("Cloud Test Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("www.example.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "cloud")
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "pec.test"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	nconf := filepath.Join(dir, "notary.json")
	conf := notaryprover.ProverConfig{AllowPrivate: true, Resolve: map[string]string{"www.example.test:443": site.Addr.String()}}
	if err := os.WriteFile(nconf, conf.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "cloud", "serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0", "--pkie", "notary="+nconf)
	quicAddr := strings.TrimPrefix(c.waitLine(t, "listening quic"), " ")
	tcpAddr := c.waitLine(t, "listening tcp")
	httpAddr := c.waitLine(t, "listening http")
	code, out, errs := runCLI(t, "cloud", "bundle", "--data", data, "--point", quicAddr+","+tcpAddr)
	if code != 0 {
		t.Fatalf("bundle: %s", errs)
	}
	b, err := pecwire.ParseBundle([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pkienotary.NewVerifier(b.Verifiers["notary"])
	if err != nil {
		t.Fatal(err)
	}
	pin, _ := b.Pin()
	certs := make([]*x509.Certificate, len(leaf.Chain))
	for i, der := range leaf.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	sub := pkie.Subject{ServerName: "www.example.test", Port: 443, Chain: leaf.Chain, Certs: certs}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tr := range []string{pecwire.QUIC, pecwire.TCP} {
		var conn *pecwire.Conn
		if tr == pecwire.QUIC {
			conn, err = pecwire.DialQUIC(ctx, b.Points[0].QUIC, pecwire.ClientTLS(pin), nil)
		} else {
			conn, err = pecwire.DialTCP(ctx, b.Points[0].TCP, pecwire.ClientTLS(pin))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		m, err := conn.Recv(time.Now().Add(20 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		reg := m.(*pecwire.Registered)
		if err := conn.Send(&pecwire.Submit{ClientID: reg.ClientID, Nonce: pecwire.Nonce{1}, Budget: 10 * time.Second,
			ServerName: sub.ServerName, Port: 443, Requests: []pkie.Request{{ID: pkie.Notary}}, Chain: leaf.Chain}, time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		m, err = conn.Recv(time.Now().Add(20 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := m.(*pecwire.Proof)
		if !ok || p.Status != pecwire.ProofOK {
			t.Fatalf("%s: %+v", tr, m)
		}
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: sub, Proof: p.Proof, Now: time.Now()})
		if a.Status != pkie.Pass {
			t.Fatalf("%s: notary proof: %s %s", tr, a.Status, a.Reason)
		}
	}
	for path, want := range map[string]string{
		"/healthz": `"notary":"ok"`,
		"/metrics": `pkie_cloud_proofs_total{pkie="notary",status="ok"} 2`,
	} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, lacks %s", path, resp.StatusCode, want)
		}
	}
}

// TestCloudServeJSON: with --json, serve prints one object naming what it
// listens on once it serves, and only the listeners asked for.
func TestCloudServeJSON(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cloud")
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "pec.test"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	d, err := cloud.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "cloud", "serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "", "--http", "", "--json")
	var out struct {
		Name       string            `json:"name"`
		Listening  map[string]string `json:"listening"`
		PKIEs      []string          `json:"pkies"`
		SPKISHA256 string            `json:"spki_sha256"`
	}
	decoded := make(chan error, 1)
	go func() { decoded <- json.NewDecoder(c.stdout).Decode(&out) }()
	select {
	case err := <-decoded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no JSON from serve within 30 s")
	}
	if out.Name != "pec.test" || len(out.Listening) != 1 || out.Listening["quic"] == "" || strings.Join(out.PKIEs, ",") != "notary" || out.SPKISHA256 != d.SPKIHash() {
		t.Fatalf("serve --json printed %+v", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pecwire.DialQUIC(ctx, out.Listening["quic"], pecwire.ClientTLS(pecwire.SPKIHash(d.Leaf)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if m, err := conn.Recv(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*pecwire.Registered); !ok {
		t.Fatalf("got %T", m)
	}
}

// TestCloudInitChecksProverConfigs: init refuses a prover configuration
// that serve would refuse, before it writes anything and without
// contacting any TTP; serve --pkie may replace the configuration of an
// enhancement init enabled but not enable another (bundle would not know
// it); and errors name the command once.
func TestCloudInitChecksProverConfigs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vkey := testLogKey(t)
	if _, err := ctmirror.GenerateKey(dir, "mirror.cli.pkie.test/ct"); err != nil {
		t.Fatal(err)
	}
	mk := filepath.Join(dir, ctmirror.KeyFile)
	good := write("good-ct.json", `{"log_url":"http://127.0.0.1:1","log_key":"`+vkey+`","mirror_key_file":"`+mk+`"}`)
	for _, k := range []struct {
		name, pkie, want string
	}{
		{"ct without configuration", "ct", "log_list (the logs whose SCTs are proved) or log_url (a log to mirror) is required"},
		{"ct without a mirror key", "ct=" + write("nomirror.json", `{"log_url":"http://127.0.0.1:1","log_key":"`+vkey+`"}`), "mirror_key_file"},
		{"ct with a bad key", "ct=" + write("badkey.json", `{"log_url":"http://127.0.0.1:1","log_key":"not a key","mirror_key_file":"`+mk+`"}`), "log_key"},
		{"ct with a bad URL", "ct=" + write("badurl.json", `{"log_url":"127.0.0.1:1","log_key":"`+vkey+`","mirror_key_file":"`+mk+`"}`), "not an http or https URL"},
		{"revocation misspelt", "revocation=" + write("typo.json", `{"authority_url":"http://127.0.0.1:1","authority_kye":"x"}`), "unknown field"},
		{"notary negative", "notary=" + write("neg.json", `{"max_probes":-1}`), "must not be negative"},
		{"notary not an object", "notary=" + write("arr.json", `[]`), "notary prover configuration"},
	} {
		data := filepath.Join(dir, "c-"+strings.ReplaceAll(k.name, " ", "-"))
		code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--pkie", k.pkie)
		if code != 2 || !strings.Contains(errs, k.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: %d %q, want one line with %q", k.name, code, errs, k.want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("%s: init wrote %s before refusing: %v", k.name, data, err)
		}
	}
	// A good configuration passes without its log being reachable.
	data := filepath.Join(dir, "ok")
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--pkie", "ct="+good, "--pkie", "notary"); code != 0 {
		t.Fatalf("init with a good ct configuration: %s", errs)
	}
	// One prefix, not "pkie cloud: cloud: …".
	code, _, errs := runCLI(t, "cloud", "init", "--data", data)
	if code != 2 || !strings.HasPrefix(errs, "pkie cloud: ") || strings.Contains(errs, "cloud: cloud:") {
		t.Fatalf("second init: %d %q", code, errs)
	}
	notaryOnly := filepath.Join(dir, "notary-only")
	if code, _, errs := runCLI(t, "cloud", "init", "--data", notaryOnly); code != 0 {
		t.Fatal(errs)
	}
	for _, k := range []struct {
		args []string
		want string
	}{
		{[]string{"--pkie", "ct=" + good}, "not enabled in"},
		{[]string{"--pkie", "notary=" + write("neg2.json", `{"max_age":"-1h"}`)}, "must not be negative"},
	} {
		args := append([]string{"cloud", "serve", "--data", notaryOnly, "--quic", "127.0.0.1:0", "--tcp", "", "--http", ""}, k.args...)
		if code, _, errs := runCLI(t, args...); code != 2 || !strings.Contains(errs, k.want) {
			t.Errorf("serve %v: %d %q, want %q", k.args, code, errs, k.want)
		}
	}
}

// TestCloudLostNotaryKeys: a data directory whose notary state directory
// was lost (copied without it, deleted) is refused by serve and bundle,
// each saying how to recover, instead of serving and publishing a new
// notary key that every client that pinned the old bundle would fail on.
// Only init --new-notary-key makes new keys, and the bundle then carries
// them.
func TestCloudLostNotaryKeys(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cloud")
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "pec.test"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	bundleKey := func() (string, int, string) {
		code, out, errs := runCLI(t, "cloud", "bundle", "--data", data, "--point", "127.0.0.1:4433")
		if code != 0 {
			return "", code, errs
		}
		b, err := pecwire.ParseBundle([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		var vc pkienotary.VerifierConfig
		if err := json.Unmarshal(b.Verifiers["notary"], &vc); err != nil {
			t.Fatal(err)
		}
		return vc.Key, code, errs
	}
	old, code, errs := bundleKey()
	if code != 0 || old == "" {
		t.Fatalf("bundle: %d %s", code, errs)
	}
	if err := os.RemoveAll(filepath.Join(data, cloud.DirPKIEs, "notary")); err != nil {
		t.Fatal(err)
	}
	if _, code, errs := bundleKey(); code == 0 || !strings.Contains(errs, "no notary keys") || !strings.Contains(errs, "--new-notary-key") || !strings.Contains(errs, "backup") {
		t.Fatalf("bundle of a cloud without its notary keys: %d %q", code, errs)
	}
	code, out, errs := runCLI(t, "cloud", "serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "", "--http", "")
	if code == 0 || !strings.Contains(errs, "no notary keys") || !strings.Contains(errs, "backup") || strings.Contains(out, "listening") {
		t.Fatalf("serve of a cloud without its notary keys: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(data, cloud.DirPKIEs, "notary", "v1.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("serve or bundle made a notary key: %v", err)
	}
	code, out, errs = runCLI(t, "cloud", "init", "--data", data, "--new-notary-key")
	if code != 0 || !strings.Contains(out, "publish the new one") {
		t.Fatalf("init --new-notary-key: %d %s %s", code, out, errs)
	}
	fresh, code, errs := bundleKey()
	if code != 0 || fresh == "" || fresh == old || !strings.Contains(out, fresh) {
		t.Fatalf("bundle after --new-notary-key: %q (old %q) %d %s", fresh, old, code, errs)
	}
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--new-notary-key"); code == 0 || !strings.Contains(errs, "refusing to overwrite") {
		t.Fatalf("a second --new-notary-key: %d %s", code, errs)
	}
}
