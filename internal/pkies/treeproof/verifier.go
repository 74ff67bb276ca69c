package treeproof

import (
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/prover"
)

// NewPin returns the pin of a TTP's key with a cache of the heads it has
// verified (by their exact bytes), so that a client verifying many proofs
// under one head pays its two signatures once and then only the hash path
// and a freshness check.
func NewPin(pkieName, key string, maxAge time.Duration) (prover.Pin, error) {
	if key == "" {
		return prover.Pin{}, fmt.Errorf("%s verifier: the TTP's key is required", pkieName)
	}
	if maxAge <= 0 {
		return prover.Pin{}, fmt.Errorf("%s verifier: max_age must be positive", pkieName)
	}
	pin, err := prover.ParsePin(key, maxAge)
	if err != nil {
		return prover.Pin{}, fmt.Errorf("%s verifier: %w", pkieName, err)
	}
	return pin, nil
}

// Open decodes the proof of a request for enhancement id into the
// prover.Response its verifier checks. A nil proof is (nil, nil): no
// evidence. Any other failure is an error to report as Fail, since only an
// attacker or a broken prover sends a proof that does not decode.
func Open(id pkie.ID, pkieName string, p *pkie.Proof) (*prover.Response, error) {
	if p == nil {
		return nil, nil
	}
	if p.ID != id {
		return nil, fmt.Errorf("proof is for enhancement %s, not %s (%s)", p.ID, id, pkieName)
	}
	if p.Version != Version {
		return nil, fmt.Errorf("%s proof of version %d, this client reads version %d", pkieName, p.Version, Version)
	}
	var b Body
	if err := b.UnmarshalBinary(p.Body); err != nil {
		return nil, fmt.Errorf("%s proof does not decode: %w", pkieName, err)
	}
	return b.Response(pkieName), nil
}

// Evidence names a verified head in reasons: the TTP's key name, when the
// head was signed, the tree's size and root, and the log it was built from
// (log names that log: "the log's checkpoint", "the authority's key log").
func Evidence(pin prover.Pin, res *prover.Result, log string) string {
	return fmt.Sprintf("%s's head signed %s (sorted tree of %d keys, root %x…, built from %s of %d entries)",
		pin.Verifier.Name(), res.CheckpointTime.UTC().Format(time.RFC3339), res.TreeSize, res.TreeRoot[:6], log, res.LogSize)
}
