package pec

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Transports a ClientConfig may ask for.
const (
	TransportAuto = "auto"       // QUIC, and TLS over TCP raced against it after FallbackDelay
	TransportQUIC = pecwire.QUIC // QUIC only
	TransportTCP  = pecwire.TCP  // TLS over TCP only
)

// Busy policies (ClientConfig.OnBusy).
const (
	BusyNext = "next" // retry a busy submission once at the next point of presence or cloud
	BusyFail = "fail" // deliver ProofBusy at once
)

// Defaults of ClientConfig.
const (
	DefaultFallbackDelay = 300 * time.Millisecond
	DefaultMissedPings   = 3
	// DefaultKeepalive is the ping interval when neither the configuration
	// nor the cloud names one.
	DefaultKeepalive   = 15 * time.Second
	DefaultDialTimeout = 5 * time.Second
	DefaultMaxPending  = 1024
	DefaultRetry       = time.Second

	// minKeepalive and maxKeepalive bound the interval a cloud can
	// announce: it can neither make the client ping in a tight loop nor
	// stop it from noticing, over TCP, that the cloud is gone.
	minKeepalive = 50 * time.Millisecond
	maxKeepalive = time.Minute
	maxRetry     = 30 * time.Second
)

// Errors of Submit.
var (
	ErrClosed         = errors.New("pec: client closed")
	ErrTooManyPending = errors.New("pec: too many submissions pending")
)

// ClientConfig configures a Client. Zero values take the defaults.
type ClientConfig struct {
	// Clouds are the clouds the client may use, in preference order;
	// failover goes down the list and wraps around.
	Clouds []*Bundle
	// Transport is TransportAuto (default), TransportQUIC or TransportTCP.
	Transport string
	// FallbackDelay is how long, in auto mode, QUIC has to register
	// before TLS over TCP is started beside it (at once if QUIC fails);
	// the first session to register wins and the other is closed. It is
	// also the stagger between points of presence tried in order after a
	// failover. Default DefaultFallbackDelay.
	FallbackDelay time.Duration
	// Keepalive is the ping interval. Zero: the interval the cloud
	// announced when the client registered. The client never pings less
	// often than the cloud announced, or the cloud would forget it.
	Keepalive time.Duration
	// MissedPings is how many consecutive pings may go unanswered before
	// the cloud is declared dead and the next point of presence or cloud
	// is tried. Default DefaultMissedPings.
	MissedPings int
	// OnBusy is BusyNext (default) or BusyFail: what to do with a
	// submission a cloud refuses as busy or as over this client's share
	// (RejectBusy, RejectLimited). BusyNext resubmits it once, within its
	// budget, to the next point of presence or cloud over a session of its
	// own, while the client stays registered where it is; a second refusal,
	// or no other point registering in time, is ProofBusy.
	OnBusy string
	// Logger receives the client's operational messages; nil discards them.
	Logger *slog.Logger

	// DialTimeout bounds one registration attempt with one point of
	// presence: handshake, Register and Registered. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxPending bounds the submissions and expectations pending at once.
	// Default DefaultMaxPending.
	MaxPending int
	// Retry is how long the client waits before trying again after every
	// point of every cloud failed to register during a failover, and
	// before registering again after the second session in a row that a
	// cloud ended before answering anything; it doubles each time, up to
	// 30s. Default DefaultRetry.
	Retry time.Duration

	// Forwarder, when set, is the privacy forwarder's bundle: the client
	// runs in privacy mode (privacy.go) and never contacts a cloud;
	// its submissions go sealed to Clouds[0]'s HPKE key through the
	// forwarder. EphIDBatch is how many identifiers it fetches at a
	// time (default DefaultEphIDBatch).
	Forwarder  *Bundle
	EphIDBatch int
}

// ClientStatus describes a client's session.
type ClientStatus struct {
	// Connected reports whether the client is registered with a cloud now;
	// false during a failover.
	Connected bool
	// Cloud is the name of the bundle in use, Point the address of its
	// point of presence and Transport the transport that won the race.
	Cloud, Point, Transport string
	// ClientID is the identifier the cloud gave the client.
	ClientID ClientID
	// Since is when the current session registered.
	Since time.Time
	// Registration is how long the current session took to register, from
	// the start of Dial or of the failover that opened it to Registered.
	Registration time.Duration
	// RTT is the round trip of the latest answered ping (of the
	// registration until the first pong).
	RTT time.Duration
	// Keepalive is the ping interval in use, and LastPong when the latest
	// answer to one arrived (zero: none yet on this session).
	Keepalive time.Duration
	LastPong  time.Time
	// Failovers counts moves to another point of presence or cloud after
	// the one in use died; LastFailover is how long the latest took, from
	// the first missed pong deadline (or the connection's failure) to the
	// new Registered.
	Failovers    int
	LastFailover time.Duration
	// Reregistrations counts new registrations after a cloud forgot the
	// client (Reject "unknown client").
	Reregistrations int
	// Pending counts submissions and expectations not yet complete.
	Pending int
	// Dropped counts outcomes dropped on arrival: for nonces nothing is
	// pending for, for enhancements not requested or already delivered, or
	// naming another client.
	Dropped uint64
	// LastError says why the latest session ended.
	LastError string
}

// Client is a registered session with a PEC cloud, kept alive and moved
// to another point of presence or cloud when it dies. It is safe for
// concurrent use.
type Client struct {
	cfg  ClientConfig
	log  *slog.Logger
	tls  []*tls.Config // by bundle
	qc   *quic.Config
	base context.Context
	stop context.CancelFunc
	// events carries the death of the current session to run.
	events chan event
	wg     sync.WaitGroup
	// flaps counts sessions in a row that ended before the cloud answered
	// anything on them; only run touches it.
	flaps int

	mu      sync.Mutex
	closed  bool
	cur     *session
	aux     map[target]*session // sessions opened to retry busy submissions elsewhere
	ranked  [][]int             // per bundle, points in the order they registered in its latest race
	pending map[Nonce]*Pending
	st      ClientStatus // counters; the session's fields are filled in by Status

	priv *privacy // privacy mode; nil otherwise
}

type target struct{ b, p int }

type event struct {
	s          *session
	at         time.Time
	err        error
	reregister bool
}

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

// Dial registers with the nearest point of presence of the first reachable
// cloud of cfg.Clouds and keeps the session alive until Close. It races the
// registration with all points of a bundle at once; the first to answer
// Registered wins, and the order in which the others answer is remembered
// for failover. ctx bounds Dial only, not the session.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Forwarder != nil {
		return dialPrivate(ctx, c)
	}
	start := time.Now()
	var errs []error
	for b := range c.cfg.Clouds {
		s, err := c.race(ctx, c.allPoints(b), 0, true, start)
		if err == nil {
			c.mu.Lock()
			c.cur = s
			c.mu.Unlock()
			c.startSession(s)
			c.log.Info("pec: registered", "cloud", s.label, "client", s.id, "took", s.at.Sub(start))
			c.wg.Go(c.run)
			return c, nil
		}
		errs = append(errs, fmt.Errorf("cloud %s: %w", bundleName(c.cfg.Clouds[b]), err))
		if ctx.Err() != nil {
			break
		}
	}
	c.stop()
	c.wg.Wait()
	return nil, fmt.Errorf("pec: no cloud registered: %w", joinErrors(errs))
}

func newClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Clouds) == 0 {
		return nil, errors.New("pec: no cloud configured")
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportAuto
	case TransportAuto, TransportQUIC, TransportTCP:
	default:
		return nil, fmt.Errorf("pec: transport %q: want auto, quic or tcp", cfg.Transport)
	}
	switch cfg.OnBusy {
	case "":
		cfg.OnBusy = BusyNext
	case BusyNext, BusyFail:
	default:
		return nil, fmt.Errorf("pec: busy policy %q: want next or fail", cfg.OnBusy)
	}
	if cfg.FallbackDelay <= 0 {
		cfg.FallbackDelay = DefaultFallbackDelay
	}
	if cfg.MissedPings <= 0 {
		cfg.MissedPings = DefaultMissedPings
	}
	if cfg.Keepalive < 0 {
		return nil, errors.New("pec: negative keepalive")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	c := &Client{
		cfg:     cfg,
		log:     cfg.Logger,
		events:  make(chan event, 1),
		aux:     map[target]*session{},
		ranked:  make([][]int, len(cfg.Clouds)),
		pending: map[Nonce]*Pending{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for i, b := range cfg.Clouds {
		if b == nil {
			return nil, fmt.Errorf("pec: cloud %d: nil bundle", i+1)
		}
		if err := b.Check(); err != nil {
			return nil, fmt.Errorf("pec: cloud %s: %w", bundleName(b), err)
		}
		pin, _ := b.Pin()
		c.tls = append(c.tls, pecwire.ClientTLS(pin))
	}
	// QUIC's own keepalives keep NAT bindings between the client's pings;
	// its idle timeout is a backstop behind the pings, which decide when a
	// cloud is dead. A handshake that gets no answer is given up quickly:
	// with UDP blocked, TCP is already racing it.
	idle := 30 * time.Second
	if d := cfg.Keepalive * time.Duration(cfg.MissedPings+1); d > idle {
		idle = d
	}
	c.qc = &quic.Config{
		HandshakeIdleTimeout: min(2*time.Second, cfg.DialTimeout),
		MaxIdleTimeout:       idle,
		KeepAlivePeriod:      10 * time.Second,
	}
	c.base, c.stop = context.WithCancel(context.Background())
	return c, nil
}

func bundleName(b *Bundle) string {
	if b.Name == "" {
		return "(unnamed)"
	}
	return b.Name
}

func (c *Client) allPoints(b int) []target {
	ts := make([]target, len(c.cfg.Clouds[b].Points))
	for p := range ts {
		ts[p] = target{b, p}
	}
	return ts
}

// orderLocked returns bundle b's points, those that registered in its
// latest race first, in the order they did.
func (c *Client) orderLocked(b int) []int {
	seen := map[int]bool{}
	var o []int
	for _, p := range c.ranked[b] {
		if !seen[p] {
			seen[p] = true
			o = append(o, p)
		}
	}
	for p := range c.cfg.Clouds[b].Points {
		if !seen[p] {
			o = append(o, p)
		}
	}
	return o
}

// race registers with one of ts. Attempt i starts stagger after attempt
// i-1, or as soon as every attempt started so far has failed; stagger zero
// starts them all at once. The first session to register is returned. With
// learn, the others run on (not beyond DialTimeout) and the order in which
// they register is remembered for failover, each closed as it does;
// otherwise they are cancelled. Registration times count from start.
func (c *Client) race(ctx context.Context, ts []target, stagger time.Duration, learn bool, start time.Time) (*session, error) {
	if len(ts) == 0 {
		return nil, errors.New("no point of presence to try")
	}
	actx, acancel := context.WithCancel(c.base)
	detach := context.AfterFunc(ctx, acancel)
	type result struct {
		i   int
		s   *session
		err error
	}
	results := make(chan result, len(ts))
	next, running := 0, 0
	launch := func() {
		i := next
		next++
		running++
		c.wg.Go(func() {
			s, err := c.registerPoint(actx, ts[i], start)
			results <- result{i, s, err}
		})
	}
	var tick <-chan time.Time
	var timer *time.Timer
	if stagger <= 0 {
		for next < len(ts) {
			launch()
		}
	} else {
		launch()
		timer = time.NewTimer(stagger)
		defer timer.Stop()
		tick = timer.C
	}
	var errs []error
	for {
		if running == 0 && next == len(ts) {
			detach()
			acancel()
			return nil, joinErrors(errs)
		}
		select {
		case <-tick:
			if next < len(ts) {
				launch()
				timer.Reset(stagger)
			}
		case r := <-results:
			running--
			if r.err != nil {
				errs = append(errs, r.err)
				if running == 0 && next < len(ts) {
					launch()
					if timer != nil {
						timer.Reset(stagger)
					}
				}
				continue
			}
			if learn {
				detach() // the losers run on to say how near they are
				c.mu.Lock()
				c.ranked[ts[r.i].b] = []int{ts[r.i].p}
				c.mu.Unlock()
			} else {
				acancel()
			}
			left := running
			c.wg.Go(func() {
				defer acancel()
				for range left {
					r := <-results
					if r.s == nil {
						continue
					}
					r.s.close()
					if learn {
						c.mu.Lock()
						c.ranked[ts[r.i].b] = append(c.ranked[ts[r.i].b], ts[r.i].p)
						c.mu.Unlock()
					}
				}
			})
			return r.s, nil
		case <-ctx.Done():
			left := running
			c.wg.Go(func() {
				for range left {
					if r := <-results; r.s != nil {
						r.s.close()
					}
				}
			})
			return nil, ctx.Err()
		}
	}
}

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

// run fails over when the current session dies.
func (c *Client) run() {
	for {
		select {
		case <-c.base.Done():
			return
		case ev := <-c.events:
			c.failover(ev)
		}
	}
}

type stage struct {
	ts      []target
	stagger time.Duration
	learn   bool
}

// planLocked is the failover order after the session with t died: the
// other points of its cloud in the order they registered last (nearest
// first), then each following cloud's points raced, wrapping around to the
// same cloud's. A cloud that forgot the client is asked again first.
func (c *Client) planLocked(t target, again bool) []stage {
	var st []stage
	if again {
		st = append(st, stage{ts: []target{t}})
	}
	var rest []target
	for _, p := range c.orderLocked(t.b) {
		if p != t.p {
			rest = append(rest, target{t.b, p})
		}
	}
	if len(rest) > 0 {
		st = append(st, stage{ts: rest, stagger: c.cfg.FallbackDelay})
	}
	n := len(c.cfg.Clouds)
	for k := 1; k <= n; k++ {
		st = append(st, stage{ts: c.allPoints((t.b + k) % n), learn: true})
	}
	return st
}

func (c *Client) failover(ev event) {
	// A cloud that registers the client and drops it before answering
	// anything would otherwise have it reconnecting in a tight loop: after
	// the second such session in a row, wait Retry (doubling) first.
	if ev.s.answered.Load() {
		c.flaps = 0
	} else {
		c.flaps++
	}
	if c.flaps >= 2 {
		wait := min(c.cfg.Retry<<min(c.flaps-2, 16), maxRetry)
		c.log.Warn("pec: sessions end before answering anything; waiting before registering again", "wait", wait, "cloud", ev.s.label)
		select {
		case <-c.base.Done():
			return
		case <-time.After(wait):
		}
	}
	if !ev.reregister {
		// The dead point goes last in its cloud's order.
		c.mu.Lock()
		o := c.orderLocked(ev.s.t.b)
		c.ranked[ev.s.t.b] = append(slices.DeleteFunc(o, func(p int) bool { return p == ev.s.t.p }), ev.s.t.p)
		c.mu.Unlock()
	}
	retry := c.cfg.Retry
	for round := 0; ; round++ {
		c.mu.Lock()
		plan := c.planLocked(ev.s.t, ev.reregister && round == 0)
		c.mu.Unlock()
		var errs []error
		for _, st := range plan {
			s, err := c.race(c.base, st.ts, st.stagger, st.learn, ev.at)
			if err == nil {
				c.adopt(s, ev)
				return
			}
			if c.base.Err() != nil {
				return
			}
			errs = append(errs, err)
		}
		c.log.Warn("pec: no cloud registered; trying again", "in", retry, "err", joinErrors(errs))
		select {
		case <-c.base.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
	}
}

// adopt makes s the current session after a failover and resubmits what is
// still pending.
func (c *Client) adopt(s *session, ev event) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.close()
		return
	}
	c.cur = s
	took := s.at.Sub(ev.at)
	if ev.reregister {
		c.st.Reregistrations++
	} else {
		c.st.Failovers++
		c.st.LastFailover = took
	}
	resend := c.unsentLocked(s)
	c.mu.Unlock()
	c.log.Info("pec: registered after failover", "cloud", s.label, "client", s.id, "took", took, "resubmitted", len(resend))
	c.startSession(s)
	c.sendAll(s, resend)
}

type outgoing struct {
	m        *pecwire.Submit
	deadline time.Time
}

// unsentLocked assigns every pending submission that is at no cloud to s.
func (c *Client) unsentLocked(s *session) []outgoing {
	var out []outgoing
	for _, p := range c.pending {
		if p.via == nil && !p.retrying && p.sub != nil && !p.done {
			if m := c.assignLocked(p, s); m != nil {
				out = append(out, outgoing{m, p.deadline})
			}
		}
	}
	return out
}

// assignLocked makes s the cloud of p and returns the Submit to send
// there: the enhancements still missing, the budget still left.
func (c *Client) assignLocked(p *Pending, s *session) *pecwire.Submit {
	left := time.Until(p.deadline)
	if left < time.Millisecond {
		return nil // the timer is about to deliver the timeouts
	}
	if p.size > s.maxFrame {
		c.finishAllLocked(p, ProofFailed, s.label, fmt.Sprintf("submission of %d bytes exceeds the cloud's limit of %d", p.size, s.maxFrame))
		return nil
	}
	m := *p.sub
	m.ClientID = pecwire.ClientID(s.id)
	m.Budget = left
	m.Requests = nil
	for _, r := range p.sub.Requests {
		if !p.got[r.ID] {
			m.Requests = append(m.Requests, r)
		}
	}
	// Outcomes of this submission, and of no other with the same nonce,
	// are taken from now on.
	p.digest, p.bound = m.Digest(), true
	p.via = s
	p.cloud = s.label
	if s.aux {
		s.refs++
	}
	return &m
}

func (c *Client) sendAll(s *session, out []outgoing) {
	for _, o := range out {
		if err := s.conn.Send(o.m, o.deadline); err != nil {
			c.failed(s, time.Now(), fmt.Errorf("submit: %w", err), false)
			return
		}
	}
}

// ID returns the identifier the current cloud gave the client; zero during
// a failover. It changes with every new registration.
func (c *Client) ID() ClientID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ClientID{}
	}
	return c.cur.id
}

// Status describes the client's session now.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	st := c.st
	st.Pending = len(c.pending)
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return st
	}
	st.Connected = true
	st.Cloud = bundleName(c.cfg.Clouds[s.t.b])
	st.Point = s.addr
	st.Transport = s.transport
	st.ClientID = s.id
	st.Since = s.at
	st.Registration = s.at.Sub(s.started)
	st.Keepalive = s.keepalive
	s.pmu.Lock()
	st.RTT = s.rtt
	st.LastPong = s.lastPong
	s.pmu.Unlock()
	return st
}

// Close ends the sessions. Everything pending is delivered as ProofFailed
// ("client closed") at once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var ss []*session
	if c.cur != nil {
		ss = append(ss, c.cur)
	}
	for _, s := range c.aux {
		ss = append(ss, s)
	}
	for _, s := range ss {
		s.dead = true
	}
	for _, p := range c.pending {
		c.finishAllLocked(p, ProofFailed, p.cloud, "pec: client closed")
	}
	c.mu.Unlock()
	c.stop()
	for _, s := range ss {
		s.close()
	}
	c.wg.Wait()
	return nil
}

// Submission is one connection's chain for the cloud to prove.
type Submission struct {
	// Nonce names the connection; zero: Submit draws a random one.
	Nonce Nonce
	// ServerName and Port are the server the client connected to.
	ServerName string
	Port       int
	// Chain is the chain the server presented, DER, leaf first.
	Chain [][]byte
	// Requests are the enhancements wanted, with their parameters.
	Requests []pkie.Request
	// Budget is how long the caller will wait for the proofs.
	Budget time.Duration
}

// Outcome is one enhancement's result for one submission, as delivered.
type Outcome struct {
	// ID is the enhancement, Status what became of its proof.
	ID     pkie.ID
	Status ProofStatus
	// Proof is the proof when Status is ProofOK. It is NOT verified:
	// verifying it against the TTP's key is the caller's job.
	Proof *pkie.Proof
	// Text says why, when Status is not ProofOK.
	Text string
	// Received is when the outcome arrived (or was concluded).
	Received time.Time
	// Cloud names the bundle, point of presence and transport that
	// delivered it, or for a timeout the one that failed to.
	Cloud string
}

// Pending is a submission (or an expectation) waiting for its outcomes.
type Pending struct {
	nonce    Nonce
	ids      []pkie.ID
	ch       chan Outcome
	deadline time.Time

	// guarded by Client.mu
	sub *pecwire.Submit // nil for Expect
	// digest is the submission's digest outcomes must carry: that of the
	// Submit last sent, or for an expectation, once bound.
	digest pecwire.Digest
	bound  bool
	// expect is what an expectation's submitter is to submit, its
	// ClientID filled in from the session the outcome arrives on; nil
	// for Expect, which binds to the first outcome's digest.
	expect *pecwire.Submit
	// hold marks an expectation whose chain is not known yet (the
	// client–server dialer's, until the handshake delivers it): its
	// outcomes wait in held, by digest, until bindExpected.
	hold           bool
	held           []heldProof
	size           int
	got            map[pkie.ID]bool
	via            *session
	cloud          string
	busyRetried    bool
	unknownRetried bool
	retrying       bool
	done           bool
	timer          *time.Timer
}

// C delivers one Outcome per requested enhancement, then is closed. At the
// budget the missing ones arrive as ProofTimeout. It is buffered to the
// number of enhancements, so a slow reader never holds up the session.
// Read either C or Wait, not both.
func (p *Pending) C() <-chan Outcome { return p.ch }

// Nonce returns the submission's nonce.
func (p *Pending) Nonce() Nonce { return p.nonce }

// Wait collects the outcomes until all have arrived (by the budget) or ctx
// ends, and returns what it has.
func (p *Pending) Wait(ctx context.Context) map[pkie.ID]Outcome {
	out := make(map[pkie.ID]Outcome, len(p.ids))
	for {
		select {
		case o, ok := <-p.ch:
			if !ok {
				return out
			}
			out[o.ID] = o
		case <-ctx.Done():
			return out
		}
	}
}

func newPending(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	return &Pending{
		nonce: nonce, ids: ids, ch: make(chan Outcome, len(ids)),
		deadline: time.Now().Add(budget), got: make(map[pkie.ID]bool, len(ids)),
	}
}

// deliverLocked hands one outcome to the reader; the buffer holds one per
// ID, so it never blocks.
func (c *Client) deliverLocked(p *Pending, o Outcome) {
	p.got[o.ID] = true
	p.ch <- o
	if len(p.got) == len(p.ids) {
		c.completeLocked(p)
	}
}

func (c *Client) completeLocked(p *Pending) {
	if p.done {
		return
	}
	p.done = true
	close(p.ch)
	if p.timer != nil {
		p.timer.Stop()
	}
	if c.pending[p.nonce] == p {
		delete(c.pending, p.nonce)
	}
	c.releaseLocked(p)
}

// releaseLocked detaches p from its cloud, closing an auxiliary session
// nothing else waits on.
func (c *Client) releaseLocked(p *Pending) {
	s := p.via
	p.via = nil
	if s == nil || !s.aux {
		return
	}
	s.refs--
	if s.refs <= 0 && !s.dead {
		s.dead = true
		delete(c.aux, s.t)
		go s.close()
	}
}

// finishAllLocked delivers status for every enhancement still missing.
func (c *Client) finishAllLocked(p *Pending, st ProofStatus, cloud, text string) {
	if p.done {
		return
	}
	now := time.Now()
	for _, id := range p.ids {
		if !p.got[id] {
			c.deliverLocked(p, Outcome{ID: id, Status: st, Text: text, Received: now, Cloud: cloud})
		}
	}
	c.completeLocked(p)
}

func (c *Client) expire(p *Pending, budget time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	where := p.cloud
	if where == "" {
		where = "any cloud"
	}
	c.finishAllLocked(p, ProofTimeout, p.cloud, fmt.Sprintf("no outcome from %s within the budget of %v", where, budget))
}

// Submit sends a chain to the cloud and returns at once. The Pending
// delivers one Outcome per requested enhancement: a proof (unverified), a
// per-enhancement refusal, the whole submission's refusal repeated for each
// (busy, invalid, too large), or ProofTimeout at the budget. If the cloud
// dies before it answers, the submission is resubmitted after failover
// with what is left of the budget; a busy submission is retried once at
// the next point of presence or cloud when OnBusy is BusyNext. An error
// means nothing was sent: a malformed submission, too many pending, or a
// closed client. ctx bounds the write of the submission.
func (c *Client) Submit(ctx context.Context, sub Submission) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sub.Budget <= 0 {
		return nil, errors.New("pec: submission without a budget")
	}
	if len(sub.Requests) == 0 {
		return nil, errors.New("pec: submission requests no enhancement")
	}
	if sub.Port < 0 || sub.Port > 65535 {
		return nil, fmt.Errorf("pec: port %d out of range", sub.Port)
	}
	if sub.Nonce == (Nonce{}) {
		rand.Read(sub.Nonce[:])
	}
	if c.priv != nil {
		ids := make([]pkie.ID, len(sub.Requests))
		for i, r := range sub.Requests {
			ids[i] = r.ID
		}
		return c.priv.submit(ctx, sub, ids)
	}
	m := &pecwire.Submit{
		Nonce: pecwire.Nonce(sub.Nonce), Budget: sub.Budget, ServerName: sub.ServerName, Port: uint16(sub.Port),
		Requests: sub.Requests, Chain: sub.Chain,
	}
	frame, err := pecwire.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("pec: submission: %w", err)
	}
	ids := make([]pkie.ID, len(sub.Requests))
	for i, r := range sub.Requests {
		ids[i] = r.ID
	}
	p := newPending(sub.Nonce, ids, sub.Budget)
	p.sub, p.size = m, len(frame)-4

	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case len(c.pending) >= c.cfg.MaxPending:
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrTooManyPending, c.cfg.MaxPending)
	case c.pending[p.nonce] != nil:
		c.mu.Unlock()
		return nil, fmt.Errorf("pec: nonce %s is already pending", p.nonce)
	case c.cur != nil && p.size > c.cur.maxFrame:
		c.mu.Unlock()
		return nil, fmt.Errorf("pec: submission of %d bytes exceeds the cloud's limit of %d", p.size, c.cur.maxFrame)
	}
	c.pending[p.nonce] = p
	p.timer = time.AfterFunc(sub.Budget, func() { c.expire(p, sub.Budget) })
	s := c.cur
	var out *pecwire.Submit
	if s != nil {
		out = c.assignLocked(p, s)
	}
	c.mu.Unlock()
	if out != nil {
		deadline := p.deadline
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := s.conn.Send(out, deadline); err != nil {
			// The submission stays pending and goes to the next cloud.
			c.failed(s, time.Now(), fmt.Errorf("submit: %w", err), false)
		}
	}
	return p, nil
}

// Expect registers interest in proofs for a nonce that someone else (a PEC
// server) submits for this client's identifier, with the same delivery as
// Submit. Nothing is resubmitted: after a failover the client's identifier
// changes and such proofs cannot arrive. When the client is closed or
// MaxPending is reached, the Pending delivers ProofFailed or ProofBusy for
// every ID at once.
//
// Expect knows no chain, so it takes the outcomes of the first submission
// with this nonce to reach it (the first outcome binds the digest): a copy
// with another chain submitted by someone who saw the nonce may pre-empt
// the server's. Use ExpectSubmission when the handshake has delivered the
// chain.
func (c *Client) Expect(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	return c.expect(nonce, ids, budget, nil)
}

// ExpectSubmission is Expect for the submission sub describes: the
// connection's nonce, server name, port, requests and the chain the
// handshake delivered. Only outcomes carrying that submission's digest
// (with this client's identifier) are taken, so a copy with the same
// nonce and another chain or requests cannot pre-empt it.
func (c *Client) ExpectSubmission(sub Submission) *Pending {
	ids := make([]pkie.ID, len(sub.Requests))
	for i, r := range sub.Requests {
		ids[i] = r.ID
	}
	return c.expect(sub.Nonce, ids, sub.Budget, &pecwire.Submit{
		Nonce: pecwire.Nonce(sub.Nonce), ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain,
	})
}

func (c *Client) expect(nonce Nonce, ids []pkie.ID, budget time.Duration, tmpl *pecwire.Submit) *Pending {
	var uniq []pkie.ID
	seen := map[pkie.ID]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	p := newPending(nonce, uniq, budget)
	p.expect = tmpl
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		c.finishAllLocked(p, ProofFailed, "", ErrClosed.Error())
		return p
	case len(c.pending) >= c.cfg.MaxPending:
		c.finishAllLocked(p, ProofBusy, "", fmt.Sprintf("%v: %d", ErrTooManyPending, c.cfg.MaxPending))
		return p
	case c.pending[nonce] != nil:
		c.finishAllLocked(p, ProofFailed, "", fmt.Sprintf("pec: nonce %s is already pending", nonce))
		return p
	case len(uniq) == 0:
		c.completeLocked(p)
		return p
	}
	c.pending[nonce] = p
	if c.cur != nil {
		p.cloud = c.cur.label
	}
	p.timer = time.AfterFunc(budget, func() { c.expire(p, budget) })
	return p
}

// heldProof is an outcome that arrived for an expectation before its
// chain was known.
type heldProof struct {
	s  *session
	m  *pecwire.Proof
	at time.Time
}

// maxHeldDigests bounds the submissions whose outcomes an expectation
// holds before its chain is known: copies with the same nonce and other
// chains, which whoever saw the nonce in the ClientHello can submit.
const maxHeldDigests = 8

// expectHeld is Expect for an expectation whose chain the handshake will
// deliver: outcomes are held, not delivered, until bindExpected names the
// submission, so that none of a copy with another chain is taken.
func (c *Client) expectHeld(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	p := c.expect(nonce, ids, budget, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.done {
		p.hold = true
	}
	return p
}

// holdLocked keeps m for p until its chain is known, within bounds.
func (c *Client) holdLocked(p *Pending, s *session, m *pecwire.Proof, now time.Time) {
	digests := map[pecwire.Digest]int{}
	for _, h := range p.held {
		digests[h.m.Digest]++
	}
	n, seen := digests[m.Digest]
	if (!seen && len(digests) >= maxHeldDigests) || n >= len(p.ids) {
		c.st.Dropped++
		return
	}
	p.held = append(p.held, heldProof{s, m, now})
}

// bindExpected names the submission an expectation from expectHeld waits
// for, now that the handshake has delivered the chain: the held outcomes
// of that submission are delivered, the others dropped, and later ones
// are matched by its digest.
func (c *Client) bindExpected(p *Pending, sub Submission) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.priv != nil && c.priv.bindLocked(p, sub) {
		return
	}
	if p.done || !p.hold {
		return
	}
	p.hold = false
	if !p.bound {
		p.expect = &pecwire.Submit{
			Nonce: pecwire.Nonce(p.nonce), ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain,
		}
	}
	held := p.held
	p.held = nil
	for _, h := range held {
		if p.done || h.s.dead || !p.wants(h.m.ID) || !p.matchesLocked(h.s, h.m.Digest) {
			c.st.Dropped++
			continue
		}
		h.s.answered.Store(true)
		c.deliverLocked(p, Outcome{ID: h.m.ID, Status: ProofStatus(h.m.Status), Proof: h.m.Proof, Text: h.m.Text, Received: h.at, Cloud: h.s.label})
	}
}

// matchesLocked reports whether an outcome carrying digest d, arriving on
// s, belongs to p, binding an Expect to the first digest it sees.
func (p *Pending) matchesLocked(s *session, d pecwire.Digest) bool {
	if !p.bound && p.expect != nil {
		m := *p.expect
		m.ClientID = pecwire.ClientID(s.id)
		p.digest, p.bound = m.Digest(), true
	}
	if !p.bound {
		p.digest, p.bound = d, true
	}
	return p.digest == d
}

func (c *Client) onProof(s *session, m *pecwire.Proof) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[Nonce(m.Nonce)]
	if p != nil && !p.done && p.hold && p.sub == nil && ClientID(m.ClientID) == s.id && !s.aux && p.wants(m.ID) {
		c.holdLocked(p, s, m, now)
		return
	}
	switch {
	case p == nil, p.done, ClientID(m.ClientID) != s.id, p.sub != nil && p.via != s, p.sub == nil && s.aux,
		!p.wants(m.ID), !p.matchesLocked(s, m.Digest):
		c.st.Dropped++
		c.log.Debug("pec: outcome dropped", "cloud", s.label, "nonce", m.Nonce, "id", m.ID, "client", m.ClientID)
		return
	}
	s.answered.Store(true)
	c.deliverLocked(p, Outcome{ID: m.ID, Status: ProofStatus(m.Status), Proof: m.Proof, Text: m.Text, Received: now, Cloud: s.label})
}

func (p *Pending) wants(id pkie.ID) bool {
	if p.got[id] {
		return false
	}
	for _, x := range p.ids {
		if x == id {
			return true
		}
	}
	return false
}

func (c *Client) onReject(s *session, m *pecwire.Reject) {
	c.mu.Lock()
	p := c.pending[Nonce(m.Nonce)]
	if p == nil || p.done || (p.sub != nil && p.via != s) || (p.hold && p.sub == nil) || !p.matchesLocked(s, m.Digest) {
		c.st.Dropped++
		c.mu.Unlock()
		return
	}
	why := fmt.Sprintf("cloud %s refused the submission: %s", s.label, m.Code)
	if m.Text != "" {
		why += ": " + m.Text
	}
	switch {
	case (m.Code == pecwire.RejectBusy || m.Code == pecwire.RejectLimited) && c.cfg.OnBusy == BusyNext && p.sub != nil && !p.busyRetried:
		// Another point of presence has its own bounds and shares.
		p.busyRetried = true
		p.retrying = true
		c.releaseLocked(p)
		c.mu.Unlock()
		c.wg.Go(func() { c.retryElsewhere(p, s.t, why) })
		return
	case m.Code == pecwire.RejectUnknown && p.sub != nil && !s.aux && s == c.cur && !p.unknownRetried:
		// The cloud forgot this client (it restarted, or missed our
		// pings): register again and resubmit.
		p.unknownRetried = true
		c.mu.Unlock()
		c.failed(s, time.Now(), errors.New("cloud does not know this client"), true)
		return
	}
	st := ProofFailed
	if m.Code == pecwire.RejectBusy || m.Code == pecwire.RejectLimited {
		st = ProofBusy
	}
	c.finishAllLocked(p, st, s.label, why)
	c.mu.Unlock()
}

// alternativesLocked lists every point but from, nearest of from's cloud
// first, then the other clouds' in preference order.
func (c *Client) alternativesLocked(from target) []target {
	var ts []target
	n := len(c.cfg.Clouds)
	for k := range n {
		b := (from.b + k) % n
		for _, p := range c.orderLocked(b) {
			if (target{b, p}) != from {
				ts = append(ts, target{b, p})
			}
		}
	}
	return ts
}

// retryElsewhere resubmits a submission refused as busy at the next point
// of presence or cloud, within its budget, over an auxiliary session that
// lives as long as submissions use it.
func (c *Client) retryElsewhere(p *Pending, from target, why string) {
	c.mu.Lock()
	ts := c.alternativesLocked(from)
	var s *session
	for _, t := range ts {
		if a := c.aux[t]; a != nil && !a.dead {
			s = a
			break
		}
		if c.cur != nil && c.cur.t == t {
			s = c.cur
			break
		}
	}
	c.mu.Unlock()
	var err error
	fresh := false
	if s == nil && len(ts) > 0 {
		ctx, cancel := context.WithDeadline(c.base, p.deadline)
		s, err = c.race(ctx, ts, c.cfg.FallbackDelay, false, time.Now())
		cancel()
		fresh = err == nil
	}
	c.mu.Lock()
	p.retrying = false
	if !fresh && s != nil && s.dead {
		s, err = nil, errors.New("the session chosen for the retry ended")
	}
	switch {
	case p.done || c.closed:
		c.mu.Unlock()
		if fresh {
			s.close()
		}
		return
	case len(ts) == 0:
		c.finishAllLocked(p, ProofBusy, p.cloud, why+"; no other point of presence to try")
		c.mu.Unlock()
		return
	case s == nil:
		c.finishAllLocked(p, ProofBusy, p.cloud, fmt.Sprintf("%s; no other point of presence registered in time: %v", why, err))
		c.mu.Unlock()
		return
	}
	if fresh {
		if a := c.aux[s.t]; a != nil && !a.dead {
			defer s.close() // another retry opened one meanwhile
			s, fresh = a, false
		} else {
			s.aux = true
			c.aux[s.t] = s
		}
	}
	m := c.assignLocked(p, s)
	if fresh && m == nil {
		// Out of budget (the timer delivers the timeouts): nothing uses s.
		s.dead = true
		delete(c.aux, s.t)
		c.mu.Unlock()
		s.close()
		return
	}
	c.mu.Unlock()
	if fresh {
		c.log.Info("pec: retrying a busy submission elsewhere", "cloud", s.label, "nonce", p.nonce)
		c.startSession(s)
	}
	if m != nil {
		c.sendAll(s, []outgoing{{m, p.deadline}})
	}
}

// joinedErrors is several attempts' failures reported as one. Unlike
// errors.Join, whose message puts each on a line of its own, it joins them
// with "; ": an error is one line, whoever prints it. errors.Is and
// errors.As see every part.
type joinedErrors []error

// joinErrors joins the non-nil errors of errs; nil if there are none, the
// error itself if there is one.
func joinErrors(errs []error) error {
	var j joinedErrors
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return j
}

func (j joinedErrors) Error() string {
	var b strings.Builder
	for i, err := range j {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (j joinedErrors) Unwrap() []error { return j }
