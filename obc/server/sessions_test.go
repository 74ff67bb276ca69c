package server

import (
	"errors"
	"testing"
	"time"

	"github.com/pkie/pkie/obc"
)

// TestSessionsBounds: a session opens only on the identity it was started
// on and until it ends or expires; an identity at its bound ends its own
// oldest session; a client address or the table at its bound refuses new
// sessions and never ends anyone else's; ended and expired sessions free
// their places, so the table never holds more than Max.
func TestSessionsBounds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s, err := NewSessions(SessionLimits{TTL: time.Hour, Max: 4, PerClient: 3, PerIdentity: 2}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := obc.Identity{1}, obc.Identity{2}, obc.Identity{3}, obc.Identity{4}
	start := func(id obc.Identity, client string) Session {
		t.Helper()
		sess, err := s.Start(id, client, "alice")
		if err != nil {
			t.Fatalf("Start(%x, %s): %v", id[:1], client, err)
		}
		return sess
	}
	a1 := start(a, "10.0.0.1")
	if got, ok := s.Lookup(a1.ID, a); !ok || got.User != "alice" || got.Identity != a {
		t.Fatalf("Lookup of a live session: %+v %v", got, ok)
	}
	if _, ok := s.Lookup(a1.ID, b); ok {
		t.Fatal("a session opened on another identity")
	}
	if s.End(a1.ID, b) {
		t.Fatal("another identity ended the session")
	}
	a2 := start(a, "10.0.0.1")
	a3 := start(a, "10.0.0.1") // a's third: ends a1, a's oldest
	if _, ok := s.Lookup(a1.ID, a); ok {
		t.Error("an identity's oldest session survives its bound")
	}
	start(b, "10.0.0.1") // the address's third
	if _, err := s.Start(c, "10.0.0.1", "eve"); !errors.Is(err, ErrClientSessionsFull) {
		t.Errorf("a fourth session for the address: %v, want ErrClientSessionsFull", err)
	}
	start(c, "10.0.0.2") // the table's fourth
	if _, err := s.Start(d, "10.0.0.3", "eve"); !errors.Is(err, ErrSessionsFull) {
		t.Errorf("a fifth session: %v, want ErrSessionsFull", err)
	}
	for _, sess := range []Session{a2, a3} {
		if _, ok := s.Lookup(sess.ID, a); !ok {
			t.Errorf("a refused start ended session %s", sess.ID)
		}
	}
	if !s.End(a2.ID, a) || s.End(a2.ID, a) {
		t.Fatal("End: want true once, then false")
	}
	if _, ok := s.Lookup(a2.ID, a); ok {
		t.Error("an ended session opens")
	}
	start(d, "10.0.0.3") // the place a2 freed
	if s.Len() != 4 {
		t.Errorf("Len = %d, want 4", s.Len())
	}
	now = now.Add(time.Hour)
	if _, ok := s.Lookup(a3.ID, a); ok {
		t.Error("an expired session opens")
	}
	start(a, "10.0.0.1") // expired ones make room
	if s.Len() != 1 {
		t.Errorf("after expiry Len = %d, want 1", s.Len())
	}
	if _, err := NewSessions(SessionLimits{TTL: time.Hour, Max: 1, PerClient: 0, PerIdentity: 1}, nil); err == nil {
		t.Error("a zero bound accepted")
	}
}
