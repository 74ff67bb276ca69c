package ctinterop

import (
	"context"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/ctutil"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/testbed"
)

// submission is one chain given to a log and what came back.
type submission struct {
	name    string
	chain   [][]byte // as submitted, leaf first
	precert bool
	sct     *ct.SignedCertificateTimestamp
}

// target is a log the corpus is submitted to, through
// certificate-transparency-go's client, and the key its SCTs must verify
// with.
type target struct {
	name string
	lc   *client.LogClient
	pub  any
}

// corpus is the same set of chains for every log, in one order: an x509
// leaf under an intermediate; a precertificate; the final certificate
// carrying the SCTs every log gave the precertificate (so that it is the
// same chain for every log), logged as x509 as well; and an RSA leaf
// issued by the root directly, sent with the root.
type corpus struct {
	root   *testbed.CA
	inter  *testbed.CA
	plain  *testbed.Leaf
	pre    *precert
	direct *testbed.Leaf
}

// corpusLen is the number of chains submit gives each log.
const corpusLen = 4

func newCorpus(t *testing.T, root *testbed.CA) *corpus {
	t.Helper()
	inter, err := root.NewIntermediate("Interop Intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"plain.interop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"direct.interop.test"}, Alg: testbed.RSA2048, SendRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	return &corpus{root: root, inter: inter, plain: plain, pre: issuePrecert(t, inter, "embedded.interop.test"), direct: direct}
}

// submit gives the corpus to every log, chain by chain, each submission
// waiting for its SCT, and checks every SCT with ctutil against the log's
// key and its leaf_index against the order of submission. It returns each
// log's submissions, in order.
func (c *corpus) submit(ctx context.Context, t *testing.T, logs ...*target) [][]submission {
	t.Helper()
	out := make([][]submission, len(logs))
	for li := range logs {
		out[li] = []submission{
			{name: "plain x509", chain: c.plain.Chain},
			{name: "precertificate", chain: c.pre.chain, precert: true},
			{name: "final certificate with embedded SCTs"},
			{name: "RSA leaf under the root, root sent", chain: c.direct.Chain},
		}
	}
	for i := 0; i < corpusLen; i++ {
		if out[0][i].chain == nil {
			var scts []*ct.SignedCertificateTimestamp
			for li := range logs {
				scts = append(scts, out[li][1].sct)
			}
			final := c.pre.final(t, scts...)
			for li, l := range logs {
				out[li][i].chain = final
				// Each embedded SCT verifies against the final
				// certificate rebuilt as the precertificate the log
				// signed: ct-go agrees this is the certificate
				// announced.
				if err := ctutil.VerifySCT(l.pub, ctgoChain(t, final), scts[li], true); err != nil {
					t.Fatalf("%s: %s: the embedded SCT does not verify: %v", l.name, out[li][i].name, err)
				}
			}
		}
		for li, l := range logs {
			s := &out[li][i]
			var err error
			if s.precert {
				s.sct, err = l.lc.AddPreChain(ctx, asn1Chain(s.chain))
			} else {
				s.sct, err = l.lc.AddChain(ctx, asn1Chain(s.chain))
			}
			if err != nil {
				t.Fatalf("%s: %s: submitting: %v", l.name, s.name, err)
			}
			if err := ctutil.VerifySCT(l.pub, ctgoChain(t, s.chain), s.sct, false); err != nil {
				t.Fatalf("%s: %s: SCT does not verify with ctutil: %v", l.name, s.name, err)
			}
			idx, err := ctwire.LeafIndex(s.sct.Extensions)
			if err != nil {
				t.Fatalf("%s: %s: SCT: %v", l.name, s.name, err)
			}
			if idx != uint64(i) {
				t.Fatalf("%s: %s: SCT leaf_index %d, want %d (submitted one at a time)", l.name, s.name, idx, i)
			}
		}
	}
	return out
}
