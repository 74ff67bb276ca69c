package revocation_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	rev "github.com/pkie/pkie/internal/pkies/revocation"
	. "github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/sortedtree"
)

func newCA(t testing.TB, name string) *testbed.CA {
	t.Helper()
	root, err := testbed.NewRootCA(name+" Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := root.NewIntermediate(name, testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// makeCRL has ca revoke serials.
func makeCRL(t testing.TB, ca *testbed.CA, number int64, serials ...*big.Int) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(number), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(24 * time.Hour)}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newAuthority(t *testing.T, now func() time.Time) (*Authority, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := Init(dir, "pkie.test/revocation"); err != nil {
		t.Fatal(err)
	}
	a, err := Open(dir, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, dir
}

func openCP(t *testing.T, a *Authority) *checkpoint.Head {
	t.Helper()
	msg, err := a.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.OpenHead(msg, a.Verifier(), time.Hour, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestCRLIngest(t *testing.T) {
	ctx := context.Background()
	a, dir := newAuthority(t, nil)
	ca := newCA(t, "CRL Test CA")
	var leaves []*testbed.Leaf
	for range 4 {
		l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"r.test"}})
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, l)
	}
	if cp := openCP(t, a); cp.Size != 0 {
		t.Fatalf("fresh authority publishes %d keys", cp.Size)
	}
	crl := makeCRL(t, ca, 1, leaves[0].Cert.SerialNumber, leaves[1].Cert.SerialNumber)
	// PEM works as well as DER.
	pemCRL := pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: crl})
	up, err := a.AddCRL(ctx, pemCRL, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if up.Added != 2 || up.Size != 2 {
		t.Fatalf("update %+v, want 2 added", up)
	}
	cp := openCP(t, a)
	var keys [][32]byte
	for _, l := range leaves[:2] {
		k, err := rev.CertKey(l.Cert, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	want := sortedtree.Build(keys)
	if cp.Size != 2 || cp.Root != want.Root() {
		t.Fatalf("published size %d root %x, want 2 %x", cp.Size, cp.Root, want.Root())
	}
	for i, l := range leaves {
		k, _ := rev.CertKey(l.Cert, ca.Cert)
		if got := want.Contains(k); got != (i < 2) {
			t.Errorf("leaf %d: revoked %v", i, got)
		}
	}
	// The same CRL again adds nothing; a later CRL adds one more.
	if up, err := a.AddCRL(ctx, crl, ca.Cert); err != nil || up.Added != 0 || up.Already != 2 {
		t.Fatalf("re-ingest: %+v %v", up, err)
	}
	crl2 := makeCRL(t, ca, 2, leaves[0].Cert.SerialNumber, leaves[1].Cert.SerialNumber, leaves[2].Cert.SerialNumber)
	if up, err := a.AddCRL(ctx, crl2, ca.Cert); err != nil || up.Added != 1 || up.Size != 3 {
		t.Fatalf("second CRL: %+v %v", up, err)
	}
	// Restart: nothing lost.
	a.Close()
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, _ := b.Size(ctx); n != 3 {
		t.Fatalf("after restart %d revoked keys, want 3", n)
	}
	if cp := openCP(t, b); cp.Size != 3 {
		t.Fatalf("after restart the checkpoint covers %d keys", cp.Size)
	}
}

func TestCRLSignatureChecked(t *testing.T) {
	ca := newCA(t, "Honest CA")
	impostor := newCA(t, "Honest CA") // same name, different key
	other := newCA(t, "Other CA")
	serial := big.NewInt(77)
	good := makeCRL(t, ca, 1, serial)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-3] ^= 0x40
	for name, tc := range map[string]struct {
		crl    []byte
		issuer *x509.Certificate
	}{
		"signed by an impostor with the same name": {makeCRL(t, impostor, 1, serial), ca.Cert},
		"signed by another CA":                     {makeCRL(t, other, 1, serial), ca.Cert},
		"signature bytes changed":                  {flipped, ca.Cert},
		"not a CRL":                                {[]byte("hello"), ca.Cert},
		"certificate instead of CRL":               {ca.Cert.Raw, ca.Cert},
		"no issuer":                                {good, nil},
	} {
		if _, err := ParseCRL(tc.crl, tc.issuer); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseCRL(good, ca.Cert); err != nil {
		t.Errorf("honest CRL rejected: %v", err)
	}
	// Nothing from a rejected CRL reaches the tree.
	a, _ := newAuthority(t, nil)
	if _, err := a.AddCRL(context.Background(), flipped, ca.Cert); err == nil {
		t.Fatal("AddCRL accepted a bad signature")
	}
	if n, _ := a.Size(context.Background()); n != 0 {
		t.Fatalf("%d keys after a rejected CRL", n)
	}
}

func TestSerialListsAndRepublish(t *testing.T) {
	ctx := context.Background()
	clock := time.Now().Add(-10 * time.Minute)
	now := func() time.Time { return clock }
	a, _ := newAuthority(t, now)
	ca := newCA(t, "Serial CA")
	kid, err := rev.IssuerKeyID(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	serials, err := ParseSerials([]byte("# revoked\n0a\n0x0B\n01:00\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(serials) != 3 || serials[2].Int64() != 256 {
		t.Fatalf("parsed %v", serials)
	}
	before, _ := a.Checkpoint(ctx)
	clock = clock.Add(time.Minute)
	up, err := a.AddSerials(ctx, kid, serials, "test")
	if err != nil || up.Added != 3 {
		t.Fatalf("%+v %v", up, err)
	}
	after, _ := a.Checkpoint(ctx)
	if string(before) == string(after) || up.Checkpoint != string(after) {
		t.Fatal("update did not republish")
	}
	// A periodic publish with no change still re-signs with a new time.
	clock = clock.Add(time.Minute)
	p, err := a.Publish(ctx)
	if err != nil || p.Size != 3 || !p.Time.Equal(clock) {
		t.Fatalf("publish: %+v %v", p, err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"s.test"}, Serial: 11})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := rev.CertKey(leaf.Cert, nil)
	keys, _ := a.Feed().Keys(ctx, 0, 10)
	found := false
	for _, kk := range keys {
		found = found || kk == k
	}
	if !found {
		t.Error("serial 0x0b of the CA is not keyed like its certificate")
	}
	for _, bad := range []string{"zz", "-1", "12 34"} {
		if _, err := ParseSerials([]byte(bad)); err == nil {
			t.Errorf("serial list %q accepted", bad)
		}
	}
}

func TestKeyDefinition(t *testing.T) {
	// Key = SHA-256(len(kid) || kid || serial bytes): different splits of
	// the same bytes must differ.
	k1, _ := rev.Key([]byte{1, 2}, big.NewInt(3))
	k2, _ := rev.Key([]byte{1}, big.NewInt(0x0203))
	if k1 == k2 {
		t.Fatal("(issuer, serial) pairs collide across the boundary")
	}
	if _, err := rev.Key(nil, big.NewInt(1)); err == nil {
		t.Error("empty issuer key identifier accepted")
	}
	if _, err := rev.Key([]byte{1}, big.NewInt(-1)); err == nil {
		t.Error("negative serial accepted")
	}
}

// TestOpenRefusesExposedKey: an authority key its group or others can read
// lets them sign "not revoked" trees in the authority's name, so Open
// refuses it and says how to fix it.
func TestOpenRefusesExposedKey(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o700, true},
		{0o640, false}, {0o604, false}, {0o644, false}, {0o660, false}, {0o602, false}, {0o666, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Init(dir, "pkie.test/revocation"); err != nil {
				t.Fatal(err)
			}
			key := filepath.Join(dir, KeyFile)
			if err := os.Chmod(key, tc.mode); err != nil {
				t.Fatal(err)
			}
			a, err := Open(dir, Options{})
			if tc.ok {
				if err != nil {
					t.Fatalf("Open with key mode %v: %v", tc.mode, err)
				}
				a.Close()
				return
			}
			if err == nil {
				a.Close()
				t.Fatalf("Open accepted a key of mode %v", tc.mode)
			}
			for _, want := range []string{key, "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}
