package roots

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// BenchmarkVerifyDistinctChain is the cost of a chain never seen before
// whose intermediates were (ECDSA P-256 leaf, CAs of the named key type):
// the leaf is parsed and its signature checked against the group's cached
// paths. A scan whose every site has its own leaf pays it per site; "full"
// is the cost without the group cache, a complete x509.Verify, and
// "signature" the ceiling, the issuer's signature check on the leaf alone
// (x509.Certificate.CheckSignatureFrom on parsed certificates).
func BenchmarkVerifyDistinctChain(b *testing.B) {
	for _, alg := range []testbed.KeyAlg{testbed.RSA2048, testbed.ECDSAP256, testbed.ECDSAP384} {
		b.Run("issuer="+string(alg)+"/group", func(b *testing.B) { benchDistinct(b, alg, false) })
		b.Run("issuer="+string(alg)+"/full", func(b *testing.B) { benchDistinct(b, alg, true) })
		b.Run("issuer="+string(alg)+"/signature", func(b *testing.B) {
			_, in, leaves := distinctLeaves(b, alg, 1)
			leaf, err := x509.ParseCertificate(leaves[0].Chain[0])
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := leaf.CheckSignatureFrom(in.Cert); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func distinctLeaves(b *testing.B, alg testbed.KeyAlg, n int) (*testbed.CA, *testbed.CA, []*testbed.Leaf) {
	b.Helper()
	root, err := testbed.NewRootCA("Bench Root", alg)
	if err != nil {
		b.Fatal(err)
	}
	in, err := root.NewIntermediate("Bench Issuing", alg)
	if err != nil {
		b.Fatal(err)
	}
	leaves := make([]*testbed.Leaf, n)
	for i := range leaves {
		if leaves[i], err = in.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("b%d.test", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	return root, in, leaves
}

func benchDistinct(b *testing.B, alg testbed.KeyAlg, exact bool) {
	const pool = 256
	root, _, leaves := distinctLeaves(b, alg, pool)
	store, err := ParsePEM("bench", root.PEM())
	if err != nil {
		b.Fatal(err)
	}
	chains := make([][][]byte, pool)
	for i, l := range leaves {
		for _, der := range l.Chain {
			chains[i] = append(chains[i], []byte(base64.StdEncoding.EncodeToString(der)))
		}
	}
	now := time.Now()
	v := newVerifier(store)
	v.exact = exact
	v.verify(chains[0], now) // the group's first, fully verified
	for i := 1; b.Loop(); i++ {
		if i%pool == 0 {
			// A fresh chain cache, the group cache kept: every lookup
			// misses, every chain shares the intermediates.
			for j := range v.shards {
				v.shards[j].m = map[[2]uint64]*chainEntry{}
			}
		}
		if o := v.verify(chains[i%pool], now); o.status != StatusValid {
			b.Fatal(o.status)
		}
	}
}

// BenchmarkVerifyCachedChain is a cache hit: what a record costs when its
// chain was seen before.
func BenchmarkVerifyCachedChain(b *testing.B) {
	root, _ := testbed.NewRootCA("Bench Root", testbed.RSA2048)
	in, _ := root.NewIntermediate("Bench Issuing", testbed.RSA2048)
	store, _ := ParsePEM("bench", root.PEM())
	l, _ := in.Issue(testbed.LeafOptions{DNSNames: []string{"b.test"}})
	var chain [][]byte
	for _, der := range l.Chain {
		chain = append(chain, []byte(base64.StdEncoding.EncodeToString(der)))
	}
	v := newVerifier(store)
	now := time.Now()
	for b.Loop() {
		v.verify(chain, now)
	}
}
