package pec

// One session with one point of presence of a cloud: registration over
// QUIC or TLS over TCP, the read loop, keepalives, and noticing its death.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// session is one registered stream with one point of presence.
type session struct {
	conn      *pecwire.Conn
	t         target
	addr      string
	transport string
	label     string
	id        ClientID
	keepalive time.Duration
	maxFrame  int
	started   time.Time // start of the race that opened it
	at        time.Time // Registered

	// ticketKey mints the PEC extension's tickets (Ticket); nil
	// if the connection exports none, and then no extension names this
	// session.
	ticketKey []byte

	// guarded by Client.mu
	aux  bool
	refs int
	dead bool
	// tickets counts the tickets minted on this session.
	tickets uint32

	// answered is set once the cloud answered a ping or delivered an
	// outcome on this session.
	answered atomic.Bool

	pmu      sync.Mutex
	sent     uint64
	sentAt   time.Time
	ponged   uint64
	misses   int
	rtt      time.Duration
	lastPong time.Time

	closeOnce sync.Once
}

func (s *session) close() { s.closeOnce.Do(func() { s.conn.Close() }) }

// registerPoint registers with one point of presence within DialTimeout.
// In auto mode it starts QUIC, then TLS over TCP after FallbackDelay or as
// soon as QUIC fails; the first to register wins and the other is closed.
func (c *Client) registerPoint(ctx context.Context, t target, start time.Time) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	pt := c.cfg.Clouds[t.b].Points[t.p]
	only := c.cfg.Transport
	if only == TransportAuto {
		switch {
		case pt.QUIC == "":
			only = TransportTCP
		case pt.TCP == "":
			only = TransportQUIC
		}
	}
	switch only {
	case TransportQUIC:
		if pt.QUIC == "" {
			return nil, fmt.Errorf("point %d has no quic address", t.p+1)
		}
		return c.register(ctx, t, TransportQUIC, pt.QUIC, start)
	case TransportTCP:
		if pt.TCP == "" {
			return nil, fmt.Errorf("point %d has no tcp address", t.p+1)
		}
		return c.register(ctx, t, TransportTCP, pt.TCP, start)
	}
	type result struct {
		s   *session
		err error
	}
	results := make(chan result, 2)
	attempt := func(transport, addr string) {
		c.wg.Go(func() {
			s, err := c.register(ctx, t, transport, addr, start)
			results <- result{s, err}
		})
	}
	attempt(TransportQUIC, pt.QUIC)
	running, tcpStarted := 1, false
	timer := time.NewTimer(c.cfg.FallbackDelay)
	defer timer.Stop()
	var errs []error
	for {
		select {
		case <-timer.C:
			if !tcpStarted {
				tcpStarted = true
				running++
				attempt(TransportTCP, pt.TCP)
			}
		case r := <-results:
			running--
			if r.err == nil {
				if left := running; left > 0 {
					c.wg.Go(func() {
						for range left {
							if r := <-results; r.s != nil {
								r.s.close()
							}
						}
					})
				}
				return r.s, nil // the deferred cancel stops the loser
			}
			errs = append(errs, r.err)
			if !tcpStarted {
				tcpStarted = true
				running++
				attempt(TransportTCP, pt.TCP)
			} else if running == 0 {
				return nil, joinErrors(errs)
			}
		}
	}
}

// register opens a session over one transport and registers, by ctx's
// deadline.
func (c *Client) register(ctx context.Context, t target, transport, addr string, start time.Time) (*session, error) {
	var conn *pecwire.Conn
	var err error
	if transport == TransportQUIC {
		conn, err = pecwire.DialQUIC(ctx, addr, c.tls[t.b], c.qc)
	} else {
		conn, err = pecwire.DialTCP(ctx, addr, c.tls[t.b])
	}
	if err != nil {
		return nil, err
	}
	// Recv honours deadlines, not contexts: closing the connection is what
	// stops it when the race is decided elsewhere.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	deadline, _ := ctx.Deadline()
	sent := time.Now()
	var m pecwire.Message
	err = conn.Send(&pecwire.Register{Version: pecwire.Version}, deadline)
	if err == nil {
		m, err = conn.Recv(deadline)
	}
	now := time.Now()
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("%s %s: registration: %w", transport, addr, ctx.Err())
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s %s: registration: %w", transport, addr, err)
	}
	r, ok := m.(*pecwire.Registered)
	if !ok || r.Version != pecwire.Version {
		conn.Close()
		if e, isErr := m.(*pecwire.Error); isErr {
			return nil, fmt.Errorf("%s %s: registration refused: %w", transport, addr, e)
		}
		if ok {
			return nil, fmt.Errorf("%s %s: cloud speaks version %d, this client %d", transport, addr, r.Version, pecwire.Version)
		}
		return nil, fmt.Errorf("%s %s: cloud answered Register with message type %d", transport, addr, m.Type())
	}
	s := &session{
		conn: conn, t: t, addr: addr, transport: transport,
		label:   fmt.Sprintf("%s %s via %s", bundleName(c.cfg.Clouds[t.b]), addr, transport),
		id:      ClientID(r.ClientID),
		started: start, at: now, rtt: now.Sub(sent),
		maxFrame: int(r.MaxFrame),
	}
	if key, err := conn.TicketKey(); err == nil {
		s.ticketKey = key
	} else {
		c.log.Warn("pec: no ticket key for the PEC extension; connections go client-only", "cloud", s.label, "err", err)
	}
	if s.maxFrame <= 0 || s.maxFrame > pecwire.MaxFrameLimit {
		s.maxFrame = pecwire.DefaultMaxFrame
	}
	s.keepalive = r.Keepalive
	if s.keepalive <= 0 {
		s.keepalive = DefaultKeepalive
	}
	s.keepalive = min(max(s.keepalive, minKeepalive), maxKeepalive)
	if c.cfg.Keepalive > 0 {
		s.keepalive = min(s.keepalive, c.cfg.Keepalive)
	}
	return s, nil
}

// startSession starts s's reader and pinger.
func (c *Client) startSession(s *session) {
	c.wg.Go(func() { c.readLoop(s) })
	c.wg.Go(func() { c.pingLoop(s) })
}

func (c *Client) readLoop(s *session) {
	for {
		m, err := s.conn.Recv(time.Time{})
		if err != nil {
			c.failed(s, time.Now(), fmt.Errorf("connection failed: %w", err), false)
			return
		}
		switch m := m.(type) {
		case *pecwire.Pong:
			s.pong(m.Seq)
		case *pecwire.Proof:
			c.onProof(s, m)
		case *pecwire.Reject:
			c.onReject(s, m)
		case *pecwire.Error:
			c.failed(s, time.Now(), fmt.Errorf("cloud ended the session: %w", m), false)
			return
		default:
			c.failed(s, time.Now(), fmt.Errorf("cloud sent message type %d, which only clients send", m.Type()), false)
			return
		}
	}
}

func (s *session) pong(seq uint64) {
	now := time.Now()
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if seq > s.sent || seq <= s.ponged {
		return // never sent, or answered already: proves nothing
	}
	s.ponged = seq
	s.misses = 0
	s.answered.Store(true)
	s.lastPong = now
	if seq == s.sent {
		s.rtt = now.Sub(s.sentAt)
	}
}

// pingLoop pings every keepalive interval. A ping is missed when its pong
// has not come by the next tick; MissedPings in a row, and the session is
// dead from the first missed deadline on.
func (c *Client) pingLoop(s *session) {
	t := time.NewTicker(s.keepalive)
	defer t.Stop()
	var firstMiss time.Time
	for {
		select {
		case <-c.base.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			dead := s.dead
			c.mu.Unlock()
			if dead {
				return
			}
			s.pmu.Lock()
			if s.ponged < s.sent {
				s.misses++
				if s.misses == 1 {
					firstMiss = now
				}
			}
			misses := s.misses
			s.sent++
			s.sentAt = now
			seq := s.sent
			s.pmu.Unlock()
			if misses >= c.cfg.MissedPings {
				c.failed(s, firstMiss, fmt.Errorf("%d pings unanswered", misses), false)
				return
			}
			// The deadline counts from now, not from the tick: after a
			// stall (a loaded machine, a resumed laptop) the tick is late,
			// and a deadline already past would end a live session on
			// the first ping instead of after MissedPings.
			if err := s.conn.Send(&pecwire.Ping{Seq: seq}, time.Now().Add(s.keepalive)); err != nil {
				c.failed(s, now, fmt.Errorf("ping: %w", err), false)
				return
			}
		}
	}
}

// failed ends session s (once): at is when it died. The current session's
// death goes to run for failover; an auxiliary session's submissions move
// to the current session.
func (c *Client) failed(s *session, at time.Time, err error, reregister bool) {
	c.mu.Lock()
	if s.dead || c.closed {
		c.mu.Unlock()
		return
	}
	s.dead = true
	c.st.LastError = fmt.Sprintf("%s: %v", s.label, err)
	var resend []outgoing
	for _, p := range c.pending {
		if p.via == s {
			p.via = nil
		}
	}
	cur := c.cur
	if s.aux {
		delete(c.aux, s.t)
		if cur != nil {
			resend = c.unsentLocked(cur)
		}
	} else if s == cur {
		c.cur = nil
	}
	c.mu.Unlock()
	s.close()
	if s.aux {
		c.log.Info("pec: auxiliary session ended", "cloud", s.label, "err", err)
		c.sendAll(cur, resend)
		return
	}
	if s != cur {
		return
	}
	c.log.Warn("pec: cloud session ended; failing over", "cloud", s.label, "client", s.id, "err", err)
	select {
	case c.events <- event{s: s, at: at, err: err, reregister: reregister}:
	case <-c.base.Done():
	}
}
