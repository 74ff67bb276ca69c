package pecbench

import (
	"fmt"

	"github.com/pkie/pkie/internal/testbed"
)

// PaperFlightBytes is the average "ServerHello message" the PEC paper
// measured in handshakes with Alexa's top 1,000 domains (§6.3.2): what a
// client forwards to the cloud, certificates included.
const PaperFlightBytes = 4553

// ChainBytes returns the total size of a chain's certificates.
func ChainBytes(chain [][]byte) int {
	n := 0
	for _, c := range chain {
		n += len(c)
	}
	return n
}

// PaddedLeaf issues a leaf for name from ca whose chain, as the server
// sends it, has at least target bytes: real certificates, made larger the
// way large real ones are, with more subject alternative names. A chain
// the size of the paper's whole server flight slightly overstates what a
// client submits, never understates it.
func PaddedLeaf(ca *testbed.CA, name string, alg testbed.KeyAlg, target int) (*testbed.Leaf, error) {
	names := []string{name}
	for range 64 {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: names, Alg: alg})
		if err != nil {
			return nil, err
		}
		have := ChainBytes(leaf.Chain)
		if have >= target {
			return leaf, nil
		}
		// Each extra name costs its length plus a 2-byte header; the
		// last step may overshoot by a name.
		for need := target - have; need > 0; {
			n := fmt.Sprintf("alt%d.%s", len(names), name)
			names = append(names, n)
			need -= len(n) + 2
		}
	}
	return nil, fmt.Errorf("pecbench: could not pad a chain to %d bytes", target)
}
