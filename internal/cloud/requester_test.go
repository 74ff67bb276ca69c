package cloud

import (
	"context"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// whoProver answers with the requester the cloud named in its context
// (pkie.Requester) as the proof's body.
type whoProver struct{ id pkie.ID }

func (w whoProver) ID() pkie.ID { return w.id }

func (w whoProver) Prove(ctx context.Context, _ *pkie.ProveRequest) (*pkie.Proof, error) {
	return &pkie.Proof{ID: w.id, Version: 1, Body: []byte(pkie.Requester(ctx))}, nil
}

// TestProversSeeRequester: the cloud names the submitter to its provers
// (pkie.WithRequester) by the address share it counts the submission
// against, so that provers with bounds of their own (the notary's probes)
// share them out per submitter: each client submitting for itself is its
// own address, and a submission made for a client from another address
// counts against that other address.
func TestProversSeeRequester(t *testing.T) {
	tc := startCloud(t, Config{Provers: []pkie.Prover{whoProver{idFast}}})
	chain := testChain(t, "example.com")
	a := dialFrom(t, tc, "127.0.0.2")
	a.send(t, &pecwire.Register{Version: pecwire.Version})
	aid := a.recv(t).(*pecwire.Registered).ClientID
	b := dialFrom(t, tc, "127.0.0.3")
	b.send(t, &pecwire.Register{Version: pecwire.Version})
	bid := b.recv(t).(*pecwire.Registered).ClientID
	am := newRawMinter(t, a)
	for _, c := range []struct {
		name     string
		from     *rawTLS
		client   pecwire.ClientID
		to       *rawTLS
		expected string
	}{
		{"a for itself", a, aid, a, "127.0.0.2"},
		{"b for itself", b, bid, b, "127.0.0.3"},
		{"b for a", b, aid, a, "127.0.0.3"},
	} {
		var m pecwire.Message = submitFor(c.client, randomNonce(t), chain, 10*time.Second, idFast)
		if c.from != c.to {
			m = am.forward(m.(*pecwire.Submit))
		}
		c.from.send(t, m)
		p, ok := c.to.recv(t).(*pecwire.Proof)
		if !ok || p.Status != pecwire.ProofOK || p.Proof == nil {
			t.Fatalf("%s: %+v", c.name, p)
		}
		if got := string(p.Proof.Body); got != c.expected {
			t.Errorf("%s: the prover saw requester %q, want %q", c.name, got, c.expected)
		}
	}
}
