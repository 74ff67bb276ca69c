package notary_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/notary"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
)

// stall is a TCP listener on loopback that accepts connections and never
// answers: a probe of it holds its slot until the connection is closed.
type stall struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newStall(t *testing.T) *stall {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stall{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *stall) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// TestProbeShares: the notary's probes are shared out per requester (the
// submitter the cloud names with pkie.WithRequester), so a submitter that
// fills its share, its probes stalled and its queue places taken, is
// refused busy while another submitter's request is still probed and
// answered at once.
func TestProbeShares(t *testing.T) {
	w := newWorld(t)
	st := newStall(t)
	const flood = 24
	c := w.config()
	c.MaxProbes = 4 // each requester's share: 4/8, at least 1; its queue: 16×1/4
	c.ProbeTimeout = notary.Duration(10 * time.Minute)
	for i := range flood {
		c.Resolve[fmt.Sprintf("stall%d.test", i)] = st.ln.Addr().String()
	}
	p, err := notaryprover.NewProverFrom(context.Background(), pkie.ProverEnv{DataDir: initDir(t, c)}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// The flood: every request to a target of its own (the per-target
	// share is not what is tested), all from one submitter.
	fctx, stop := context.WithCancel(pkie.WithRequester(context.Background(), "203.0.113.7"))
	busy := make(chan error, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			_, err := p.Prove(fctx, &pkie.ProveRequest{Subject: subject(fmt.Sprintf("stall%d.test", i), w.bank.Leaf().Chain)})
			if errors.Is(err, pkie.ErrBusy) {
				busy <- err
			}
		})
	}
	defer func() {
		stop()
		st.Close()
		wg.Wait()
	}()
	// A busy answer means the flood's share, or the whole notary, was full
	// then; nothing drains it while the stalled probes last.
	t.Logf("flood: %v", <-busy)

	other := pkie.WithRequester(context.Background(), "198.51.100.9")
	proof, err := p.Prove(other, &pkie.ProveRequest{Subject: subject("bank.test", w.bank.Leaf().Chain)})
	if err != nil {
		t.Fatalf("another submitter, while one floods the notary: %v", err)
	}
	v, err := notary.NewVerifier(notary.VerifierConfig{Key: p.PublicKey()}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if a := v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subject("bank.test", w.bank.Leaf().Chain), Proof: proof}); a.Status != pkie.Pass {
		t.Fatalf("the other submitter's proof: %s %s", a.Status, a.Reason)
	}
	// The flooding submitter itself stays refused.
	if _, err := p.Prove(pkie.WithRequester(context.Background(), "203.0.113.7"), &pkie.ProveRequest{Subject: subject("shop.test", w.shop.Leaf().Chain)}); !errors.Is(err, pkie.ErrBusy) {
		t.Fatalf("the flooding submitter past its share: %v, want busy", err)
	}
}
