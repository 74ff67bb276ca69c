package pecbench

import (
	"context"
	"fmt"
	"time"

	"github.com/pkie/pkie"
)

// verifierCost times the client's verifiers on the cloud's proofs for the
// site: warm, one set of verifiers whose head caches hold the heads after
// the first connection; cold, a fresh set per connection, so every
// connection opens both signed heads (as the paper's client did).
func verifierCost(ctx context.Context, w *world, proofs map[pkie.ID]*pkie.Proof, samples int) (*VerifierCost, error) {
	subj := w.subject()
	one := func(vs []pkie.Verifier) (time.Duration, error) {
		now := time.Now()
		t0 := time.Now()
		for _, v := range vs {
			a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subj, Proof: proofs[v.ID()], Now: now, VerifiedChains: w.chains})
			if a.Status != pkie.Pass {
				return 0, fmt.Errorf("pecbench: %s proof does not pass: %s", v.ID(), a.Reason)
			}
		}
		return time.Since(t0), nil
	}
	warm := make([]time.Duration, 0, samples)
	if _, err := one(w.verifiers); err != nil { // fills the head caches
		return nil, err
	}
	for range samples {
		d, err := one(w.verifiers)
		if err != nil {
			return nil, err
		}
		warm = append(warm, d)
	}
	cold := make([]time.Duration, 0, samples)
	for i := range samples {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		// Building the verifiers (parsing two pinned keys) is outside
		// the timed part: a client does that once, at start.
		vs, err := w.ttps.ClientVerifiers()
		if err != nil {
			return nil, err
		}
		d, err := one(vs)
		if err != nil {
			return nil, err
		}
		cold = append(cold, d)
	}
	sizes := w.treeSizes()
	return &VerifierCost{
		Samples:   samples,
		WarmUsP50: quantileMS(warm, 0.5) * 1e3, WarmUsP99: quantileMS(warm, 0.99) * 1e3,
		ColdUsP50: quantileMS(cold, 0.5) * 1e3, ColdUsP99: quantileMS(cold, 0.99) * 1e3,
		Depths: [2]int{depth(sizes[0]), depth(sizes[1])},
	}, nil
}
