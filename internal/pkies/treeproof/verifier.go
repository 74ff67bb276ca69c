package treeproof

import (
	"fmt"
	"time"

	"github.com/pkie/pkie"
)

// DefaultClientMaxAge is how old a signed head the CT and revocation
// verifiers accept by default (their max_age): how long an old proof can be
// replayed, and how long after a revocation a stale "not revoked" proof
// still passes. It is also the provers' default health limit, so that
// /healthz turns unhealthy when clients start refusing their proofs, not a
// day later.
const DefaultClientMaxAge = time.Hour

// NewPin returns the pin of a TTP's key with a cache of the heads it has
// verified (by their exact bytes), so that a client verifying many proofs
// under one head pays its two signatures once and then only the hash path
// and a freshness check.
func NewPin(pkieName, key string, maxAge time.Duration) (Pin, error) {
	if key == "" {
		return Pin{}, fmt.Errorf("%s verifier: the TTP's key is required", pkieName)
	}
	if maxAge <= 0 {
		return Pin{}, fmt.Errorf("%s verifier: max_age must be positive", pkieName)
	}
	pin, err := ParsePin(key, maxAge)
	if err != nil {
		return Pin{}, fmt.Errorf("%s verifier: %w", pkieName, err)
	}
	return pin, nil
}

// Open decodes the proof of a request for enhancement id into the
// Response its verifier checks. A nil proof is (nil, nil): no
// evidence. Any other failure is an error to report as Fail, since only an
// attacker or a broken prover sends a proof that does not decode.
func Open(id pkie.ID, pkieName string, p *pkie.Proof) (*Response, error) {
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
// (log names that log: "the log's checkpoint", "the authority's key log"):
// for a mirror, the log's name and, when known, when it signed that
// checkpoint.
func Evidence(pin Pin, res *Result, log string) string {
	from := fmt.Sprintf("%s of %d entries", log, res.LogSize)
	if pin.LogVerifier != nil {
		from = fmt.Sprintf("log %s's checkpoint of %d entries", pin.LogVerifier.Name(), res.LogSize)
	}
	if !res.LogTime.IsZero() {
		from += " signed " + res.LogTime.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s's head signed %s (sorted tree of %d keys, root %x…, built from %s)",
		pin.Verifier.Name(), res.CheckpointTime.UTC().Format(time.RFC3339), res.TreeSize, res.TreeRoot[:6], from)
}
