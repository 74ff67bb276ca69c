package server

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/obc"
)

// A channel-bound cookie alone cannot be logged out: its MAC stays valid
// until it expires, so a copy kept from before logout (on the same client)
// opens the session again. Sessions keeps each session on the server; the
// cookie carries only its random id, bound to the channel by a Binder, and
// logging out deletes the record, so no copy of the cookie opens it again.

// Session is one session a Sessions table holds.
type Session struct {
	ID       string       // random, what the cookie carries
	User     string       // what the application logged in
	Identity obc.Identity // the channel identity it was started on
	Client   string       // the client address key it counts against
	// Start is when the session began, Expires when it ends.
	Start   time.Time
	Expires time.Time
}

// SessionLimits bound a Sessions table. Every bound is in force at once.
type SessionLimits struct {
	// TTL is how long a session lives after it starts; required.
	TTL time.Duration
	// Max is the most sessions held; a start beyond it is refused
	// (ErrSessionsFull) rather than ending someone else's session.
	Max int
	// PerClient is the most sessions one client address holds; a start
	// beyond it is refused (ErrClientSessionsFull).
	PerClient int
	// PerIdentity is the most sessions one channel identity (one client
	// key) holds; a start beyond it ends that identity's oldest session:
	// the same client logging in again.
	PerIdentity int
}

// Errors Sessions.Start returns.
var (
	ErrSessionsFull       = errors.New("obc/server: the server holds as many sessions as it may")
	ErrClientSessionsFull = errors.New("obc/server: this client address holds as many sessions as it may")
)

// Sessions is a bounded in-memory table of sessions, each bound to the
// channel identity it was started on. It is safe for concurrent use. It
// lives in memory: a restarted server has no sessions, so every cookie
// from before the restart is refused (a logout is never forgotten).
type Sessions struct {
	lim SessionLimits
	now func() time.Time

	mu        sync.Mutex
	byID      map[string]*list.Element // of *Session, in order
	order     *list.List               // oldest first; TTL is fixed, so also soonest to expire first
	perClient map[string]int
	perIdent  map[obc.Identity][]*list.Element // oldest first, at most PerIdentity
}

// NewSessions returns an empty table. now is the clock (nil: time.Now).
func NewSessions(lim SessionLimits, now func() time.Time) (*Sessions, error) {
	if lim.TTL <= 0 || lim.Max <= 0 || lim.PerClient <= 0 || lim.PerIdentity <= 0 {
		return nil, fmt.Errorf("obc/server: session limits must all be positive: %+v", lim)
	}
	if now == nil {
		now = time.Now
	}
	return &Sessions{lim: lim, now: now, byID: map[string]*list.Element{}, order: list.New(),
		perClient: map[string]int{}, perIdent: map[obc.Identity][]*list.Element{}}, nil
}

// Start starts a session for user on the channel identity id, counted
// against client (a client address key). It first drops expired sessions;
// then, at the identity's bound, ends its oldest session; at the client's
// or the table's bound, refuses.
func (s *Sessions) Start(id obc.Identity, client, user string) (Session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if els := s.perIdent[id]; len(els) >= s.lim.PerIdentity {
		s.remove(els[0])
	}
	if s.perClient[client] >= s.lim.PerClient {
		return Session{}, ErrClientSessionsFull
	}
	if s.order.Len() >= s.lim.Max {
		return Session{}, ErrSessionsFull
	}
	// Cloned: a caller's string may be a slice of a whole request body,
	// which the table would otherwise keep alive with it.
	sess := &Session{ID: s.newID(), User: strings.Clone(user), Identity: id, Client: strings.Clone(client), Start: now, Expires: now.Add(s.lim.TTL)}
	el := s.order.PushBack(sess)
	s.byID[sess.ID] = el
	s.perClient[client]++
	s.perIdent[id] = append(s.perIdent[id], el)
	return *sess, nil
}

// Lookup returns the live session sid names, if it was started on the
// channel identity id. An expired session is removed and not returned.
func (s *Sessions) Lookup(sid string, id obc.Identity) (Session, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[sid]
	if !ok {
		return Session{}, false
	}
	sess := el.Value.(*Session)
	if !now.Before(sess.Expires) {
		s.remove(el)
		return Session{}, false
	}
	if sess.Identity != id {
		return Session{}, false
	}
	return *sess, true
}

// End ends the session sid names if it was started on the channel identity
// id (only the client holding the session's key can end it), and reports
// whether it did.
func (s *Sessions) End(sid string, id obc.Identity) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[sid]
	if !ok || el.Value.(*Session).Identity != id {
		return false
	}
	s.remove(el)
	return true
}

// Len returns how many sessions the table holds, expired ones not yet
// dropped included.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

func (s *Sessions) expire(now time.Time) {
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*Session).Expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *Sessions) remove(el *list.Element) {
	sess := el.Value.(*Session)
	s.order.Remove(el)
	delete(s.byID, sess.ID)
	if s.perClient[sess.Client]--; s.perClient[sess.Client] <= 0 {
		delete(s.perClient, sess.Client)
	}
	els := s.perIdent[sess.Identity]
	for i, e := range els {
		if e == el {
			els = append(els[:i:i], els[i+1:]...)
			break
		}
	}
	if len(els) == 0 {
		delete(s.perIdent, sess.Identity)
	} else {
		s.perIdent[sess.Identity] = els
	}
}

func (s *Sessions) newID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
