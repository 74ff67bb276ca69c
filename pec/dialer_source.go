package pec

import (
	"context"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/probe"
)

// CloudProofs is a check.ProofSource that has a PEC cloud prove the chain
// of an observation the caller made itself: `pkie check --cloud` probes the
// site along its own path, then asks the cloud. Unlike a Dialer it holds
// no connection back; the Checker decides on the proofs it returns under
// the same policy.
type CloudProofs struct {
	// Cloud is the session with the PEC cloud that proves the chains.
	Cloud *Client
	// Budget is how long to wait for the proofs (and what the cloud is
	// told); 0 means DefaultProofTimeout. The context's deadline, if
	// sooner, wins.
	Budget time.Duration
}

// Proofs submits obs's chain for reqs and waits for every answer or the
// budget. Answers that did not arrive are reported as such.
func (s *CloudProofs) Proofs(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]check.ProofResult {
	out := make(map[pkie.ID]check.ProofResult, len(reqs))
	budget := s.Budget
	if budget <= 0 {
		budget = DefaultProofTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < budget {
		budget = time.Until(dl)
	}
	fail := func(err error) map[pkie.ID]check.ProofResult {
		for _, r := range reqs {
			out[r.ID] = check.ProofResult{Err: err, From: "cloud"}
		}
		return out
	}
	if len(obs.Chain) == 0 {
		return fail(fmt.Errorf("no certificate chain to submit (only a fingerprint was given)"))
	}
	if budget <= 0 {
		return fail(fmt.Errorf("no time left to ask the cloud: %w", context.DeadlineExceeded))
	}
	name := obs.Target.SNI()
	if name == "" {
		name = obs.Target.Host
	}
	p, err := s.Cloud.Submit(ctx, Submission{ServerName: name, Port: obs.Target.Port,
		Chain: obs.Chain, Requests: reqs, Budget: budget})
	if err != nil {
		return fail(fmt.Errorf("submitting to the cloud: %w", err))
	}
	want := make(map[pkie.ID]bool, len(reqs))
	for _, r := range reqs {
		want[r.ID] = true
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	ch := p.C()
wait:
	for len(want) > 0 {
		select {
		case o, ok := <-ch:
			if !ok {
				break wait
			}
			if want[o.ID] {
				delete(want, o.ID)
				out[o.ID] = outcomeResult(o)
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	for id := range want {
		out[id] = check.ProofResult{Err: fmt.Errorf("no answer from the cloud within %s", budget), From: "cloud"}
	}
	return out
}
