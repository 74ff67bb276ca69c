package cli

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(t.Context(), env, args)
	return code, out.String(), errb.String()
}

// TestNotaryKillLosesNothing answers checks from a real notary process,
// kills it with SIGKILL, restarts it on the same data directory and finds
// every answered observation in its history.
func TestNotaryKillLosesNothing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "notary")
	if code, _, errs := runCLI(t, "notary", "init", "--data", data, "--name", "n1"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	for _, f := range []string{"notary.key", "v1.key"} {
		st, err := os.Stat(filepath.Join(data, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v err %v, want 0600", f, st.Mode().Perm(), err)
		}
	}
	if code, _, errs := runCLI(t, "notary", "init", "--data", data); code != 2 || !strings.Contains(errs, "refusing to overwrite") {
		t.Fatalf("second init: %d %s", code, errs)
	}

	ca, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	var sites []*testbed.Site
	for i := 0; i < 3; i++ {
		leaf, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
		s, err := testbed.StartSite("site.test", leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sites = append(sites, s)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	target := func(s *testbed.Site) string {
		return "/target/127.0.0.1+" + strings.TrimPrefix(s.Addr.String(), "127.0.0.1:")
	}

	c := startChild(t, "notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--allow-private")
	addr := c.waitLine(t, "listening ")
	for _, s := range sites {
		sum := sha1.Sum(s.Leaf().Cert.Raw)
		resp, err := client.Post("https://"+addr+target(s), "application/x-www-form-urlencoded", strings.NewReader("fingerprint="+probe.ColonHex(sum[:])))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("check: %d", resp.StatusCode)
		}
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()

	c = startChild(t, "notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--allow-private")
	addr = c.waitLine(t, "listening ")
	for _, s := range sites {
		resp, err := client.Get("https://" + addr + target(s))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha1.Sum(s.Leaf().Cert.Raw)
		if resp.StatusCode != 200 || !strings.Contains(string(b), probe.ColonHex(sum[:])) {
			t.Fatalf("after kill -9: %d %s", resp.StatusCode, b)
		}
	}
}

func TestNotaryBundle(t *testing.T) {
	data := filepath.Join(t.TempDir(), "notary")
	runCLI(t, "notary", "init", "--data", data, "--name", "n1")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--host", "notary.example", "--ssl-port", "8443", "--http-port", "8080", "--region", "US"}, 0, `"ssl_port": 8443`},
		// No bouncer is advertised unless asked: clients would send
		// their bounced queries to a port where nothing listens.
		{[]string{"--host", "notary.example"}, 0, `"http_port": 0`},
		{[]string{}, 2, "--host is required"},
		{[]string{"--host", "x", "--ssl-port", "70000"}, 2, "out of range"},
	}
	for _, tc := range tests {
		code, out, errs := runCLI(t, append([]string{"notary", "bundle", "--data", data}, tc.args...)...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: code %d out %s err %s", tc.args, code, out, errs)
		}
		if code == 0 {
			var b struct {
				Version int `json:"version"`
				Hosts   []struct {
					Certificate string `json:"certificate"`
				} `json:"hosts"`
			}
			if err := json.Unmarshal([]byte(out), &b); err != nil || b.Version != 1 || !strings.Contains(b.Hosts[0].Certificate, "BEGIN CERTIFICATE") {
				t.Errorf("bundle %s: %v", out, err)
			}
		}
	}
	// Without --http-port the bundle advertises no bouncer; with it, the
	// port given.
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--host", "notary.example"}, 0},
		{[]string{"--host", "notary.example", "--http-port", "8080"}, 8080},
	} {
		code, out, errs := runCLI(t, append([]string{"notary", "bundle", "--data", data}, tc.args...)...)
		var b struct {
			Hosts []struct {
				HTTPPort *int `json:"http_port"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || len(b.Hosts) != 1 || b.Hosts[0].HTTPPort == nil || *b.Hosts[0].HTTPPort != tc.want {
			t.Errorf("%v: code %d err %s bundle %s; want http_port %d", tc.args, code, errs, out, tc.want)
		}
	}
	if code, _, errs := runCLI(t, "notary", "serve", "--data", filepath.Join(t.TempDir(), "none")); code != 2 || !strings.Contains(errs, "notary init") {
		t.Errorf("serve without init: %d %s", code, errs)
	}
}

// startChildLogged is startChild with the child's stderr (its log) written
// straight to a file, so that what it logged before printing a line on
// stdout is in the file once the line has been read.
func startChildLogged(t *testing.T, logPath string, args ...string) *child {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PKIE_CLI_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &child{cmd: cmd, stdout: bufio.NewReader(out)}
}

// TestNotaryServeLostHistory serves a notary, has it record an
// observation, deletes its database (keeping its keys) and starts it
// again: the second start must log at error level that the history was
// lost and export pkie_notary_history_empty_at_start 1, and keep serving.
// The first start, on a new notary's empty history, must not.
func TestNotaryServeLostHistory(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "notary")
	if code, _, errs := runCLI(t, "notary", "init", "--data", data, "--name", "n1"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	ca, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	leaf, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	site, err := testbed.StartSite("site.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	check := func(addr string) {
		t.Helper()
		sum := sha1.Sum(leaf.Cert.Raw)
		resp, err := client.Post("https://"+addr+"/target/127.0.0.1+"+strconv.Itoa(int(site.Addr.Port())),
			"application/x-www-form-urlencoded", strings.NewReader("fingerprint="+probe.ColonHex(sum[:])))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("check: %d", resp.StatusCode)
		}
	}
	gauge := func(addr string) string {
		t.Helper()
		_, m := get("https://" + addr + "/metrics")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "pkie_notary_history_empty_at_start ") {
				return strings.TrimPrefix(l, "pkie_notary_history_empty_at_start ")
			}
		}
		return "(absent)"
	}

	log1 := filepath.Join(dir, "first.log")
	c := startChildLogged(t, log1, "notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--allow-private")
	addr := c.waitLine(t, "listening ")
	if b, _ := os.ReadFile(log1); bytes.Contains(b, []byte("level=ERROR")) || gauge(addr) != "0" {
		t.Fatalf("a new notary's empty history reported as lost (gauge %s):\n%s", gauge(addr), b)
	}
	check(addr)
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()

	for _, f := range []string{"history.db", "history.db-wal", "history.db-shm"} {
		if err := os.Remove(filepath.Join(data, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	log2 := filepath.Join(dir, "second.log")
	c = startChildLogged(t, log2, "notary", "serve", "--data", data, "--listen", "127.0.0.1:0", "--allow-private")
	addr = c.waitLine(t, "listening ")
	b, _ := os.ReadFile(log2)
	if !bytes.Contains(b, []byte("level=ERROR")) || !bytes.Contains(b, []byte("EMPTY")) {
		t.Errorf("no error-level line about the lost history:\n%s", b)
	}
	if g := gauge(addr); g != "1" {
		t.Errorf("pkie_notary_history_empty_at_start = %s, want 1", g)
	}
	check(addr) // it keeps serving
}
