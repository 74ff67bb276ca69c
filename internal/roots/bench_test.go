package roots

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// BenchmarkVerifyDistinctChain is the cost of a chain never seen before
// whose intermediates were (RSA-2048 CAs, ECDSA leaf): the leaf is parsed
// and its signature checked against the group's cached paths. A scan whose
// every site has its own leaf pays it per site; "full" is the cost without
// the group cache, a complete x509.Verify.
func BenchmarkVerifyDistinctChain(b *testing.B) {
	b.Run("group", func(b *testing.B) { benchDistinct(b, false) })
	b.Run("full", func(b *testing.B) { benchDistinct(b, true) })
}

func benchDistinct(b *testing.B, exact bool) {
	root, _ := testbed.NewRootCA("Bench Root", testbed.RSA2048)
	in, _ := root.NewIntermediate("Bench Issuing", testbed.RSA2048)
	store, _ := ParsePEM("bench", root.PEM())
	const pool = 256
	chains := make([][][]byte, pool)
	for i := range chains {
		l, err := in.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("b%d.test", i)}})
		if err != nil {
			b.Fatal(err)
		}
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
