package cli

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

func writePEM(t *testing.T, path, typ string, ders ...[]byte) {
	t.Helper()
	var b []byte
	for _, d := range ders {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: d})...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLogAndRevocationCommands(t *testing.T) {
	dir := t.TempDir()
	logDir, revDir := filepath.Join(dir, "log"), filepath.Join(dir, "rev")
	ca, err := testbed.NewRootCA("CLI Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rootPEM := filepath.Join(dir, "root.pem")
	writePEM(t, rootPEM, "CERTIFICATE", ca.Cert.Raw)
	if code, _, errs := runCLI(t, "log", "init", "--data", logDir, "--origin", "cli.test/log", "--roots", rootPEM); code != 0 {
		t.Fatalf("log init: %d %s", code, errs)
	}
	for _, f := range []string{"log.key", "head.key", "log.state"} {
		if fi, err := os.Stat(filepath.Join(logDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v %v", f, fi.Mode(), err)
		}
	}
	if code, _, _ := runCLI(t, "log", "init", "--data", logDir, "--origin", "cli.test/log"); code != ExitUsage {
		t.Error("second init over an existing key did not fail")
	}
	var files []string
	var leaves []*testbed.Leaf
	for i := range 3 {
		l, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"cli.test"}})
		leaves = append(leaves, l)
		f := filepath.Join(dir, "chain"+string(rune('0'+i))+".pem")
		writePEM(t, f, "CERTIFICATE", l.Chain...)
		files = append(files, f)
	}
	stranger, err := testbed.NewRootCA("Stranger Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	otherLeaf, _ := stranger.Issue(testbed.LeafOptions{DNSNames: []string{"other.test"}})
	otherFile := filepath.Join(dir, "stranger-chain.pem")
	writePEM(t, otherFile, "CERTIFICATE", otherLeaf.Chain...)
	mozDir := filepath.Join(dir, "mozlog")
	if code, _, errs := runCLI(t, "log", "init", "--data", mozDir, "--origin", "cli.test/moz"); code != 0 {
		t.Fatalf("log init: %d %s", code, errs)
	}
	logURL := "http://" + startChild(t, "log", "serve", "--data", logDir, "--listen", "127.0.0.1:0").waitLine(t, "listening ")
	mozURL := "http://" + startChild(t, "log", "serve", "--data", mozDir, "--listen", "127.0.0.1:0").waitLine(t, "listening ")
	// Which chains a log accepts: Mozilla's roots by default, or a PEM
	// file's. Refusals log nothing.
	for _, tt := range []struct {
		url, file string
	}{
		{mozURL, files[0]}, // a private root is not Mozilla's
		{logURL, otherFile},
	} {
		if code, _, errs := runCLI(t, "log", "add", "--url", tt.url, tt.file); code == 0 || !strings.Contains(errs, "accepted root") {
			t.Errorf("%s to %s: exit %d %q", tt.file, tt.url, code, errs)
		}
	}
	code, out, errs := runCLI(t, append([]string{"log", "add", "--url", logURL, "--json"}, files...)...)
	if code != 0 {
		t.Fatalf("log add: %d %s", code, errs)
	}
	var added []struct {
		LeafIndex uint64 `json:"leaf_index"`
		Timestamp uint64
		SCT       []byte
	}
	if err := json.Unmarshal([]byte(out), &added); err != nil || len(added) != 3 || added[2].LeafIndex != 2 || added[0].Timestamp == 0 || len(added[0].SCT) == 0 {
		t.Fatalf("log add output %q: %v", out, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
	if code, _, errs := runCLI(t, "log", "add", "--url", logURL, bad); code != ExitUsage || !strings.Contains(errs, "certificate") {
		t.Errorf("bad chain: exit %d %q", code, errs)
	}

	if code, _, errs := runCLI(t, "revocation", "init", "--data", revDir, "--origin", "cli.test/rev"); code != 0 {
		t.Fatalf("revocation init: %s", errs)
	}
	issuer := filepath.Join(dir, "issuer.pem")
	writePEM(t, issuer, "CERTIFICATE", ca.Cert.Raw)
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: leaves[0].Cert.SerialNumber, RevocationTime: time.Now()}}}
	crlDER, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	crl := filepath.Join(dir, "ca.crl")
	writePEM(t, crl, "X509 CRL", crlDER)
	if code, out, errs := runCLI(t, "revocation", "add-crl", "--data", revDir, "--issuer", issuer, crl); code != 0 || !strings.Contains(out, "1 newly revoked") {
		t.Fatalf("add-crl: %d %s %s", code, out, errs)
	}
	other, _ := testbed.NewRootCA("CLI Other", testbed.ECDSAP256)
	otherPEM := filepath.Join(dir, "other.pem")
	writePEM(t, otherPEM, "CERTIFICATE", other.Cert.Raw)
	if code, _, errs := runCLI(t, "revocation", "add-crl", "--data", revDir, "--issuer", otherPEM, crl); code != ExitUsage || !strings.Contains(errs, "CRL") {
		t.Errorf("CRL with the wrong issuer: exit %d %q", code, errs)
	}
	serials := filepath.Join(dir, "serials.txt")
	os.WriteFile(serials, []byte(leaves[1].Cert.SerialNumber.Text(16)+"\n"), 0o644)
	code, out, errs = runCLI(t, "revocation", "add-serials", "--data", revDir, "--issuer", issuer, serials, "--json")
	if code != 0 || !strings.Contains(out, `"size": 2`) {
		t.Fatalf("add-serials: %d %s %s", code, out, errs)
	}
	if code, out, _ := runCLI(t, "revocation", "publish", "--data", revDir); code != 0 || !strings.Contains(out, "published 2") {
		t.Errorf("publish: %d %s", code, out)
	}
	if code, _, _ := runCLI(t, "prover", "serve", "--ct", "http://127.0.0.1:1"); code != ExitUsage {
		t.Error("prover without a pinned key did not fail with usage")
	}
}
