package pec

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie/internal/pecwire"
)

// Transports a ClientConfig may ask for.
const (
	TransportAuto = "auto" // QUIC, and TLS over TCP raced against it after FallbackDelay
	TransportQUIC = "quic" // QUIC only
	TransportTCP  = "tcp"  // TLS over TCP only
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
