package verify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/verifytest"
)

// meshChain returns a leaf and n CAs all named "mesh" and issued by that
// name, each with its own key and ext tiny extensions, all signed by a key
// none of them holds: every ordering of the CAs is a path by name, and
// none reaches a root.
func meshChain(t *testing.T, n, ext int) [][]byte {
	t.Helper()
	junk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer := &x509.Certificate{Subject: pkix.Name{CommonName: "mesh"}}
	var extra []pkix.Extension
	for i := range ext {
		extra = append(extra, pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 2, i}})
	}
	now := time.Now()
	serial := int64(0)
	issue := func(tmpl *x509.Certificate) []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), junk)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	chain := [][]byte{issue(&x509.Certificate{Subject: pkix.Name{CommonName: "www.example.test"}, DNSNames: []string{"www.example.test"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})}
	for range n {
		chain = append(chain, issue(&x509.Certificate{Subject: pkix.Name{CommonName: "mesh"}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign, ExtraExtensions: extra}))
	}
	return chain
}

// A path-building mesh is answered by the webpki helper with limits at
// once, before webpki builds paths: webpki's own budget allows 200,000
// candidates tried, each step re-parsing the whole chain, which for the
// extension-dense mesh is tens of seconds of CPU (the helper was killed
// at the timeout). An ordinary chain still verifies on the same helper.
func TestWebpkiRefusesMesh(t *testing.T) {
	const timeout = 5 * time.Second
	bs, missing, err := verify.Open(context.Background(), verify.Options{Names: []string{"webpki"}, Dirs: verifytest.Dirs(), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer verify.CloseAll(bs)
	if len(missing) > 0 {
		if os.Getenv("PKIE_REQUIRE_VERIFIERS") == "1" {
			t.Fatalf("webpki: %s", missing[0].Why)
		}
		t.Skipf("webpki skipped: %s", missing[0].Why)
	}
	webpki := bs[0]
	roots := chain(t).Roots
	for _, tc := range []struct {
		name   string
		chain  [][]byte
		minLen int // DER bytes, so the shape stays the one described
	}{
		// The review's shape: 62 small CAs, about 21 KB.
		{"mesh of 62", meshChain(t, 62, 0), 20 << 10},
		// Fewer CAs, each with 3000 extensions: many times the old
		// helper's timeout of work, in about 500 KB.
		{"dense mesh of 10", meshChain(t, 10, 3000), 400 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, c := range tc.chain {
				n += len(c)
			}
			if n < tc.minLen {
				t.Fatalf("the mesh is %d bytes, want at least %d", n, tc.minLen)
			}
			r := &verify.Request{Roots: roots, Chain: tc.chain, Host: "www.example.test", Time: time.Now(), Purpose: verify.Server}
			start := time.Now()
			res, err := webpki.Verify(context.Background(), r)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("after %v: %v", took, err)
			}
			t.Logf("%d bytes: %s in %v: %s", n, res.Code, took, res.Reason)
			if res.Valid || res.Code != verify.Limits || !strings.Contains(res.Reason, "refused by the helper before webpki ran") {
				t.Errorf("got %+v, want limits from the helper's bound", res)
			}
			if res.Phases.Verify != 0 {
				t.Errorf("webpki built paths for %v; want the request refused before", res.Phases.Verify)
			}
		})
	}
	res, err := webpki.Verify(context.Background(), chain(t))
	if err != nil || !res.Valid || res.Code != verify.OK {
		t.Fatalf("an ordinary chain after the meshes: %+v, %v", res, err)
	}
}
