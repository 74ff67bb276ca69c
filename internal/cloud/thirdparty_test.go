package cloud

import (
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Third parties that learned a client's identifier from a ClientHello
// (docs/formats/pec.md, "The PEC TLS extension"): what they can no longer
// do to the client.

// drainUntilPong sends a Ping on c and reads until its Pong, returning
// what came before: after it, the cloud has handled everything c sent.
func drainUntilPong(t *testing.T, c *pecwire.Conn) []pecwire.Message {
	t.Helper()
	send(t, c, &pecwire.Ping{Seq: 42})
	var before []pecwire.Message
	for {
		m := recv(t, c)
		if p, ok := m.(*pecwire.Pong); ok && p.Seq == 42 {
			return before
		}
		before = append(before, m)
	}
}

// TestThirdPartyCannotTakeOwnShare reproduces a client's denial by anyone
// who saw its identifier in a ClientHello: two sessions that never registered keep 64 slow submissions
// each in flight naming the victim's identifier. Before the fix they took
// the client's whole share and its own submission was refused ("rate
// limited: this client has its share of submissions in flight"), over
// QUIC and TCP.
func TestThirdPartyCannotTakeOwnShare(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			slow := newSigner(idSlow)
			slow.gate = make(chan struct{})
			defer close(slow.gate)
			tc := startCloud(t, Config{Provers: []pkie.Prover{slow, newSigner(idFast)}})
			victim, vid := tc.register(t, tr)
			chain := testChain(t, "example.com")
			for _, atr := range transports {
				attacker := tc.dial(t, atr)
				for range 64 {
					send(t, attacker, submitFor(vid, randomNonce(t), chain, 10*time.Second, idSlow))
				}
				drainUntilPong(t, attacker)
			}
			own := submitFor(vid, randomNonce(t), chain, 10*time.Second, idFast)
			send(t, victim, own)
			m := recv(t, victim)
			if p, ok := m.(*pecwire.Proof); !ok || p.Status != pecwire.ProofOK || p.Nonce != own.Nonce {
				t.Fatalf("the client's own submission under attack: got %T %+v", m, m)
			}
		})
	}
}

// TestThirdPartyPushesNothing: submissions naming a client's identifier
// from a session without its tickets bring the client nothing. Before the
// fix each was proved and its outcomes pushed at the client (the review
// saw 800 proofs, 480 KB in 9 s, from one session).
func TestThirdPartyPushesNothing(t *testing.T) {
	tc := startCloud(t, Config{Provers: []pkie.Prover{newSigner(idFast)}})
	victim, vid := tc.register(t, pecwire.QUIC)
	attacker := tc.dial(t, pecwire.TCP)
	chain := testChain(t, "example.com")
	for range 50 {
		send(t, attacker, submitFor(vid, randomNonce(t), chain, 5*time.Second, idFast))
	}
	drainUntilPong(t, attacker)
	eventually(t, "no job left", func() bool { _, jobs := tc.Load(); return jobs == 0 })
	expectNothing(t, victim)
}

// TestCopiedTicket: whoever copies a ClientHello has its ticket, which
// is good once, for that nonce, server name, port and requests: replayed
// with other chains, or used for another name, a forged tag, or a counter
// too old, it brings the client nothing more. A ticket minted for the
// client by its own session is no use to a copy of a ClientHello of
// another client either.
func TestCopiedTicket(t *testing.T) {
	fast := newSigner(idFast)
	tc := startCloud(t, Config{Provers: []pkie.Prover{fast}})
	victim, vid := tc.register(t, pecwire.QUIC)
	other, _ := tc.register(t, pecwire.TCP)
	attacker := tc.dial(t, pecwire.TCP)
	mt := newMinter(t, victim)
	m := submitFor(vid, randomNonce(t), testChain(t, "example.com"), 5*time.Second, idFast)
	copied := mt.forward(m)
	send(t, attacker, copied)
	for range 20 {
		again := *copied
		again.Submit.Chain = testChain(t, "example.com")
		send(t, attacker, &again)
	}
	renamed := *copied
	renamed.Submit.ServerName = "elsewhere.example"
	forged := *mt.forward(m)
	forged.Ticket.Tag[0] ^= 1
	foreign := *newMinter(t, other).forward(m)
	for _, x := range []*pecwire.ServerSubmit{&renamed, &forged, &foreign} {
		send(t, attacker, x)
	}
	// 1,100 tickets later, the unused ticket 1 is too old to tell.
	mt.n = 1100
	send(t, attacker, mt.forward(submitFor(vid, randomNonce(t), testChain(t, "example.com"), 5*time.Second, idFast)))
	old := pecwire.MintTicket(mt.key, 1, m)
	send(t, attacker, &pecwire.ServerSubmit{Ticket: old, Submit: *m})
	if got := drainUntilPong(t, attacker); len(got) != 0 {
		t.Fatalf("the attacker was told %+v", got[0])
	}
	eventually(t, "no job left", func() bool { _, jobs := tc.Load(); return jobs == 0 })
	for _, want := range []struct {
		outcome string
		n       float64
	}{{"accepted", 2}, {"replayed_ticket", 21}, {"bad_ticket", 3}} {
		if got := counterValue(t, tc.m.submissions.WithLabelValues(want.outcome)); got != want.n {
			t.Errorf("%s: %v submissions, want %v", want.outcome, got, want.n)
		}
	}
	for range 2 {
		if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofOK {
			t.Fatal(p.Status)
		}
	}
	expectNothing(t, victim)
}

// TestTicketHoldersShareBounded: a third party holding the tickets of
// many of the client's ClientHellos (it sees them all) and naming slow
// targets holds at most a quarter of the others' share of the client's
// jobs, and none of the client's own.
func TestTicketHoldersShareBounded(t *testing.T) {
	slow := newSigner(idSlow)
	slow.gate = make(chan struct{})
	defer close(slow.gate)
	tc := startCloud(t, Config{Provers: []pkie.Prover{slow, newSigner(idFast)}, MaxJobsPerClient: 8, MaxPending: 1024})
	victim, vid := tc.register(t, pecwire.QUIC)
	mt := newMinter(t, victim)
	attacker := tc.dial(t, pecwire.TCP)
	chain := testChain(t, "example.com")
	for range 32 {
		send(t, attacker, mt.forward(submitFor(vid, randomNonce(t), chain, 10*time.Second, idSlow)))
	}
	drainUntilPong(t, attacker)
	if a, f := counterValue(t, tc.m.submissions.WithLabelValues("accepted")), counterValue(t, tc.m.submissions.WithLabelValues("client_full")); a != 2 || f != 30 {
		t.Fatalf("ticket holder: %v accepted, %v refused; want 2 (8/4) and 30", a, f)
	}
	for range 8 {
		send(t, victim, submitFor(vid, randomNonce(t), chain, 10*time.Second, idSlow))
	}
	if got := drainUntilPong(t, victim); len(got) != 0 {
		t.Fatalf("the client's own submissions: %+v", got[0])
	}
	send(t, victim, submitFor(vid, randomNonce(t), chain, 10*time.Second, idFast))
	if r := recvAs[*pecwire.Reject](t, victim); r.Code != pecwire.RejectLimited {
		t.Fatalf("beyond its own share: %v", r.Code)
	}
}

// TestCopyCannotShortenBudget: a copy of the client's
// own submission (same digest: a ClientHello's ticket, the chain the
// server sends to anyone) sent first with a short budget. Before the fix
// the first copy's budget governed: the client's own submission was a
// duplicate and the client got timeouts at the copy's deadline.
func TestCopyCannotShortenBudget(t *testing.T) {
	t.Run("in flight", func(t *testing.T) {
		slow := newSigner(idSlow)
		slow.gate = make(chan struct{})
		slow.started = make(chan struct{}, 4)
		tc := startCloud(t, Config{Provers: []pkie.Prover{slow}})
		victim, vid := tc.register(t, pecwire.QUIC)
		attacker := tc.dial(t, pecwire.TCP)
		own := submitFor(vid, randomNonce(t), testChain(t, "example.com"), 10*time.Second, idSlow)
		const short = 300 * time.Millisecond
		copied := newMinter(t, victim).forward(own)
		copied.Submit.Budget = short
		send(t, attacker, copied)
		<-slow.started
		send(t, victim, own)
		dups := tc.m.submissions.WithLabelValues("duplicate")
		eventually(t, "the client's copy joined", func() bool { return counterValue(t, dups) == 1 })
		// Past the copy's deadline, then the proof comes.
		time.Sleep(2 * short)
		close(slow.gate)
		if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofOK || p.Digest != own.Digest() {
			t.Fatalf("the client's own submission: %v %s", p.Status, p.Text)
		}
		if n := slow.calls.Load(); n != 1 {
			t.Fatalf("%d prover calls, want 1", n)
		}
	})
	t.Run("expired", func(t *testing.T) {
		fast := newSigner(idFast)
		fast.gate = make(chan struct{})
		fast.started = make(chan struct{}, 4)
		tc := startCloud(t, Config{Provers: []pkie.Prover{fast}})
		victim, vid := tc.register(t, pecwire.QUIC)
		attacker := tc.dial(t, pecwire.TCP)
		own := submitFor(vid, randomNonce(t), testChain(t, "example.com"), 10*time.Second, idFast)
		copied := newMinter(t, victim).forward(own)
		copied.Submit.Budget = time.Millisecond
		send(t, attacker, copied)
		<-fast.started
		eventually(t, "the copy's job over", func() bool { _, jobs := tc.Load(); return jobs == 0 })
		// Its timeout was not the client's to hear of.
		expectNothing(t, victim)
		close(fast.gate)
		send(t, victim, own)
		if p := recvAs[*pecwire.Proof](t, victim); p.Status != pecwire.ProofOK || p.Digest != own.Digest() {
			t.Fatalf("the client's own submission: %v %s", p.Status, p.Text)
		}
	})
}
