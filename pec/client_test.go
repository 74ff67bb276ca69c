package pec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

var testChain = [][]byte{[]byte("leaf certificate bytes"), []byte("intermediate bytes")}

func testSubmission(budget time.Duration, ids ...pkie.ID) Submission {
	s := Submission{ServerName: "site.test", Port: 443, Chain: testChain, Budget: budget}
	for _, id := range ids {
		s.Requests = append(s.Requests, pkie.Request{ID: id})
	}
	return s
}

func dial(t *testing.T, cfg ClientConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitAll(t *testing.T, p *Pending) map[pkie.ID]Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := p.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("outcomes still missing after 20s; have %v", got)
	}
	return got
}

// eventually polls cond; the client's state changes asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func wantProofs(t *testing.T, got map[pkie.ID]Outcome, nonce pecwire.Nonce, cloud string, ids ...pkie.ID) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("got %d outcomes, want %d: %v", len(got), len(ids), got)
	}
	for _, id := range ids {
		o, ok := got[id]
		if !ok {
			t.Fatalf("no outcome for %s", id)
		}
		if o.Status != ProofOK || o.Proof == nil || !bytes.Equal(o.Proof.Body, proofFor(id, nonce).Body) {
			t.Fatalf("outcome for %s: %+v, want the proof for nonce %s", id, o, nonce)
		}
		if !strings.Contains(o.Cloud, cloud) {
			t.Errorf("outcome for %s delivered by %q, want %q", id, o.Cloud, cloud)
		}
	}
}

func TestRegisterAndProve(t *testing.T) {
	key := newCloudKey(t)
	p := newPeer(t, key, peerBehaviour{keepalive: 200 * time.Millisecond})
	for _, tc := range []struct{ transport, want string }{
		{TransportQUIC, "quic"},
		{TransportTCP, "tcp"},
		{TransportAuto, "quic"}, // UDP works: QUIC wins
		{"", "quic"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, p.point())}, Transport: tc.transport})
			st := c.Status()
			if !st.Connected || st.Transport != tc.want || st.Cloud != "alpha" || st.ClientID == (ClientID{}) || st.ClientID != c.ID() {
				t.Fatalf("status %+v, want connected to alpha over %s with an identifier", st, tc.want)
			}
			if st.Keepalive != 200*time.Millisecond {
				t.Errorf("keepalive %v, want the cloud's 200ms", st.Keepalive)
			}
			pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT, pkie.Revocation))
			if err != nil {
				t.Fatal(err)
			}
			wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "alpha "+p.point().QUIC[:0], pkie.CT, pkie.Revocation)
			subs := p.submitted()
			last := subs[len(subs)-1]
			if last.ClientID != pecwire.ClientID(c.ID()) || last.Nonce != pecwire.Nonce(pend.Nonce()) || last.ServerName != "site.test" || last.Port != 443 || len(last.Chain) != 2 {
				t.Errorf("cloud received %+v", last)
			}
			if last.Budget <= 0 || last.Budget > 10*time.Second {
				t.Errorf("budget on the wire %v", last.Budget)
			}
			// Pings are answered: the session stays up past several
			// intervals and measures a round trip.
			eventually(t, "a pong", func() bool { st := c.Status(); return !st.LastPong.IsZero() && st.RTT > 0 && st.ClientID == c.ID() })
		})
	}
}

func TestAutoFallsBackToTCPWhenUDPBlocked(t *testing.T) {
	key := newCloudKey(t)
	p := newPeer(t, key, peerBehaviour{})
	pt := p.point()
	pt.QUIC = blackholeUDP(t)
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, pt)}, FallbackDelay: 50 * time.Millisecond})
	st := c.Status()
	if st.Transport != "tcp" || st.Point != pt.TCP {
		t.Fatalf("status %+v, want TCP at %s", st, pt.TCP)
	}
	if st.Registration < 50*time.Millisecond {
		t.Errorf("registration took %v, before the fallback delay started TCP", st.Registration)
	}
	pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "via tcp", pkie.CT)
}

func TestQUICOnlyFailsWhenUDPBlocked(t *testing.T) {
	key := newCloudKey(t)
	p := newPeer(t, key, peerBehaviour{})
	pt := p.point()
	pt.QUIC = blackholeUDP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, pt)}, Transport: TransportQUIC, DialTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "quic") {
		t.Fatalf("Dial over QUIC with UDP blocked: %v, want a QUIC failure", err)
	}
	if p.registrations() != 0 {
		t.Errorf("%d registrations over TCP though QUIC was required", p.registrations())
	}
}

func TestPinnedKey(t *testing.T) {
	key, other := newCloudKey(t), newCloudKey(t)
	p := newPeer(t, key, peerBehaviour{})
	for _, transport := range []string{TransportQUIC, TransportTCP} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", other, p.point())}, Transport: transport})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not the pinned key") {
			t.Fatalf("%s: Dial to a cloud with another key: %v, want the pin refused", transport, err)
		}
	}
	if n := p.registrations(); n != 0 {
		t.Fatalf("%d registrations with a cloud whose key is not pinned", n)
	}
}

// TestNearestFirst races the points of a bundle: the one that registers
// first wins, the slower one is remembered second and is where the client
// goes when the first dies.
func TestNearestFirst(t *testing.T) {
	key := newCloudKey(t)
	release := make(chan struct{})
	far := newPeer(t, key, peerBehaviour{beforeRegistered: func() { <-release }})
	near := newPeer(t, key, peerBehaviour{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c := dial(t, ClientConfig{
		Clouds:    []*Bundle{bundleOf("alpha", key, far.point(), near.point())},
		Transport: TransportQUIC,
	})
	if st := c.Status(); st.Point != near.point().QUIC {
		t.Fatalf("registered at %s, want the point that answered first, %s", st.Point, near.point().QUIC)
	}
	close(release) // the far point answers now, second
	eventually(t, "the far point's registration", func() bool { return far.registrations() == 1 })
	near.close()
	eventually(t, "failover", func() bool { st := c.Status(); return st.Connected && st.Failovers == 1 })
	st := c.Status()
	if st.Point != far.point().QUIC {
		t.Fatalf("failed over to %s, want the remembered second point %s", st.Point, far.point().QUIC)
	}
	if st.LastFailover <= 0 || st.LastError == "" {
		t.Errorf("status after failover %+v", st)
	}
}

// TestFailoverMissedPings: the primary cloud stops answering pings and
// withholds the proofs of a pending submission; the client declares it dead
// after MissedPings, registers with the next cloud and resubmits there,
// which proves it within the budget.
//
// On a loaded machine a stall of MissedPings keepalives can also end the
// session with beta, so the test asserts at least one failover and where
// the client ends up, not an exact count; the keepalive is long enough
// that such a stall is rare, short enough that the test stays fast.
func TestFailoverMissedPings(t *testing.T) {
	keyA, keyB := newCloudKey(t), newCloudKey(t)
	a := newPeer(t, keyA, peerBehaviour{onSubmit: func(*peerSession, *pecwire.Submit) {}})
	b := newPeer(t, keyB, peerBehaviour{})
	c := dial(t, ClientConfig{
		Clouds:    []*Bundle{bundleOf("alpha", keyA, a.point()), bundleOf("beta", keyB, b.point())},
		Keepalive: 250 * time.Millisecond, MissedPings: 3,
	})
	first := c.ID()
	pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT, pkie.Notary))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the submission at alpha", func() bool { return len(a.submitted()) == 1 })
	a.silent.Store(true)
	got := waitAll(t, pend)
	wantProofs(t, got, pecwire.Nonce(pend.Nonce()), "beta", pkie.CT, pkie.Notary)
	eventually(t, "a session with beta", func() bool { st := c.Status(); return st.Connected && st.Cloud == "beta" })
	st := c.Status()
	if st.Failovers < 1 || st.LastFailover <= 0 || !strings.Contains(st.LastError, "pings unanswered") {
		t.Fatalf("status %+v, want a failover to beta after missed pings", st)
	}
	if c.ID() == first {
		t.Errorf("client identifier unchanged after failover")
	}
	subs := b.submitted()
	if len(subs) == 0 || subs[0].Nonce != pecwire.Nonce(pend.Nonce()) || subs[0].ClientID == pecwire.ClientID(first) || subs[0].Budget >= 20*time.Second {
		t.Fatalf("beta received %+v, want the resubmission under a new identifier with the budget left", subs)
	}
}

// TestFailoverCloudStops: the cloud process ends after proving one of two
// enhancements; the client fails over to the next point of the same cloud
// at once and asks there only for the missing one.
func TestFailoverCloudStops(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) { ps.prove(m, pkie.CT) }})
	b := newPeer(t, key, peerBehaviour{})
	for _, transport := range []string{TransportQUIC, TransportTCP} {
		t.Run(transport, func(t *testing.T) {
			if transport == TransportTCP {
				a = newPeer(t, key, a.b)
			}
			c := dial(t, ClientConfig{
				// A long keepalive: the connection's failure, not the
				// pings, tells the client.
				Clouds:    []*Bundle{bundleOf("alpha", key, a.point()), bundleOf("beta", key, b.point())},
				Keepalive: time.Minute, Transport: transport,
			})
			before := len(b.submitted())
			pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT, pkie.Revocation))
			if err != nil {
				t.Fatal(err)
			}
			// The cloud stops once it has delivered the first proof.
			o := <-pend.C()
			a.close()
			got := waitAll(t, pend)
			got[o.ID] = o
			wantProofs(t, map[pkie.ID]Outcome{pkie.CT: got[pkie.CT]}, pecwire.Nonce(pend.Nonce()), "alpha", pkie.CT)
			wantProofs(t, map[pkie.ID]Outcome{pkie.Revocation: got[pkie.Revocation]}, pecwire.Nonce(pend.Nonce()), "beta", pkie.Revocation)
			subs := b.submitted()[before:]
			if len(subs) != 1 || len(subs[0].Requests) != 1 || subs[0].Requests[0].ID != pkie.Revocation {
				t.Fatalf("beta received %+v, want only the missing enhancement", subs)
			}
			if st := c.Status(); st.Failovers != 1 || st.Cloud != "beta" || !strings.Contains(st.LastError, "connection failed") {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

func TestBusy(t *testing.T) {
	key := newCloudKey(t)
	busy := func(ps *peerSession, m *pecwire.Submit) {
		ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: pecwire.RejectBusy, Text: "too many jobs"})
	}
	for _, tc := range []struct {
		policy    string
		otherBusy bool
		want      pecwire.ProofStatus
		wantText  string
	}{
		{BusyNext, false, pecwire.ProofOK, ""},
		{"", false, pecwire.ProofOK, ""},
		{BusyNext, true, pecwire.ProofBusy, "too many jobs"}, // retried once only
		{BusyFail, false, pecwire.ProofBusy, "busy: too many jobs"},
	} {
		t.Run(tc.policy+map[bool]string{true: "-both-busy"}[tc.otherBusy], func(t *testing.T) {
			a := newPeer(t, key, peerBehaviour{onSubmit: busy})
			var ob peerBehaviour
			if tc.otherBusy {
				ob.onSubmit = busy
			}
			b := newPeer(t, key, ob)
			release := make(chan struct{})
			b.b.beforeRegistered = func() { <-release }
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			t.Cleanup(open)
			// b registers only once the client is on a: a stays primary.
			c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point(), b.point())}, OnBusy: tc.policy, Transport: TransportTCP})
			if c.Status().Point != a.point().TCP {
				t.Fatal("not on the first point")
			}
			open()
			eventually(t, "the other point's registration", func() bool { return b.registrations() == 1 })
			pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT, pkie.Revocation))
			if err != nil {
				t.Fatal(err)
			}
			got := waitAll(t, pend)
			if len(got) != 2 {
				t.Fatalf("outcomes %v", got)
			}
			for id, o := range got {
				if o.Status != ProofStatus(tc.want) || !strings.Contains(o.Text, tc.wantText) {
					t.Fatalf("outcome for %s: %+v, want %s", id, o, tc.want)
				}
			}
			if tc.want == pecwire.ProofOK {
				wantProofs(t, got, pecwire.Nonce(pend.Nonce()), b.point().TCP, pkie.CT, pkie.Revocation)
			}
			wantB := 0
			if tc.policy != BusyFail {
				wantB = 1
			}
			if n := len(b.submitted()); n != wantB {
				t.Fatalf("the other point received %d submissions, want %d", n, wantB)
			}
			// The client stays with its nearest point; only the busy
			// submission went elsewhere.
			if st := c.Status(); st.Point != a.point().TCP || st.Failovers != 0 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

func TestBusyNextWithNowhereElse(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
		ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: pecwire.RejectBusy, Text: "full"})
	}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	o := waitAll(t, pend)[pkie.CT]
	if o.Status != ProofBusy || !strings.Contains(o.Text, "no other point") {
		t.Fatalf("outcome %+v", o)
	}
}

// TestWithheldProofs: a cloud that proves one enhancement and withholds
// the other; the withheld one arrives as ProofTimeout at the budget.
func TestWithheldProofs(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) { ps.prove(m, pkie.CT) }})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	pend, err := c.Submit(context.Background(), testSubmission(300*time.Millisecond, pkie.CT, pkie.Notary))
	if err != nil {
		t.Fatal(err)
	}
	var got []Outcome
	for o := range pend.C() {
		got = append(got, o)
	}
	if len(got) != 2 || got[0].ID != pkie.CT || got[0].Status != ProofOK ||
		got[1].ID != pkie.Notary || got[1].Status != ProofTimeout || !strings.Contains(got[1].Text, "budget") {
		t.Fatalf("outcomes %+v", got)
	}
	if st := c.Status(); st.Pending != 0 || st.Failovers != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestForeignOutcomesDropped: a hostile cloud pushes outcomes for a nonce
// nothing waits for, under another client's identifier, for an enhancement
// not requested, and twice for one: only the right ones are delivered.
func TestForeignOutcomesDropped(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
		other := *m
		other.Nonce[0] ^= 1
		ps.prove(&other, pkie.CT) // unknown nonce
		other = *m
		other.ClientID[0] ^= 1 // another client's, with another body
		ps.send(&pecwire.Proof{ClientID: other.ClientID, Nonce: m.Nonce, Digest: m.Digest(), ID: pkie.CT, Proof: &pkie.Proof{ID: pkie.CT, Body: []byte("forged")}})
		ps.prove(m, pkie.Notary) // not requested
		ps.prove(m, pkie.CT)
		ps.prove(m, pkie.CT) // again
		ps.send(&pecwire.Reject{Nonce: pecwire.Nonce{0xee}, Code: pecwire.RejectInvalid})
	}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "alpha", pkie.CT)
	eventually(t, "drops counted", func() bool { return c.Status().Dropped >= 5 })
	if d := c.Status().Dropped; d != 5 {
		t.Fatalf("dropped %d, want 5", d)
	}
}

// TestForgedCopyDoesNotPreempt: outcomes of a copy of the submission
// with the same nonce but another chain (or other requests), which anyone
// who saw the nonce can have proved, reach the client first; the client
// takes only those carrying its own submission's digest.
func TestForgedCopyDoesNotPreempt(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
		forged := *m
		forged.Chain = [][]byte{{0x30, 0x03, 9, 9, 9}}
		ps.send(&pecwire.Proof{ClientID: m.ClientID, Nonce: m.Nonce, Digest: forged.Digest(), ID: pkie.CT, Status: pecwire.ProofUnsupported, Text: "forged"})
		ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: forged.Digest(), Code: pecwire.RejectInvalid, Text: "forged"})
		forged = *m
		forged.Requests = append(forged.Requests, pkie.Request{ID: pkie.Notary})
		ps.send(&pecwire.Proof{ClientID: m.ClientID, Nonce: m.Nonce, Digest: forged.Digest(), ID: pkie.CT, Status: pecwire.ProofFailed, Text: "forged"})
		ps.proveAll(m)
	}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "alpha", pkie.CT)
	if d := c.Status().Dropped; d != 3 {
		t.Fatalf("dropped %d, want the 3 forged outcomes", d)
	}
}

// TestExpectSubmission: an expectation that knows the chain the handshake
// delivered takes only the outcomes of that submission, even when a copy
// with the same nonce and another chain is proved first.
func TestExpectSubmission(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	sub := testSubmission(10*time.Second, pkie.CT)
	sub.Nonce = Nonce(pecwire.Nonce{1, 2, 3, 4, 5, 6, 7, 8})
	pend := c.ExpectSubmission(sub)
	a.mu.Lock()
	ps := a.sessions[len(a.sessions)-1]
	a.mu.Unlock()
	real := &pecwire.Submit{ClientID: pecwire.ClientID(c.ID()), Nonce: pecwire.Nonce(sub.Nonce), ServerName: strings.ToUpper(sub.ServerName), Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain}
	forged := *real
	forged.Chain = [][]byte{{0x30, 0x03, 9, 9, 9}}
	ps.send(&pecwire.Proof{ClientID: pecwire.ClientID(c.ID()), Nonce: pecwire.Nonce(sub.Nonce), Digest: forged.Digest(), ID: pkie.CT, Status: pecwire.ProofUnsupported, Text: "forged"})
	ps.prove(real, pkie.CT)
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(sub.Nonce), "alpha", pkie.CT)
	if d := c.Status().Dropped; d != 1 {
		t.Fatalf("dropped %d, want the forged outcome", d)
	}
}

func TestRejects(t *testing.T) {
	key := newCloudKey(t)
	for _, tc := range []struct {
		code pecwire.RejectCode
		want pecwire.ProofStatus
	}{
		{pecwire.RejectInvalid, pecwire.ProofFailed},
		{pecwire.RejectTooLarge, pecwire.ProofFailed},
		{pecwire.RejectLimited, pecwire.ProofBusy},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
				ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: tc.code, Text: "because"})
			}})
			c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
			pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT, pkie.Revocation))
			if err != nil {
				t.Fatal(err)
			}
			got := waitAll(t, pend)
			for _, id := range []pkie.ID{pkie.CT, pkie.Revocation} {
				o := got[id]
				if o.Status != ProofStatus(tc.want) || !strings.Contains(o.Text, tc.code.String()+": because") || !strings.Contains(o.Cloud, "alpha") {
					t.Fatalf("outcome for %s: %+v", id, o)
				}
			}
		})
	}
}

// TestReregisterOnUnknown: a cloud that forgot the client (it restarted)
// rejects the submission as from an unknown client; the client registers
// again, with a new identifier, and resubmits.
func TestReregisterOnUnknown(t *testing.T) {
	key := newCloudKey(t)
	var n int
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
		ps.p.mu.Lock()
		n++
		first := n == 1
		ps.p.mu.Unlock()
		if first {
			ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: pecwire.RejectUnknown})
			return
		}
		ps.proveAll(m)
	}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	first := c.ID()
	pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "alpha", pkie.CT)
	st := c.Status()
	if st.Reregistrations != 1 || st.Failovers != 0 || c.ID() == first || a.registrations() != 2 {
		t.Fatalf("status %+v, registrations %d", st, a.registrations())
	}
}

func TestExpect(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	nonce := pecwire.Nonce{1, 2, 3, 4, 5, 6, 7, 8}
	pend := c.Expect(Nonce(nonce), []pkie.ID{pkie.CT, pkie.Revocation, pkie.CT}, 500*time.Millisecond)
	// A server submitted for this client: the cloud pushes the proof.
	a.mu.Lock()
	ps := a.sessions[len(a.sessions)-1]
	a.mu.Unlock()
	ps.prove(&pecwire.Submit{ClientID: pecwire.ClientID(c.ID()), Nonce: nonce}, pkie.CT)
	got := waitAll(t, pend)
	if len(got) != 2 || got[pkie.CT].Status != ProofOK || got[pkie.Revocation].Status != ProofTimeout {
		t.Fatalf("outcomes %+v", got)
	}
	if len(a.submitted()) != 0 {
		t.Fatal("Expect submitted something")
	}
}

func TestSubmitBounds(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(*peerSession, *pecwire.Submit) {}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}, MaxPending: 2})
	ctx := context.Background()
	p1, err := c.Submit(ctx, testSubmission(10*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	s := testSubmission(10*time.Second, pkie.CT)
	s.Nonce = p1.Nonce()
	if _, err := c.Submit(ctx, s); err == nil {
		t.Fatal("a nonce already pending was accepted")
	}
	if _, err := c.Submit(ctx, testSubmission(10*time.Second, pkie.CT)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, testSubmission(10*time.Second, pkie.CT)); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("third submission with MaxPending 2: %v", err)
	}
	if o := <-c.Expect(Nonce(pecwire.Nonce{9}), []pkie.ID{pkie.CT}, time.Second).C(); o.Status != ProofBusy {
		t.Fatalf("expectation beyond MaxPending: %+v", o)
	}
	for _, bad := range []Submission{
		testSubmission(0, pkie.CT),
		testSubmission(time.Second),
		{Requests: []pkie.Request{{ID: pkie.CT}}, Budget: time.Second}, // no chain
		{Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.CT}}, Chain: testChain, Budget: time.Second},
		{Requests: []pkie.Request{{ID: pkie.CT}}, Chain: [][]byte{make([]byte, pecwire.DefaultMaxFrame)}, Budget: time.Second},
	} {
		if _, err := c.Submit(ctx, bad); err == nil {
			t.Errorf("submission %+v accepted", bad)
		}
	}
	// Close delivers what is pending at once.
	c.Close()
	o := <-p1.C()
	if o.Status != ProofFailed || !strings.Contains(o.Text, "closed") {
		t.Fatalf("pending outcome after Close: %+v", o)
	}
	if _, ok := <-p1.C(); ok {
		t.Fatal("channel not closed after its last outcome")
	}
	if _, err := c.Submit(ctx, testSubmission(time.Second, pkie.CT)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
}

// TestSlowReader: outcomes are buffered per submission, so a caller that
// never reads one Pending does not hold up another's delivery.
func TestSlowReader(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	ids := []pkie.ID{pkie.CT, pkie.Revocation, pkie.Notary, 0xff00, 0xff01}
	for range 20 {
		if _, err := c.Submit(context.Background(), testSubmission(10*time.Second, ids...)); err != nil {
			t.Fatal(err)
		}
	}
	pend, err := c.Submit(context.Background(), testSubmission(10*time.Second, ids...))
	if err != nil {
		t.Fatal(err)
	}
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "alpha", ids...)
}

func TestDialErrors(t *testing.T) {
	key := newCloudKey(t)
	for _, cfg := range []ClientConfig{
		{},
		{Clouds: []*Bundle{bundleOf("a", key, Point{TCP: "127.0.0.1:1"})}, Transport: "udp"},
		{Clouds: []*Bundle{bundleOf("a", key, Point{TCP: "127.0.0.1:1"})}, OnBusy: "wait"},
		{Clouds: []*Bundle{bundleOf("a", key)}},
		{Clouds: []*Bundle{bundleOf("a", cloudKey{pin: "00"}, Point{TCP: "127.0.0.1:1"})}},
		{Clouds: []*Bundle{bundleOf("a", key, Point{TCP: "127.0.0.1:1"})}, Transport: TransportQUIC},
	} {
		if _, err := Dial(context.Background(), cfg); err == nil {
			t.Errorf("Dial(%+v) succeeded", cfg)
		}
	}
}

// TestSubmitDuringFailover: a submission made while the client has no
// cloud waits for the next registration and is sent there.
func TestSubmitDuringFailover(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var hold atomic.Bool
	b := newPeer(t, key, peerBehaviour{beforeRegistered: func() {
		if hold.Load() {
			<-release
		}
	}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point()), bundleOf("beta", key, b.point())}, Transport: TransportTCP})
	hold.Store(true)
	a.close()
	eventually(t, "the session's end", func() bool { return !c.Status().Connected })
	if c.ID() != (ClientID{}) {
		t.Error("an identifier while unregistered")
	}
	pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.Pending != 1 || st.Connected {
		t.Fatalf("status %+v", st)
	}
	once.Do(func() { close(release) })
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "beta", pkie.CT)
}

// TestCloudComesBack: when every cloud is down the client keeps trying,
// and registers again when one returns at its address.
func TestCloudComesBack(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	pt := a.point()
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, Point{TCP: pt.TCP})}, Retry: 20 * time.Millisecond, DialTimeout: time.Second})
	first := c.ID()
	a.close()
	eventually(t, "the session's end", func() bool { return !c.Status().Connected })
	ln, err := net.Listen("tcp", pt.TCP)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", pt.TCP, err)
	}
	b := newPeerOn(t, key, peerBehaviour{}, ln)
	eventually(t, "registration with the cloud back", func() bool { return c.Status().Connected })
	if c.ID() == first || b.registrations() != 1 || c.Status().Failovers != 1 {
		t.Fatalf("status %+v", c.Status())
	}
}

// TestBogusPongs: a cloud that answers pings, but never the pings the
// client sent (a pong for a sequence number ahead, or the first one again),
// has not shown it is alive: the client fails over.
func TestBogusPongs(t *testing.T) {
	for name, f := range map[string]func(uint64) uint64{
		"ahead":  func(s uint64) uint64 { return s + 1 },
		"replay": func(uint64) uint64 { return 0 },
	} {
		t.Run(name, func(t *testing.T) {
			key := newCloudKey(t)
			a := newPeer(t, key, peerBehaviour{pongSeq: f})
			b := newPeer(t, key, peerBehaviour{})
			// Beta may lose a session to a stall of the loaded machine
			// too: at least one failover, ending at beta.
			c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point()), bundleOf("beta", key, b.point())}, Keepalive: 250 * time.Millisecond})
			eventually(t, "failover", func() bool { st := c.Status(); return st.Connected && st.Cloud == "beta" })
			if st := c.Status(); st.Failovers < 1 || !strings.Contains(st.LastError, "pings unanswered") {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestProofFromRefusingCloudDropped: a cloud that refuses a submission as
// busy and then pushes a proof for it anyway is not where the submission
// is any more: only the proof from the point that took it is delivered.
func TestProofFromRefusingCloudDropped(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{onSubmit: func(ps *peerSession, m *pecwire.Submit) {
		ps.send(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: pecwire.RejectBusy})
		ps.send(&pecwire.Proof{ClientID: m.ClientID, Nonce: m.Nonce, Digest: m.Digest(), ID: pkie.CT, Proof: &pkie.Proof{ID: pkie.CT, Body: []byte("forged")}})
	}})
	release := make(chan struct{})
	b := newPeer(t, key, peerBehaviour{beforeRegistered: func() { <-release }})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point()), bundleOf("beta", key, b.point())}})
	pend, err := c.Submit(context.Background(), testSubmission(20*time.Second, pkie.CT))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the forged proof's arrival", func() bool { return c.Status().Dropped == 1 })
	open()
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(pend.Nonce()), "beta", pkie.CT)
}

// TestFlappingCloud: a cloud that registers the client and drops the
// session at once, every time. After the second such session in a row the
// client waits Retry before registering again instead of reconnecting in a
// loop (Retry is an hour here: no third registration).
func TestFlappingCloud(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{dropAfterRegistered: true})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}, Transport: TransportTCP, Retry: time.Hour})
	eventually(t, "the second registration", func() bool { return a.registrations() >= 2 })
	time.Sleep(300 * time.Millisecond)
	if n := a.registrations(); n != 2 {
		t.Fatalf("%d registrations with a cloud that drops every session at once, want 2", n)
	}
	if st := c.Status(); st.Connected || st.Failovers != 1 || !strings.Contains(st.LastError, "go away") {
		t.Fatalf("status %+v", st)
	}
}

// TestJoinErrors: failures of several attempts read as one line, and
// errors.Is and errors.As still reach each.
func TestJoinErrors(t *testing.T) {
	busy := &pecwire.Error{Code: pecwire.RejectBusy, Text: "busy"}
	err := fmt.Errorf("pec: no cloud registered: %w", joinErrors([]error{
		fmt.Errorf("cloud a: %w", context.DeadlineExceeded), nil, fmt.Errorf("cloud b: %w", busy)}))
	if got, want := err.Error(), "pec: no cloud registered: cloud a: context deadline exceeded; cloud b: cloud: busy: busy"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	var pe *pecwire.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe != busy {
		t.Errorf("errors.Is/As do not reach the parts of %v", err)
	}
	if joinErrors(nil) != nil || joinErrors([]error{nil}) != nil || joinErrors([]error{busy}) != error(busy) {
		t.Error("joining none or one error is not nil or the error itself")
	}
}

// TestExpectHeldUntilChain: the client–server dialer's expectation is made
// before the handshake, when the chain is unknown and the nonce has just
// gone out in the clear. Outcomes arriving before the chain (a copy with
// another chain, proved first, and the server's own) are held, and once
// the chain is known only the server's are delivered.
func TestExpectHeldUntilChain(t *testing.T) {
	key := newCloudKey(t)
	a := newPeer(t, key, peerBehaviour{})
	c := dial(t, ClientConfig{Clouds: []*Bundle{bundleOf("alpha", key, a.point())}})
	sub := testSubmission(10*time.Second, pkie.CT, pkie.Revocation)
	sub.Nonce = Nonce(pecwire.Nonce{8, 7, 6, 5, 4, 3, 2, 1})
	pend := c.expectHeld(sub.Nonce, []pkie.ID{pkie.CT, pkie.Revocation}, 10*time.Second)
	a.mu.Lock()
	ps := a.sessions[len(a.sessions)-1]
	a.mu.Unlock()
	real := &pecwire.Submit{ClientID: pecwire.ClientID(c.ID()), Nonce: pecwire.Nonce(sub.Nonce), ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain}
	forged := *real
	forged.Chain = [][]byte{{0x30, 0x03, 9, 9, 9}}
	for _, id := range []pkie.ID{pkie.CT, pkie.Revocation} {
		ps.send(&pecwire.Proof{ClientID: pecwire.ClientID(c.ID()), Nonce: pecwire.Nonce(sub.Nonce), Digest: forged.Digest(), ID: id, Status: pecwire.ProofFailed, Text: "forged"})
	}
	ps.prove(real, pkie.CT)
	eventually(t, "outcomes held", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(pend.held) == 3
	})
	select {
	case o := <-pend.C():
		t.Fatalf("delivered before the chain was known: %+v", o)
	default:
	}
	c.bindExpected(pend, sub)
	ps.prove(real, pkie.Revocation)
	wantProofs(t, waitAll(t, pend), pecwire.Nonce(sub.Nonce), "alpha", pkie.CT, pkie.Revocation)
	if d := c.Status().Dropped; d != 2 {
		t.Fatalf("dropped %d, want the 2 forged outcomes", d)
	}
}
