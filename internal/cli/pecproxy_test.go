package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// lockedBuffer is a bytes.Buffer safe for the proxy's logger and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPECProxy runs "pkie pec-proxy args..." in this process and returns
// its address, and a function that stops it and returns its log.
func startPECProxy(t *testing.T, args ...string) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: logs, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, env, append([]string{"pec-proxy", "--json"}, args...))
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("pec-proxy exited (%d) before listening: %s", <-done, logs.String())
	}
	go io.Copy(io.Discard, pr)
	var start struct {
		Listening string   `json:"listening"`
		Clouds    []string `json:"clouds"`
	}
	if err := json.Unmarshal([]byte(line), &start); err != nil || start.Listening == "" {
		t.Fatalf("startup line %q: %v", line, err)
	}
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("pec-proxy exited %d: %s", code, logs.String())
			}
		}
		return logs.String()
	}
	t.Cleanup(func() { stop() })
	return start.Listening, stop
}

// TestPECProxy serves an HTTP backend through pkie pec-proxy and fetches it
// with pkie pec get in client-server mode: the proxy forwards its chain to
// the client's cloud, the client verifies the proofs, the backend answers;
// a revoked certificate behind another proxy is refused.
func TestPECProxy(t *testing.T) {
	ctx := context.Background()
	root, err := testbed.NewRootCA("PEC Proxy Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("PEC Proxy CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][2]string{}
	leaves := map[string]*testbed.Leaf{}
	for _, name := range []string{"good.test", "revoked.test"} {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		leaves[name] = leaf
		if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
		writePEM(t, certFile, "CERTIFICATE", leaf.Chain...)
		der, err := x509.MarshalPKCS8PrivateKey(leaf.Key)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
		files[name] = [2]string{certFile, keyFile}
	}
	if err := ttp.Revoke(ctx, ca, leaves["revoked.test"].Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := testbed.StartCloud(ctx, testbed.CloudOptions{TTPs: ttp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	bundle, roots := filepath.Join(dir, "pec.bundle"), filepath.Join(dir, "roots.pem")
	b, _ := json.Marshal(c.Bundle)
	os.WriteFile(bundle, b, 0o644)
	writePEM(t, roots, "CERTIFICATE", root.Cert.Raw)
	logKey, revKey := filepath.Join(dir, "log.pub"), filepath.Join(dir, "ra.pub")
	os.WriteFile(logKey, []byte(ttp.LogKey+"\n"), 0o644)
	mirrorKey := filepath.Join(dir, "mirror.pub")
	os.WriteFile(mirrorKey, []byte(ttp.MirrorKey+"\n"), 0o644)
	os.WriteFile(revKey, []byte(ttp.RevocationKey+"\n"), 0o644)

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend: %s %s via %s", r.Host, r.URL.Path, r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(backend.Close)

	proxy := func(name string, allow ...string) (string, func() string) {
		args := []string{"--listen", "127.0.0.1:0", "--cert", files[name][0], "--key", files[name][1], "--backend", backend.URL}
		return startPECProxy(t, append(args, allow...)...)
	}
	body := filepath.Join(dir, "body")
	get := func(name, addr string, extra ...string) (int, string, string) {
		_, port, _ := net.SplitHostPort(addr)
		args := []string{"pec", "get", "--json", "-o", body, "--cloud", bundle, "--ct-key", "@" + mirrorKey, "--ct-log-key", "@" + logKey, "--revocation-key", "@" + revKey,
			"--roots", roots, "--allow-private", "--resolve", name + "=127.0.0.1", "--transport", "tcp"}
		return runCLI(t, append(append(args, extra...), "https://"+name+":"+port+"/hello")...)
	}
	type result struct {
		Verdict struct {
			Result string `json:"verdict"`
		} `json:"verdict"`
		Evidence struct {
			Extension bool `json:"extension"`
		} `json:"evidence"`
		Status int `json:"status"`
	}

	goodAddr, stopGood := proxy("good.test", "--cloud-bundle", bundle)
	code, out, errs := get("good.test", goodAddr)
	if code != 0 {
		t.Fatalf("pec get good.test: exit %d\n%s\n%s", code, out, errs)
	}
	var res result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Verdict.Result != "trusted" || !res.Evidence.Extension || res.Status != 200 {
		t.Fatalf("good.test: %s", out)
	}
	if got, _ := os.ReadFile(body); string(got) != "backend: good.test:"+goodAddr[strings.LastIndex(goodAddr, ":")+1:]+" /hello via https" {
		t.Fatalf("body %q; want the backend's answer", got)
	}
	// Client-only: no extension, the client submits, still trusted.
	code, out, errs = get("good.test", goodAddr, "--mode", "client-only")
	res = result{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Verdict.Result != "trusted" || res.Evidence.Extension {
		t.Fatalf("pec get --mode client-only: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	// The proxy's log of what it forwarded, written as it stops.
	if log := stopGood(); !strings.Contains(log, `"forwarded":1`) || !strings.Contains(log, `"with_extension":1`) {
		t.Fatalf("the proxy did not forward the chain:\n%s", log)
	}

	revAddr, stopRev := proxy("revoked.test", "--cloud-allow", c.TCP+","+c.QUIC)
	code, out, _ = get("revoked.test", revAddr)
	res = result{}
	json.Unmarshal([]byte(out), &res)
	if code != 1 || res.Verdict.Result != "untrusted" {
		t.Fatalf("pec get revoked.test: exit %d, want 1 (untrusted)\n%s", code, out)
	}
	if log := stopRev(); !strings.Contains(log, `"forwarded":1`) {
		t.Fatalf("the revoked.test proxy did not forward the chain:\n%s", log)
	}
}

// TestPECProxyUsage checks the flags are refused with what is wrong.
func TestPECProxyUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert", "a", "--key", "b", "--backend", "http://x"}, "--cloud-allow or --cloud-bundle"},
		{[]string{"--cert", "a", "--key", "b", "--cloud-allow", "h:1"}, "--backend is required"},
		{[]string{"--cert", "a", "--key", "b", "--backend", "ftp://x", "--cloud-allow", "h:1"}, "want an http://"},
		{[]string{"--cert", "a", "--key", "b", "--backend", "http://x", "--cloud-allow", "udp://h:1"}, "scheme"},
		{[]string{"--cert", "a", "--key", "b", "--backend", "http://x", "--cloud-allow", "h:0"}, "port"},
	} {
		code, _, errs := runCLI(t, append([]string{"pec-proxy"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("pec-proxy %v: exit %d, %q; want usage error with %q", tc.args, code, errs, tc.want)
		}
	}
}
