package ctinterop

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cli"
	"github.com/pkie/pkie/internal/sctworld"
	"github.com/pkie/pkie/internal/sctworld/sctworldtest"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
	"github.com/pkie/pkie/probe"
)

// startServeCLI runs a serving command of pkie in-process with --json
// until the test ends and returns its startup line.
func startServeCLI(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	env := &cli.Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: stderr, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		code := cli.Main(ctx, env, append(args, "--json"))
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("pkie %s did not stop within 30 s of its context's end", args[0])
		}
	})
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(pr)
		l, err := r.ReadString('\n')
		if err != nil {
			close(lines)
			return
		}
		lines <- l
		io.Copy(io.Discard, r)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("pkie %v exited (code %d) before listening:\n%s", args, <-done, stderr)
		}
		return []byte(l)
	case <-time.After(60 * time.Second):
		t.Fatalf("pkie %v not listening within 60 s:\n%s", args, stderr)
	}
	return nil
}

// sctCloud is "pkie cloud init" with a ct prover on the world's log list,
// "pkie cloud serve" on loopback and "pkie cloud bundle": the bundle file
// and the cloud's QUIC address.
func sctCloud(ctx context.Context, t *testing.T, w *sctworld.World, dir string) (bundle, quic string) {
	t.Helper()
	data, conf := filepath.Join(dir, "cloud"), filepath.Join(dir, "ct.json")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(`{"log_list": "`+w.ListPath+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runPKIE(ctx, "cloud", "init", "--data", data, "--name", "sct.cloud.test", "--pkie", "ct="+conf); code != cli.ExitOK {
		t.Fatalf("pkie cloud init: exit %d\n%s", code, errs)
	}
	line := startServeCLI(t, "cloud", "serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "")
	var info struct {
		Listening map[string]string `json:"listening"`
	}
	if err := json.Unmarshal(line, &info); err != nil || info.Listening["quic"] == "" || info.Listening["tcp"] == "" {
		t.Fatalf("pkie cloud serve's startup line %q: %v", line, err)
	}
	code, out, errs := runPKIE(ctx, "cloud", "bundle", "--data", data, "--point", info.Listening["quic"]+","+info.Listening["tcp"])
	if code != cli.ExitOK {
		t.Fatalf("pkie cloud bundle: exit %d\n%s", code, errs)
	}
	bundle = filepath.Join(dir, "sct.bundle")
	if err := os.WriteFile(bundle, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle, info.Listening["quic"]
}

// ctFinding is the ct source of a verdict as --json prints it, for
// pkie check and for pkie pec get (under "verdict").
type ctFinding struct {
	code           int
	result, status string
	detail, out    string
	forwarded      bool // pkie pec get: the PEC server forwarded the chain, the client did not submit it
}

func parseCT(t *testing.T, code int, out, errs string) ctFinding {
	t.Helper()
	type verdict struct {
		Result  string                                    `json:"result"`
		Sources []struct{ Source, Status, Detail string } `json:"sources"`
	}
	// pkie check prints the verdict, with its result under "verdict";
	// pkie pec get prints the verdict under "verdict".
	var top map[string]json.RawMessage
	f := ctFinding{code: code, status: "missing", out: out + errs}
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("--json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	raw := []byte(out)
	if v := top["verdict"]; len(v) > 0 && v[0] == '{' {
		raw = v
	}
	var vv verdict
	if err := json.Unmarshal(raw, &vv); err != nil {
		t.Fatalf("--json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if vv.Result == "" {
		json.Unmarshal(top["verdict"], &vv.Result)
	}
	var ev struct {
		ServerForwarded bool `json:"server_forwarded"`
	}
	if e := top["evidence"]; len(e) > 0 {
		json.Unmarshal(e, &ev)
	}
	f.forwarded = ev.ServerForwarded
	f.result = vv.Result
	for _, s := range vv.Sources {
		if s.Source == "ct" {
			f.status, f.detail = s.Status, s.Detail
		}
	}
	return f
}

// TestSCTEndToEnd runs the end-to-end test on loopback: TesseraCT
// (first operator) and pkie's own log (second) log precertificates and
// certificates of a local CA; a third pkie log is left out of the log
// list. Through "pkie check" fetching inclusion from the logs itself,
// "pkie check --cloud", "pkie pec get" in client-only and client-server
// mode, and the Go API (check.Checker over a pec.Client), every compliant
// certificate is trusted with its SCTs included, delivered embedded, in
// the TLS extension or in a stapled OCSP response; the forged, unlisted
// and lone SCTs fail the ct source with a reason naming Chrome's policy.
// Then TesseraCT goes off the network: a certificate whose inclusion
// nobody fetched before is unknown, naming TesseraCT's log, never fail.
func TestSCTEndToEnd(t *testing.T) {
	w := sctworldtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(roots, w.RootsPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	resolver := testbed.NewResolver()
	var resolve []string
	for _, name := range sctworld.SiteNames() {
		s := w.Site(name)
		resolver.Set(name, s.Addr)
		resolve = append(resolve, "--resolve", name+"="+s.Addr.String())
	}
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "n1", Path: resolver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	notaries := filepath.Join(dir, "notaries")
	os.MkdirAll(notaries, 0o700)
	if _, err := n.WriteBundle(notaries); err != nil {
		t.Fatal(err)
	}
	bundle, cloudQUIC := sctCloud(ctx, t, w, dir)

	ctFlags := []string{"--ct-log-list", w.ListPath}
	checkCLI := func(t *testing.T, site string, extra ...string) ctFinding {
		args := append([]string{"check", site, "--notaries", notaries, "--allow-private", "--roots", roots, "--no-cache",
			"--require", "ca,ct", "--json"}, resolve...)
		code, out, errs := runPKIE(ctx, append(append(args, ctFlags...), extra...)...)
		return parseCT(t, code, out, errs)
	}
	pecGet := func(t *testing.T, site, mode string, url string) ctFinding {
		if url == "" {
			url = "https://" + site + ":" + strconv.Itoa(int(w.Site(site).Addr.Port())) + "/"
		}
		// In client-server mode the client waits for the server's
		// forwarding before it submits the chain itself: long enough here
		// that what the test sees is the server's.
		args := append([]string{"pec", "get", "--cloud", bundle, "--mode", mode, "--server-grace", "10s", "--roots", roots, "--allow-private",
			"--resolve", site + "=127.0.0.1", "--require", "ca,ct", "--json", "-o", filepath.Join(dir, "body")}, ctFlags...)
		code, out, errs := runPKIE(ctx, append(args, url)...)
		return parseCT(t, code, out, errs)
	}
	want := func(t *testing.T, how, site string, f ctFinding) {
		t.Helper()
		switch {
		case sctworld.Compliant(site):
			if f.code != cli.ExitOK || f.status != "pass" || !strings.Contains(f.detail, "included") {
				t.Errorf("%s %s: exit %d, ct %s (%s); want exit 0, pass, included\n%s", how, site, f.code, f.status, f.detail, f.out)
			}
		case site == sctworld.NoSCT:
			if f.code != cli.ExitNegative || f.status != "fail" || !strings.Contains(f.detail, "no SCT") {
				t.Errorf("%s %s: exit %d, ct %s (%s); want exit 1, fail, no SCT\n%s", how, site, f.code, f.status, f.detail, f.out)
			}
		default:
			if f.code != cli.ExitNegative || f.status != "fail" || !strings.Contains(f.detail, "Chrome CT policy") {
				t.Errorf("%s %s: exit %d, ct %s (%s); want exit 1, fail naming Chrome's policy\n%s", how, site, f.code, f.status, f.detail, f.out)
			}
		}
	}
	cases := []string{sctworld.Good, sctworld.TLS, sctworld.OCSP, sctworld.Forged, sctworld.Unlisted, sctworld.OneSCT, sctworld.NoSCT}

	t.Run("pkie check --ct-fetch", func(t *testing.T) {
		for _, site := range cases {
			want(t, "pkie check --ct-fetch", site, checkCLI(t, site, "--ct-fetch"))
		}
	})
	t.Run("pkie check --cloud", func(t *testing.T) {
		for _, site := range cases {
			want(t, "pkie check --cloud", site, checkCLI(t, site, "--cloud", bundle))
		}
	})
	t.Run("pkie pec get client-only", func(t *testing.T) {
		for _, site := range []string{sctworld.Good, sctworld.TLS, sctworld.OCSP, sctworld.Unlisted} {
			want(t, "pkie pec get --mode client-only", site, pecGet(t, site, "client-only", ""))
		}
	})
	t.Run("pkie pec get client-server", func(t *testing.T) {
		// The site behind pkie pec-proxy, which forwards its chain and the
		// SCTs of its TLS extension to the client's cloud.
		for _, site := range []string{sctworld.Good, sctworld.TLS, sctworld.Forged} {
			proxied := pecProxy(t, w.Site(site), filepath.Join(dir, "proxy-"+site), cloudQUIC)
			f := pecGet(t, site, "client-server", "https://"+site+":"+proxied+"/")
			want(t, "pkie pec get --mode client-server", site, f)
			// A refused dial reports no evidence; a fetched one says where
			// the proofs came from.
			if sctworld.Compliant(site) && !f.forwarded {
				t.Errorf("pkie pec get --mode client-server %s: the proofs did not come from the PEC server's forwarding\n%s", site, f.out)
			}
		}
	})
	t.Run("Go API", func(t *testing.T) {
		var b pec.Bundle
		raw, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		client, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{&b}})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		vs, err := check.NewVerifiers(nil, map[string]json.RawMessage{"ct": check.CTVerifierConfig{LogList: w.ListPath}.JSON()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := check.New(check.Config{Lookup: resolver.Lookup, AllowPrivate: true, Roots: w.Root.Pool(), Verifiers: vs,
			Proofs: &pec.CloudProofs{Cloud: client}, Require: []string{"ca", "ct"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, site := range cases {
			v, err := c.Check(ctx, probe.Target{Host: site, Port: int(w.Site(site).Addr.Port())})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := v.Source("ct")
			f := ctFinding{code: cli.ExitNegative, status: string(a.Status), detail: a.Detail, out: strings.Join(v.Reasons, "\n")}
			if v.Result == check.Trusted {
				f.code = cli.ExitOK
			}
			want(t, "check.Checker", site, f)
		}
	})
	t.Run("log down", func(t *testing.T) {
		tess := w.Logs[0]
		tess.Stop()
		// A cloud that never read the stopped log: nothing it holds can
		// show the spare certificate's inclusion there. (A cloud that read
		// the log's checkpoint recently answers from it while a refresh
		// fails: that is evidence, and for an SCT newer than it, a
		// promise.)
		fresh, _ := sctCloud(ctx, t, w, filepath.Join(dir, "fresh"))
		for _, c := range []struct {
			how  string
			args []string
		}{
			{"pkie check --ct-fetch", []string{"--ct-fetch"}},
			{"pkie check --cloud", []string{"--cloud", fresh}},
		} {
			f := checkCLI(t, sctworld.Spare, c.args...)
			t.Logf("%s, %s down: ct %s: %s", c.how, tess.Description, f.status, f.detail)
			if f.status != "unknown" || f.result != "inconclusive" || !strings.Contains(f.detail, tess.Description) {
				t.Errorf("%s with %s down: verdict %s, ct %s (%s); want inconclusive, unknown naming the log\n%s", c.how, tess.Description,
					f.result, f.status, f.detail, f.out)
			}
		}
		// What was shown included before stays so: the first cloud holds
		// the evidence, signed by the log, and the client fetches nothing.
		want(t, "pkie check --cloud, log down, evidence cached", sctworld.Good, checkCLI(t, sctworld.Good, "--cloud", bundle))
	})
}

// pecProxy runs "pkie pec-proxy" in front of a plain HTTP backend with
// site's certificate, key and TLS SCTs, forwarding chains to the cloud at
// quic, and returns the port it listens on.
func pecProxy(t *testing.T, site *sctworld.Site, dir, quic string) string {
	t.Helper()
	os.MkdirAll(dir, 0o700)
	var chain []byte
	for _, der := range site.Leaf.Chain {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, chain, 0o644)
	keyDER, err := x509.MarshalPKCS8PrivateKey(site.Leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "backend of "+site.Name+"\n") }),
		ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.Serve(ln)
	t.Cleanup(func() { backend.Close() })
	args := []string{"pec-proxy", "--listen", "127.0.0.1:0", "--cert", certFile, "--key", keyFile, "--backend", "http://" + ln.Addr().String(),
		"--cloud-allow", quic}
	if len(site.SCTs) > 0 {
		list, err := sctworld.MarshalSCTList(site.SCTs)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "scts")
		os.WriteFile(f, list, 0o644)
		args = append(args, "--sct-list", f)
	}
	line := startServeCLI(t, args...)
	var info struct {
		Listening string `json:"listening"`
	}
	if err := json.Unmarshal(line, &info); err != nil || info.Listening == "" {
		t.Fatalf("pkie pec-proxy's startup line %q: %v", line, err)
	}
	_, port, _ := net.SplitHostPort(info.Listening)
	return port
}
