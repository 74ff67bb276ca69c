package cli

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/forwarder"
	"github.com/pkie/pkie/internal/pecwire"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// TestForwarderServe: `pkie cloud init` makes the HPKE key 0600 and `pkie
// cloud bundle` publishes it; `pkie forwarder init|serve|bundle` run a
// forwarder relaying to that cloud; a client in privacy mode, pinning both
// bundles, gets the cloud's notary proof for a site through the forwarder,
// and it verifies. The forwarder's /healthz and /metrics answer.
func TestForwarderServe(t *testing.T) {
	root, err := testbed.NewRootCA("Forwarder Test Root", testbed.ECDSAP256)
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
		t.Fatalf("cloud init: %s", errs)
	}
	if fi, err := os.Stat(filepath.Join(data, cloud.FileHPKE)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hpke key: %v %v", fi, err)
	}
	nconf := filepath.Join(dir, "notary.json")
	conf := notaryprover.ProverConfig{AllowPrivate: true, Resolve: map[string]string{"www.example.test:443": site.Addr.String()}}
	if err := os.WriteFile(nconf, conf.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "cloud", "serve", "--data", data, "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "", "--pkie", "notary="+nconf)
	quicAddr := strings.TrimPrefix(c.waitLine(t, "listening quic"), " ")
	tcpAddr := c.waitLine(t, "listening tcp")
	code, out, errs := runCLI(t, "cloud", "bundle", "--data", data, "--point", quicAddr+","+tcpAddr)
	if code != 0 {
		t.Fatalf("cloud bundle: %s", errs)
	}
	cloudB, err := pecwire.ParseBundle([]byte(out))
	if err != nil || cloudB.HPKE == nil {
		t.Fatalf("cloud bundle %s: %v", out, err)
	}
	cloudFile := filepath.Join(dir, "cloud.bundle")
	os.WriteFile(cloudFile, []byte(out), 0o644)

	fdata := filepath.Join(dir, "fwd")
	if code, _, errs := runCLI(t, "forwarder", "init", "--data", fdata, "--name", "fwd.test"); code != 0 {
		t.Fatalf("forwarder init: %s", errs)
	}
	for _, f := range []string{forwarder.FileKey, forwarder.FileEphID} {
		if fi, err := os.Stat(filepath.Join(fdata, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	if code, _, errs := runCLI(t, "forwarder", "init", "--data", fdata); code == 0 || !strings.Contains(errs, "refusing to overwrite") {
		t.Fatalf("second init: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "forwarder", "serve", "--data", fdata); code != 2 || !strings.Contains(errs, "--cloud") {
		t.Fatalf("serve without --cloud: %d %s", code, errs)
	}
	f := startChild(t, "forwarder", "serve", "--data", fdata, "--cloud", cloudFile, "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0")
	fq := strings.TrimPrefix(f.waitLine(t, "listening quic"), " ")
	ft := f.waitLine(t, "listening tcp")
	fh := f.waitLine(t, "listening http")
	code, out, errs = runCLI(t, "forwarder", "bundle", "--data", fdata, "--point", fq+","+ft)
	if code != 0 {
		t.Fatalf("forwarder bundle: %s", errs)
	}
	fwdB, err := pecwire.ParseBundle([]byte(out))
	if err != nil || fwdB.Name != "fwd.test" || fwdB.HPKE != nil {
		t.Fatalf("forwarder bundle %s: %v", out, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := pkienotary.NewVerifier(cloudB.Verifiers["notary"])
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{pec.TransportQUIC, pec.TransportTCP} {
		cl, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{cloudB}, Forwarder: fwdB, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		p, err := cl.Submit(ctx, pec.Submission{ServerName: "www.example.test", Port: 443, Chain: leaf.Chain,
			Requests: []pkie.Request{{ID: pkie.Notary}}, Budget: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := p.Wait(ctx)[pkie.Notary]
		if o.Status != pec.ProofOK {
			t.Fatalf("%s: %+v", tr, o)
		}
		certs := make([]*x509.Certificate, len(leaf.Chain))
		for i, der := range leaf.Chain {
			certs[i], _ = x509.ParseCertificate(der)
		}
		sub := pkie.Subject{ServerName: "www.example.test", Port: 443, Chain: leaf.Chain, Certs: certs}
		if a := v.Verify(ctx, &pkie.VerifyRequest{Subject: sub, Proof: o.Proof, Now: time.Now()}); a.Status != pkie.Pass {
			t.Fatalf("%s: notary proof through the forwarder: %s %s", tr, a.Status, a.Reason)
		}
	}
	for path, want := range map[string]string{
		"/healthz": `"status":"ok"`,
		"/metrics": `pkie_forwarder_relayed_total{outcome="ok"} 2`,
	} {
		resp, err := http.Get("http://" + fh + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, lacks %s:\n%s", path, resp.StatusCode, want, body)
		}
	}
}
