package ctfollow_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"

	ct "github.com/google/certificate-transparency-go"
	ctclient "github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
)

// TestFollowTesseraCT follows TesseraCT, a static-ct-api log nobody here
// wrote, across two syncs: the follower verifies its checkpoints, tiles
// and issuers, and its keys file holds the key a client computes for
// every certificate submitted, including a final certificate whose
// precertificate alone was logged.
func TestFollowTesseraCT(t *testing.T) {
	tl := tesseracttest.Start(t, tesseracttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := ctclient.New(tl.SubmissionURL, http.DefaultClient, jsonclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inter, err := tl.CA.NewIntermediate("ctfollow TesseraCT Intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	var lookups [][][]byte // chains a client would look up
	submitted := 0
	submitPlain := func(n int) {
		for i := 0; i < n; i++ {
			leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("h%d.follow.test", submitted)}})
			if err != nil {
				t.Fatal(err)
			}
			var chain []ct.ASN1Cert
			for _, der := range leaf.Chain {
				chain = append(chain, ct.ASN1Cert{Data: der})
			}
			if _, err := lc.AddChain(ctx, chain); err != nil {
				t.Fatalf("add-chain: %v\n%s", err, tl.Output())
			}
			lookups = append(lookups, leaf.Chain)
			submitted++
		}
	}
	submitPlain(5)

	// A precertificate; the final certificate (never logged) is looked up.
	pre, final := precertPair(t, inter, "embedded.follow.test")
	var pchain []ct.ASN1Cert
	for _, der := range pre {
		pchain = append(pchain, ct.ASN1Cert{Data: der})
	}
	if _, err := lc.AddPreChain(ctx, pchain); err != nil {
		t.Fatalf("add-pre-chain: %v\n%s", err, tl.Output())
	}
	submitted++
	lookups = append(lookups, final)

	dir := t.TempDir()
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, URL: tl.MonitoringURL, Key: tl.VerifierKey, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := func() {
		t.Helper()
		if _, _, err := tl.WaitSize(ctx, uint64(submitted)); err != nil {
			t.Fatal(err)
		}
		st, err := f.Sync(ctx, nil)
		if err != nil {
			t.Fatalf("following TesseraCT: %v", err)
		}
		if st.Size != uint64(submitted) {
			t.Fatalf("followed TesseraCT to %d entries, %d were submitted", st.Size, submitted)
		}
		keys, err := os.ReadFile(f.KeysPath())
		if err != nil {
			t.Fatal(err)
		}
		for i, chain := range lookups {
			k, err := ctwire.ChainKey(chain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(keys, k[:]) {
				t.Errorf("submission %d: the key a client computes is not in the keys file", i)
			}
		}
	}
	check()
	submitPlain(4)
	check()
}

// precertPair issues, under ca, a precertificate and the final
// certificate it announces, each as a chain, leaf first.
func precertPair(t *testing.T, ca *testbed.CA, host string) (pre, final [][]byte) {
	t.Helper()
	key, err := testbed.NewKey(testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore:   time.Now().Add(-time.Hour).Truncate(time.Second),
		NotAfter:    time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	issue := func(ext pkix.Extension) [][]byte {
		c := tmpl
		c.ExtraExtensions = []pkix.Extension{ext}
		der, err := x509.CreateCertificate(rand.Reader, &c, ca.Cert, key.Public(), ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		return append([][]byte{der}, ca.Chain()...)
	}
	sctList, _ := asn1.Marshal([]byte{0, 3, 0, 1, 0xaa}) // the list's contents do not enter the key
	return issue(pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}, Critical: true, Value: asn1.NullBytes}),
		issue(pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: sctList})
}
