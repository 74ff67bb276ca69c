package verifybench

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// keyAlg names the key type of c's public key as testbed does.
func keyAlg(t *testing.T, c *x509.Certificate) testbed.KeyAlg {
	t.Helper()
	switch k := c.PublicKey.(type) {
	case *ecdsa.PublicKey:
		return testbed.KeyAlg("ecdsa-p" + k.Curve.Params().Name[2:])
	case *rsa.PublicKey:
		switch k.N.BitLen() {
		case 2048:
			return testbed.RSA2048
		case 4096:
			return RSA4096
		}
	case ed25519.PublicKey:
		return testbed.Ed25519
	}
	t.Fatalf("unexpected key %T", c.PublicKey)
	return ""
}

// TestIssueShape checks that every shape's path has the key types it
// names, in order, sends what it says, and verifies under its root.
func TestIssueShape(t *testing.T) {
	for _, s := range []Shape{Shapes[1], Shapes[7], {Name: "p384-4096-2", Leaf: testbed.ECDSAP384, Root: RSA4096, SendRoot: true}} {
		t.Run(s.Name, func(t *testing.T) {
			ch, err := IssueShape(s, "a.example")
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]testbed.KeyAlg{s.Leaf}, s.Intermediates...), s.Root)
			if len(ch.Path) != s.Depth() || len(want) != s.Depth() {
				t.Fatalf("path of %d, want %d", len(ch.Path), s.Depth())
			}
			for i, c := range ch.Path {
				if got := keyAlg(t, c); got != want[i] {
					t.Errorf("path[%d] is %s, want %s", i, got, want[i])
				}
			}
			if len(ch.Sent()) != s.Sent() {
				t.Errorf("sends %d, want %d", len(ch.Sent()), s.Sent())
			}
			inter := x509.NewCertPool()
			for _, c := range ch.Path[1 : len(ch.Path)-1] {
				inter.AddCert(c)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ch.Root.Cert)
			if _, err := ch.Path[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: "a.example"}); err != nil {
				t.Errorf("crypto/x509: %v", err)
			}
		})
	}
}

// TestCheckSignatures checks that both ceilings check every link: a path
// with one signature broken anywhere fails, serially and in parallel.
func TestCheckSignatures(t *testing.T) {
	ch, err := IssueShape(Shapes[6], "a.example") // rsa2048-4: three links
	if err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func([]*x509.Certificate) error{"serial": CheckSignaturesSerial, "parallel": CheckSignaturesParallel} {
		if err := check(ch.Path); err != nil {
			t.Errorf("%s: good path: %v", name, err)
		}
		for i := 0; i+1 < len(ch.Path); i++ {
			bad := append([]*x509.Certificate(nil), ch.Path...)
			c := *bad[i]
			c.Signature = append([]byte(nil), c.Signature...)
			c.Signature[len(c.Signature)/2] ^= 1
			bad[i] = &c
			if err := check(bad); err == nil {
				t.Errorf("%s: signature of link %d broken, no error", name, i+1)
			}
		}
	}
}
