package ctinterop

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/cli"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
)

// lockedBuffer is a strings.Builder safe for a server's logger and the
// test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// startProverCLI runs "pkie prover serve" in-process with args until the
// test ends and returns the address it listens on.
func startProverCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	env := &cli.Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: stderr, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		code := cli.Main(ctx, env, append([]string{"prover", "serve", "--listen", "127.0.0.1:0", "--json"}, args...))
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("pkie prover serve did not stop within 30 s of its context's end")
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
			t.Fatalf("pkie prover serve exited (code %d) before listening:\n%s", <-done, stderr)
		}
		var info struct {
			Listening string `json:"listening"`
		}
		if err := json.Unmarshal([]byte(l), &info); err != nil || info.Listening == "" {
			t.Fatalf("pkie prover serve's startup line %q: %v", l, err)
		}
		return info.Listening
	case <-time.After(60 * time.Second):
		t.Fatalf("pkie prover serve not listening within 60 s:\n%s", stderr)
	}
	return ""
}

// TestCheckRequireCTOfTesseraCT runs the whole path on loopback through
// the command line: TesseraCT logs some chains; "pkie prover serve
// --ct-log" mirrors it with a mirror key made by "pkie prover mirror-key";
// "pkie check --require ca,ct", pinned to the mirror's key and
// TesseraCT's, trusts the sites whose certificates TesseraCT logged (a
// plain certificate, and a final certificate whose precertificate it
// logged) and refuses the site whose certificate it never saw.
func TestCheckRequireCTOfTesseraCT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tl := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}})
	tt := &target{name: "TesseraCT", lc: logClient(t, tl.SubmissionURL, tl.PublicKey), pub: tl.PublicKey}
	c := newCorpus(t, root)
	subs := c.submit(ctx, t, tt)[0]
	if _, _, err := tl.WaitSize(ctx, corpusLen); err != nil {
		t.Fatal(err)
	}
	unlogged, err := c.inter.Issue(testbed.LeafOptions{DNSNames: []string{"unlogged.interop.test"}})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	code, out, errs := runPKIE(ctx, "prover", "mirror-key", "--dir", filepath.Join(dir, "mirror"), "--name", "mirror.interop.test/tesseract")
	if code != cli.ExitOK {
		t.Fatalf("pkie prover mirror-key: exit %d\n%s", code, errs)
	}
	mirrorKey := strings.TrimSpace(out)
	addr := startProverCLI(t, "--ct-log", tl.MonitoringURL, "--ct-log-key", tl.VerifierKey,
		"--ct-mirror-key", filepath.Join(dir, "mirror", "mirror.key"), "--state", filepath.Join(dir, "state"))

	// Sites serving each chain; one notary on the same path; the CA roots.
	resolver := testbed.NewResolver()
	sites := []struct {
		host   string
		leaf   *testbed.Leaf
		logged bool
		addr   string
	}{
		{host: "plain.interop.test", leaf: c.plain, logged: true},
		{host: "embedded.interop.test", leaf: &testbed.Leaf{Key: c.pre.key, Chain: subs[2].chain}, logged: true},
		{host: "unlogged.interop.test", leaf: unlogged},
	}
	for i := range sites {
		s := &sites[i]
		if s.leaf.Cert == nil {
			if s.leaf.Cert, err = x509.ParseCertificate(s.leaf.Chain[0]); err != nil {
				t.Fatal(err)
			}
		}
		site, err := testbed.StartSite(s.host, s.leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { site.Close() })
		resolver.Set(s.host, site.Addr)
		s.addr = site.Addr.String()
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
	roots := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(roots, root.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, s := range sites {
		args := []string{"check", s.host, "--notaries", notaries, "--allow-private", "--roots", roots, "--no-cache",
			"--resolve", s.host + "=" + s.addr, "--require", "ca,ct",
			"--ct-prover", "http://" + addr, "--ct-key", mirrorKey, "--ct-log-key", tl.VerifierKey, "--json"}
		code, out, errs := runPKIE(ctx, args...)
		var v struct {
			Sources []struct{ Source, Status, Detail string } `json:"sources"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: pkie check --json: exit %d, %v\n%s\n%s", s.host, code, err, out, errs)
		}
		ct := "missing"
		for _, src := range v.Sources {
			if src.Source == "ct" {
				ct = src.Status
				if !s.logged && !strings.Contains(src.Detail, "absent") {
					t.Errorf("%s: the ct source does not say the certificate is absent: %s", s.host, src.Detail)
				}
			}
		}
		switch {
		case s.logged && (code != cli.ExitOK || ct != "pass"):
			t.Errorf("%s, logged by TesseraCT: exit %d, ct %s; want %d, pass\n%s\n%s", s.host, code, ct, cli.ExitOK, out, errs)
		case !s.logged && (code != cli.ExitNegative || ct != "fail"):
			t.Errorf("%s, never logged: exit %d, ct %s; want %d, fail\n%s\n%s", s.host, code, ct, cli.ExitNegative, out, errs)
		}
	}
}
