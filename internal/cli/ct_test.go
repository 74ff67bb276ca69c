package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCTAuditMirror: pkie ct audit-mirror passes an honest mirror of a
// loopback static-ct-api log (exit 0, JSON on stdout, progress on
// stderr), refuses a mirror key that did not sign the head (exit 2), and
// names missing flags.
func TestCTAuditMirror(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey { k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader); return k }
	rootKey := key()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cli ct root"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour * 24 * 365), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, rootKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	ldir := filepath.Join(dir, "log")
	if _, err := ctlog.Init(ctx, ldir, "cli.pkie.test/log", ctlog.InitOptions{Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER})}); err != nil {
		t.Fatal(err)
	}
	l, err := ctlog.Open(ctx, ldir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 2; i < 5; i++ {
		leaf := &x509.Certificate{SerialNumber: big.NewInt(int64(i)), Subject: pkix.Name{CommonName: "leaf.test"}, DNSNames: []string{"leaf.test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, leaf, root, key().Public(), rootKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AddChain(ctx, [][]byte{der, rootDER}, false); err != nil {
			t.Fatal(err)
		}
	}
	r := l.Reader()
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, Key: l.VerifierKey(), Dir: filepath.Join(dir, "follow"),
		Fetch: &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st *ctfollow.State
	for i := 0; i < 50; i++ {
		if st, err = f.Sync(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if st.Size == 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mkey, err := ctmirror.GenerateKey(dir, "mirror.cli.pkie.test/ct")
	if err != nil {
		t.Fatal(err)
	}
	s, v, err := ctmirror.ReadKey(filepath.Join(dir, ctmirror.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	lv, _ := checkpoint.NewLogVerifier(l.VerifierKey())
	m, err := ctmirror.Open(ctmirror.Config{Dir: filepath.Join(dir, "mirror"), Signer: s, Verifier: v, LogKey: lv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Update(ctx, ctmirror.Snapshot{Checkpoint: st.Checkpoint, KeysPath: f.KeysPath(), KeyCount: st.KeyCount}); err != nil {
		t.Fatal(err)
	}
	logSrv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{Extension: http.StripPrefix("/pkie/sorted", m.Handler(ctmirror.HandlerOptions{}))}))
	defer logSrv.Close()

	code, out, errs := runCLI(t, "ct", "audit-mirror", "--mirror", logSrv.URL+"/pkie/sorted", "--mirror-key", mkey, "--log", logSrv.URL, "--log-key", l.VerifierKey(), "--json")
	var res struct {
		OK   bool   `json:"ok"`
		Keys uint64 `json:"keys"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || !res.OK || res.Keys != 3 || !strings.Contains(errs, "following cli.pkie.test/log") {
		t.Fatalf("honest mirror: exit %d\n%s\n%s", code, out, errs)
	}
	_, other, _ := checkpoint.GenerateKey("mirror.cli.pkie.test/ct")
	if code, _, errs := runCLI(t, "ct", "audit-mirror", "--mirror", logSrv.URL+"/pkie/sorted", "--mirror-key", other, "--log", logSrv.URL, "--log-key", l.VerifierKey()); code != ExitUsage || !strings.Contains(errs, "signature") {
		t.Fatalf("another mirror key: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, "ct", "audit-mirror", "--mirror", logSrv.URL); code != ExitUsage || !strings.Contains(errs, "required") {
		t.Fatalf("missing flags: exit %d: %s", code, errs)
	}
}

// TestProverMirrorFlags: pkie prover mirror-key makes the mirror's key
// (0600) and prints the verifier key; prover serve --ct-log names what is
// missing.
func TestProverMirrorFlags(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "prover", "mirror-key", "--dir", dir, "--name", "mirror.cli.pkie.test/ct")
	if code != ExitOK || !strings.HasPrefix(out, "mirror.cli.pkie.test/ct+") {
		t.Fatalf("mirror-key: exit %d %q %s", code, out, errs)
	}
	if _, _, err := ctmirror.ReadKey(filepath.Join(dir, ctmirror.KeyFile)); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, "prover", "mirror-key", "--dir", dir, "--name", "mirror.cli.pkie.test/ct"); code != ExitUsage {
		t.Fatal("mirror-key replaced an existing key")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ct-log", "http://127.0.0.1:1"}, "--ct-log-key"},
		{[]string{"--ct-log", "http://127.0.0.1:1", "--ct-log-key", "k"}, "--ct-mirror-key"},
		{[]string{"--ct-log", "http://127.0.0.1:1", "--ct-log-key", "k", "--ct-mirror-key", "f"}, "--state"},
		{[]string{"--ct", "http://127.0.0.1:2"}, "flag provided but not defined: --ct"}, // pkie's old log's feed, gone
	} {
		code, _, errs := runCLI(t, append([]string{"prover", "serve", "--listen", "127.0.0.1:0"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestLogServesSortedTree: pkie log serve keeps the sorted tree of its
// certificates under /pkie/sorted/, its head signed with head.key and
// bound to the log's checkpoint; pkie ct audit-mirror rebuilds it from the
// log's tiles and agrees.
func TestLogServesSortedTree(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	ca, err := testbed.NewRootCA("CLI Sorted Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rootPEM := filepath.Join(dir, "root.pem")
	writePEM(t, rootPEM, "CERTIFICATE", ca.Cert.Raw)
	if code, _, errs := runCLI(t, "log", "init", "--data", logDir, "--origin", "sorted.cli.test/log", "--roots", rootPEM); code != 0 {
		t.Fatalf("log init: %s", errs)
	}
	logURL := "http://" + startChild(t, "log", "serve", "--data", logDir, "--listen", "127.0.0.1:0", "--sorted-interval", "100ms").waitLine(t, "listening ")
	var files []string
	for i := range 2 {
		l, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"sorted.cli.test"}})
		f := filepath.Join(dir, "chain"+string(rune('0'+i))+".pem")
		writePEM(t, f, "CERTIFICATE", l.Chain...)
		files = append(files, f)
	}
	if code, _, errs := runCLI(t, append([]string{"log", "add", "--url", logURL}, files...)...); code != 0 {
		t.Fatalf("log add: %s", errs)
	}
	var head string
	for i := 0; i < 100 && !strings.Contains(head, "\nlog sorted.cli.test/log 2 "); i++ {
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get(logURL + "/pkie/sorted/head")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		head = string(b)
	}
	if !strings.Contains(head, "\nsize 2\n") {
		t.Fatalf("the log's sorted tree never covered its 2 entries:\n%s", head)
	}
	code, out, errs := runCLI(t, "ct", "audit-mirror", "--mirror", logURL+"/pkie/sorted", "--mirror-key", "@"+filepath.Join(logDir, "head.pub"),
		"--log", logURL, "--log-key", "@"+filepath.Join(logDir, "log.pub"))
	if code != ExitOK || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit of the log's own sorted tree: exit %d %s %s", code, out, errs)
	}
}
