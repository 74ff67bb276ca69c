package cloud

import (
	"context"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// TestThirdPartyCannotEvictClient is the reviewer's reproduction: a
// registered client, and a second session (over TCP) that sends 64
// submissions for the client's identifier, with the tickets of 64 of its
// ClientHellos (so the strongest third party), each requesting 32
// enhancements the cloud does not host, every outcome pushed at once.
// Before the fix, 2,048 outcomes met a queue of 256 and the cloud dropped
// the client as a slow reader. The client's QUIC flow-control window is
// kept small and it reads nothing during the attack, so the cloud's
// writer is stuck and the outcome does not depend on timing. Now the
// client keeps its session, receives at most the half of its queue open
// to others' submissions, and the attacker is refused (silently: it
// learns nothing about the client).
func TestThirdPartyCannotEvictClient(t *testing.T) {
	fast := newSigner(idFast)
	tc := startCloud(t, Config{Provers: []pkie.Prover{fast}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const window = 16 << 10
	victim, err := pecwire.DialQUIC(ctx, tc.quicAddr, pecwire.ClientTLS(tc.pin), &quic.Config{
		InitialStreamReceiveWindow: window, MaxStreamReceiveWindow: window,
		InitialConnectionReceiveWindow: window, MaxConnectionReceiveWindow: window,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close() })
	send(t, victim, &pecwire.Register{Version: pecwire.Version})
	vid := recvAs[*pecwire.Registered](t, victim).ClientID

	attacker := tc.dial(t, pecwire.TCP)
	chain := testChain(t, "example.com")
	var reqs []pkie.Request
	for i := range 32 {
		reqs = append(reqs, pkie.Request{ID: pkie.ID(0x7000 + i)})
	}
	// The attacker holds the tickets of 64 of the client's ClientHellos.
	mt := newMinter(t, victim)
	for i := range 64 {
		m := submitFor(vid, pecwire.Nonce{byte(i)}, chain, 5*time.Second)
		m.Requests = reqs
		send(t, attacker, mt.forward(m))
	}
	// Every submission is handled before the Pong; the attacker was told
	// nothing.
	expectNothing(t, attacker)
	// Jobs push their outcomes on their own goroutines.
	eventually(t, "the attack's jobs done", func() bool { _, jobs := tc.Load(); return jobs == 0 })

	if got := counterValue(t, tc.m.sessionsClosed.WithLabelValues("slow_reader")); got != 0 {
		t.Fatalf("%v sessions dropped as slow readers", got)
	}
	if tc.Clients() != 1 {
		t.Fatalf("%d clients registered after the attack, want 1", tc.Clients())
	}
	accepted := counterValue(t, tc.m.submissions.WithLabelValues("accepted"))
	refused := counterValue(t, tc.m.submissions.WithLabelValues("client_full"))
	if accepted+refused != 64 || refused == 0 {
		t.Fatalf("%v accepted, %v refused as the client's room is full: want 64 in all, some refused", accepted, refused)
	}
	// What others' submissions can reach the client is bounded by their
	// half of its queue plus what the transport holds: the client's
	// flow-control window and the sender's buffer, counted here as twice
	// the window (2,048 before the fix).
	room := (DefaultMaxPending - DefaultMaxPending/8) / 2
	sample, err := pecwire.Marshal(&pecwire.Proof{ClientID: vid, ID: 0x7000, Status: pecwire.ProofUnsupported, Text: "this cloud does not host enhancement 0x7000"})
	if err != nil {
		t.Fatal(err)
	}
	if n, most := int(accepted)*len(reqs), room+2*window/len(sample); n > most {
		t.Fatalf("%d outcomes admitted for others' submissions, more than %d", n, most)
	}

	// The client now reads: exactly the accepted outcomes, then its own
	// traffic, on the same session.
	for range int(accepted) * len(reqs) {
		if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofUnsupported {
			t.Fatalf("outcome %v", p.Status)
		}
	}
	expectNothing(t, victim)
	send(t, victim, submitFor(vid, randomNonce(t), chain, 5*time.Second, idFast))
	if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofOK {
		t.Fatalf("the client's own submission: %v", p.Status)
	}
}

// TestOwnSubmissionsKeepTheirRoom: others' submissions never take the
// whole of a client's queue: while they hold their half, the client's own
// submission is still admitted.
func TestOwnSubmissionsKeepTheirRoom(t *testing.T) {
	slow := newSigner(idSlow)
	slow.gate = make(chan struct{})
	defer close(slow.gate)
	tc := startCloud(t, Config{Provers: []pkie.Prover{slow, newSigner(idFast)}, MaxPending: 16, MaxJobsPerClient: 100})
	victim, vid := tc.register(t, pecwire.QUIC)
	server := tc.dial(t, pecwire.TCP)
	chain := testChain(t, "example.com")
	mt := newMinter(t, victim)
	// (16 - 16/8) / 2 = 7 places for others: 7 slow jobs hold them.
	for range 8 {
		send(t, server, mt.forward(submitFor(vid, randomNonce(t), chain, 10*time.Second, idSlow)))
	}
	expectNothing(t, server)
	if a, r := counterValue(t, tc.m.submissions.WithLabelValues("accepted")), counterValue(t, tc.m.submissions.WithLabelValues("client_full")); a != 7 || r != 1 {
		t.Fatalf("others' submissions: %v accepted, %v refused; want 7 and 1", a, r)
	}
	send(t, victim, submitFor(vid, randomNonce(t), chain, 10*time.Second, idFast))
	if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofOK || p.ID != idFast {
		t.Fatalf("the client's own submission: %v %v", p.ID, p.Status)
	}
}

// TestSubmitRateLimited: every submission counts against the session's
// and the address's rate, including those answered with silence (an
// unknown client) or a Reject: probing identifiers is not free.
func TestSubmitRateLimited(t *testing.T) {
	chain := testChain(t, "example.com")
	unknown := pecwire.ClientID{9, 9, 9, 9}
	t.Run("session", func(t *testing.T) {
		tc := startCloud(t, Config{Provers: []pkie.Prover{newSigner(idFast)}, SessionSubmitRate: 1e-3, SessionSubmitBurst: 3})
		c := tc.dial(t, pecwire.TCP)
		send(t, c, unticketed(submitFor(unknown, randomNonce(t), chain, time.Second, idFast)))
		send(t, c, unticketed(submitFor(unknown, randomNonce(t), [][]byte{[]byte("not DER")}, time.Second, idFast)))
		if r := recvAs[*pecwire.Reject](t, c); r.Code != pecwire.RejectInvalid {
			t.Fatal(r.Code)
		}
		send(t, c, unticketed(submitFor(unknown, randomNonce(t), chain, time.Second, idFast)))
		expectNothing(t, c)
		fourth := submitFor(unknown, randomNonce(t), chain, time.Second, idFast)
		send(t, c, unticketed(fourth))
		if r := recvAs[*pecwire.Reject](t, c); r.Code != pecwire.RejectLimited || r.Nonce != fourth.Nonce {
			t.Fatalf("fourth submission: %v", r.Code)
		}
		// Another session has its own rate.
		c2 := tc.dial(t, pecwire.QUIC)
		send(t, c2, unticketed(submitFor(unknown, randomNonce(t), chain, time.Second, idFast)))
		expectNothing(t, c2)
	})
	t.Run("address", func(t *testing.T) {
		tc := startCloud(t, Config{Provers: []pkie.Prover{newSigner(idFast)}, SubmitRate: 1e-3, SubmitBurst: 3})
		a, b := tc.dial(t, pecwire.TCP), tc.dial(t, pecwire.QUIC)
		for _, c := range []*pecwire.Conn{a, b, a} {
			send(t, c, unticketed(submitFor(unknown, randomNonce(t), chain, time.Second, idFast)))
			expectNothing(t, c)
		}
		send(t, b, unticketed(submitFor(unknown, randomNonce(t), chain, time.Second, idFast)))
		if r := recvAs[*pecwire.Reject](t, b); r.Code != pecwire.RejectLimited {
			t.Fatalf("fourth submission from one address: %v", r.Code)
		}
	})
}

// TestDuplicateMemoryBounded: what a session remembers for duplicate
// suppression is forgotten once older than the maximum budget, and all
// sessions together remember at most MaxRemembered.
func TestDuplicateMemoryBounded(t *testing.T) {
	const budget = 300 * time.Millisecond
	tc := startCloud(t, Config{Provers: []pkie.Prover{newSigner(idFast)}, MaxBudget: budget, MaxRemembered: 3})
	a, aid := tc.register(t, pecwire.QUIC)
	b, bid := tc.register(t, pecwire.TCP)
	chain := testChain(t, "example.com")
	prove := func(c *pecwire.Conn, id pecwire.ClientID) {
		t.Helper()
		send(t, c, submitFor(id, randomNonce(t), chain, budget, idFast))
		if p := recvAs[*pecwire.Proof](t, c); p.Status != pecwire.ProofOK {
			t.Fatal(p.Status)
		}
	}
	remembered := func(id pecwire.ClientID) int {
		s := tc.lookup(id)
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.done) != len(s.doneFIFO) {
			t.Fatalf("%d keys, %d entries", len(s.done), len(s.doneFIFO))
		}
		return len(s.doneFIFO)
	}
	total := func() int {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		return tc.remembered
	}
	for range 3 {
		prove(a, aid)
	}
	eventually(t, "a's three remembered", func() bool { return remembered(aid) == 3 })
	// The cloud's total is reached: b's submission takes the place of a's
	// oldest only within b's own memory, which is empty, so it is not
	// remembered.
	prove(b, bid)
	eventually(t, "b's job finished", func() bool { _, j := tc.Load(); return j == 0 })
	if remembered(bid) != 0 || total() != 3 {
		t.Fatalf("b remembers %d, %d in all; want 0 and 3", remembered(bid), total())
	}
	// Past the window, the next proof forgets a's three.
	time.Sleep(budget + 50*time.Millisecond)
	prove(a, aid)
	eventually(t, "a's old ones forgotten", func() bool { _, j := tc.Load(); return j == 0 && remembered(aid) == 1 })
	if total() != 1 {
		t.Fatalf("%d remembered in all, want 1", total())
	}
	b.Close()
	a.Close()
	eventually(t, "memory freed with the sessions", func() bool { return total() == 0 })
}
