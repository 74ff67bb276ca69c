package revocation_test

import (
	"testing"

	. "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCertKeyChecksIssuer: for a leaf without an authority key identifier,
// CertKey takes the key identifier from the issuer it is given only if that
// issuer signed the leaf.
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

func TestCertKeyChecksIssuer(t *testing.T) {
	ca, other := newCA(t, "Signer"), newCA(t, "Unrelated")
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"old.test"}, OmitAKI: true})
	if err != nil {
		t.Fatal(err)
	}
	kid, err := IssuerKeyID(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Key(kid, leaf.Cert.SerialNumber)
	if got, err := CertKey(leaf.Cert, ca.Cert); err != nil || got != want {
		t.Errorf("issuer that signed the leaf: %x, %v; want %x", got, err, want)
	}
	if got, err := CertKey(leaf.Cert, other.Cert); err == nil {
		t.Errorf("unrelated issuer accepted: key %x", got)
	}
	if _, err := CertKey(leaf.Cert, nil); err == nil {
		t.Error("no issuer accepted")
	}
}
