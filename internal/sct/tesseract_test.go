package sct

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/http"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	cttls "github.com/google/certificate-transparency-go/tls"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testpki"
)

var oidPoison = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}

// TestTesseraCT runs a real static-ct-api log: a CA submits a
// precertificate with add-pre-chain, embeds the SCT in the final
// certificate, and submits that with add-chain (the SCT a server would send
// in the TLS extension). Both SCTs verify with the log's key, as pkie and
// ctutil both say; each carries a leaf_index, and the entry pkie rebuilds
// from the final certificate alone hashes to the entry TesseraCT wrote at
// that index in its data tile.
func TestTesseraCT(t *testing.T) {
	tl := tesseracttest.Start(t, tesseracttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := client.New(tl.SubmissionURL, http.DefaultClient, jsonclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inter, err := tl.CA.NewIntermediate("SCT test intermediate", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	key, err := testpki.NewKey(testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sct.tesseract.test"},
		DNSNames: []string{"sct.tesseract.test"}, NotBefore: time.Now().Add(-time.Hour).Truncate(time.Second),
		NotAfter: time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, AuthorityKeyId: inter.Cert.SubjectKeyId}
	issue := func(ext pkix.Extension) []ct.ASN1Cert {
		c := *tmpl
		c.ExtraExtensions = []pkix.Extension{ext}
		der, err := x509.CreateCertificate(rand.Reader, &c, inter.Cert, key.Public(), inter.Key)
		if err != nil {
			t.Fatal(err)
		}
		chain := []ct.ASN1Cert{{Data: der}}
		for _, c := range inter.Chain() {
			chain = append(chain, ct.ASN1Cert{Data: c})
		}
		return chain
	}

	pre, err := lc.AddPreChain(ctx, issue(pkix.Extension{Id: oidPoison, Critical: true, Value: asn1.NullBytes}))
	if err != nil {
		t.Fatalf("add-pre-chain: %v", err)
	}
	preRaw, err := cttls.Marshal(*pre)
	if err != nil {
		t.Fatal(err)
	}
	list, err := MarshalList([][]byte{preRaw})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := asn1.Marshal(list)
	finalChain := issue(pkix.Extension{Id: oidEmbeddedSCTs, Value: v})
	x509SCT, err := lc.AddChain(ctx, finalChain)
	if err != nil {
		t.Fatalf("add-chain: %v", err)
	}
	tlsRaw, err := cttls.Marshal(*x509SCT)
	if err != nil {
		t.Fatal(err)
	}

	leaf, err := x509.ParseCertificate(finalChain[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	scts, errs := Collect(leaf, [][]byte{tlsRaw}, nil)
	if len(errs) > 0 || len(scts) != 2 {
		t.Fatalf("Collect = %d SCTs, %v; want 2", len(scts), errs)
	}
	cp, _, err := tl.WaitSize(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	tile, err := ctwire.ParseDataTile(mustRead(t)(tl.ReadEntryBundle(ctx, 0, uint8(cp.Size))))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scts {
		if s.LogID != tl.LogID {
			t.Fatalf("%s SCT names log %x, TesseraCT is %x", s.Source, s.LogID, tl.LogID)
		}
		if err := pkieVerify(s, tl.PublicKey, leaf, inter.Cert); err != nil {
			t.Errorf("%s SCT: %v", s.Source, err)
		}
		if err := ctutilVerify(t, tl.PublicKey, s, leaf, inter.Cert); err != nil {
			t.Errorf("%s SCT: ctutil: %v", s.Source, err)
		}
		idx, ok, err := s.LeafIndex()
		if err != nil || !ok || idx >= uint64(len(tile)) {
			t.Fatalf("%s SCT: LeafIndex = %d, %t, %v (tile of %d)", s.Source, idx, ok, err, len(tile))
		}
		want, err := tile[idx].LeafHash()
		if err != nil {
			t.Fatal(err)
		}
		e, err := EntryFor(s, leaf, inter.Cert)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.LeafHash(s); got != want {
			t.Errorf("%s SCT: LeafHash %x, TesseraCT's entry %d hashes to %x", s.Source, got, idx, want)
		}
		if tile[idx].Precert != (s.Source == Embedded) {
			t.Errorf("%s SCT: entry %d precert=%t", s.Source, idx, tile[idx].Precert)
		}
	}
}

func mustRead(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}
