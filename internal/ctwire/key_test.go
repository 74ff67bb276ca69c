package ctwire

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	ctx509 "github.com/google/certificate-transparency-go/x509"
)

// testChains issues, under a fresh CA, a precertificate, the final
// certificate with an embedded SCT list carrying the same fields, and a
// plain certificate with no SCT list.
type testChains struct {
	ca, precert, final, plain []byte
}

var (
	oidPoison  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	oidSCTs    = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	testNotBef = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func newTestChains(t testing.TB) testChains {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: testNotBef, NotAfter: testNotBef.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := func(serial int64, ext *pkix.Extension) []byte {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf.example"},
			DNSNames:  []string{"leaf.example"},
			NotBefore: testNotBef, NotAfter: testNotBef.AddDate(0, 3, 0),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if ext != nil {
			tmpl.ExtraExtensions = []pkix.Extension{*ext}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &leafKey.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	null, _ := asn1.Marshal(asn1.NullRawValue)
	sctList, _ := asn1.Marshal([]byte{0, 3, 0, 1, 0xaa}) // contents are not parsed
	return testChains{
		ca:      caDER,
		precert: leaf(7, &pkix.Extension{Id: oidPoison, Critical: true, Value: null}),
		final:   leaf(7, &pkix.Extension{Id: oidSCTs, Value: sctList}),
		plain:   leaf(8, nil),
	}
}

func TestChainKeyMatchesPrecertEntry(t *testing.T) {
	c := newTestChains(t)
	pre, err := ctx509.ParseCertificate(c.precert)
	if err != nil {
		t.Fatal(err)
	}
	// The precert_entry a log records: ct-go's precert TBS and the CA's
	// key hash.
	tbs, err := ctx509.BuildPrecertTBS(pre.RawTBSCertificate, nil)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(c.ca)
	ikh := sha256.Sum256(caCert.RawSubjectPublicKeyInfo)
	want := PrecertKey(ikh, tbs)

	got, err := ChainKey([][]byte{c.final, c.ca})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ChainKey(final, ca) = %x, want the precert entry's key %x", got, want)
	}
	// ct-go's own reconstruction of the final certificate's leaf agrees.
	fin, _ := ctx509.ParseCertificate(c.final)
	caGo, _ := ctx509.ParseCertificate(c.ca)
	mtl, err := ct.MerkleTreeLeafForEmbeddedSCT([]*ctx509.Certificate{fin, caGo}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if k := PrecertKey(mtl.TimestampedEntry.PrecertEntry.IssuerKeyHash, mtl.TimestampedEntry.PrecertEntry.TBSCertificate); k != want {
		t.Errorf("ct-go's embedded-SCT leaf gives key %x, want %x", k, want)
	}
	if ikh2, err := SPKIHash(c.ca); err != nil || ikh2 != ikh {
		t.Errorf("SPKIHash(ca) = %x, %v; want %x", ikh2, err, ikh)
	}

	// A mirror that saw the final certificate as an x509_entry inserts
	// both its CertKey and the key ChainKey computes.
	keys := EntryKeys(&Entry{Certificate: c.final, ChainIssuerKeyHash: &ikh})
	if len(keys) != 2 || keys[0] != CertKey(c.final) || keys[1] != want {
		t.Errorf("EntryKeys(final as x509_entry) = %x, want [CertKey, %x]", keys, want)
	}
	if keys := EntryKeys(&Entry{Certificate: c.final}); len(keys) != 1 {
		t.Errorf("EntryKeys without the issuer's key hash = %d keys, want 1", len(keys))
	}
	if keys := EntryKeys(&Entry{Precert: true, IssuerKeyHash: ikh, Certificate: tbs}); len(keys) != 1 || keys[0] != want {
		t.Errorf("EntryKeys(precert_entry) = %x, want [%x]", keys, want)
	}
}

func TestChainKey(t *testing.T) {
	c := newTestChains(t)
	for _, tc := range []struct {
		name    string
		chain   [][]byte
		want    [32]byte
		wantErr bool
	}{
		{name: "plain", chain: [][]byte{c.plain, c.ca}, want: CertKey(c.plain)},
		{name: "plain alone", chain: [][]byte{c.plain}, want: CertKey(c.plain)},
		{name: "precert itself", chain: [][]byte{c.precert}, want: CertKey(c.precert)},
		{name: "embedded SCTs without issuer", chain: [][]byte{c.final}, wantErr: true},
		{name: "embedded SCTs, garbage issuer", chain: [][]byte{c.final, []byte("junk")}, wantErr: true},
		{name: "empty", chain: nil, wantErr: true},
		{name: "garbage leaf", chain: [][]byte{[]byte{0x30, 0x03, 0x02, 0x01, 0x01}}, wantErr: true},
		{name: "trailing bytes", chain: [][]byte{append(bytes.Clone(c.plain), 0)}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChainKey(tc.chain)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ChainKey = %x, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ChainKey = %x, %v; want %x", got, err, tc.want)
			}
		})
	}
	if CertKey(c.plain) == PrecertKey(sha256.Sum256(nil), c.plain) {
		t.Error("CertKey and PrecertKey agree")
	}
}

func FuzzChainKey(f *testing.F) {
	c := newTestChains(f)
	f.Add(c.final, c.ca)
	f.Add(c.plain, c.ca)
	f.Add([]byte{0x30, 0x00}, []byte{})
	f.Fuzz(func(t *testing.T, leaf, issuer []byte) {
		k, err := ChainKey([][]byte{leaf, issuer})
		if err == nil && k == ([32]byte{}) {
			t.Fatal("zero key without an error")
		}
		EntryKeys(&Entry{Certificate: leaf})
		HasEmbeddedSCTs(leaf)
	})
}

// TestRemoveSCTListEdges: an SCT list that is the only extension leaves an
// empty extensions field, as ct-go's precertificate TBSCertificate (what
// logs record) does; two SCT lists are an error.
func TestRemoveSCTListEdges(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	issue := func(exts ...pkix.Extension) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "bare"},
			NotBefore: testNotBef, NotAfter: testNotBef.AddDate(0, 1, 0), ExtraExtensions: exts}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	null, _ := asn1.Marshal(asn1.NullRawValue)
	list, _ := asn1.Marshal([]byte{0, 0})
	pre, err := ctx509.ParseCertificate(issue(pkix.Extension{Id: oidPoison, Critical: true, Value: null}))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ctx509.BuildPrecertTBS(pre.RawTBSCertificate, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbs, _ := certTBS(issue(pkix.Extension{Id: oidSCTs, Value: list}))
	got, found, err := removeSCTList(tbs)
	if err != nil || !found || !bytes.Equal(got, want) {
		t.Fatalf("removeSCTList = found %v, %v; equal to ct-go's precert TBS: %v\n%x\n%x", found, err, bytes.Equal(got, want), got, want)
	}
	tbs, _ = certTBS(issue(pkix.Extension{Id: oidSCTs, Value: list}, pkix.Extension{Id: oidSCTs, Value: list}))
	if _, _, err := removeSCTList(tbs); err == nil {
		t.Fatal("two SCT list extensions accepted")
	}
}

// TestPrecertTBS: the final certificate's TBSCertificate without its SCT
// list is the precertificate's as ct-go builds it for a precert_entry; a
// certificate with no SCT list comes back whole and unflagged.
func TestPrecertTBS(t *testing.T) {
	c := newTestChains(t)
	pre, err := ctx509.ParseCertificate(c.precert)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ctx509.BuildPrecertTBS(pre.RawTBSCertificate, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := PrecertTBS(c.final)
	if err != nil || !found || !bytes.Equal(got, want) {
		t.Errorf("PrecertTBS(final) = found %t, %v; equal to the precert entry's TBS: %t", found, err, bytes.Equal(got, want))
	}
	plain, _ := x509.ParseCertificate(c.plain)
	got, found, err = PrecertTBS(c.plain)
	if err != nil || found || !bytes.Equal(got, plain.RawTBSCertificate) {
		t.Errorf("PrecertTBS(plain) = found %t, %v; want its TBSCertificate unchanged", found, err)
	}
	if _, _, err := PrecertTBS([]byte{0x30, 0x00}); err == nil {
		t.Error("PrecertTBS accepted an empty SEQUENCE")
	}
}
