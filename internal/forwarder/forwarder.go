// Package forwarder is the PEC privacy forwarder ("Towards Sustainable
// Evolution for the TLS PKI", PEC, ASIA CCS 2018, §7, Privacy
// Enhancements): a relay that knows who its clients are but never what
// they connect to, so that the cloud, which learns what is connected to,
// never learns who.
//
//   - Clients register with it over the messages of internal/pecwire
//     (Register, Registered, Ping, Pong) and prefetch ephemeral
//     identifiers (EphIDRequest → EphIDs), EphID = AES-GCM_k(ClientID)
//     under a fresh nonce (the paper's Equation 1). The forwarder keeps no
//     table of them: it decrypts an identifier to find its client.
//   - A cloud seals each proof to the connection's key and sends it with
//     the identifier (SealedProof); the forwarder decrypts the identifier,
//     finds the client's session and relays the ciphertext.
//   - In the client-only deployment a client's submission, sealed to the
//     cloud's HPKE key (SealedSubmit), is relayed to the cloud on the
//     forwarder's own session, so that the cloud sees the forwarder's
//     address, never the client's; the cloud's sealed proofs come back on
//     it.
//   - Each identifier is used once: its first use (a sealed submission,
//     or the first proof relayed under it) opens one connection's relay
//     window; a second submission, or messages after the window, are
//     refused. Used identifiers are remembered until the expiry sealed
//     inside them.
//
// The forwarder never holds a domain name, a certificate or a proof in the
// clear: submissions are sealed to the cloud, outcomes to the client.
// Every resource is bounded as in the cloud: sessions in total and per
// address, registered clients, frame sizes, queued messages per session,
// the rate of sealed submissions per client, remembered identifiers.
package forwarder

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/sessionserver"
)

// Defaults of Config.
const (
	DefaultKeepalive       = 15 * time.Second
	DefaultMissedPings     = 3
	DefaultHandshake       = 5 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultMaxClients      = 1 << 16
	DefaultMaxSessionsAddr = 1024
	DefaultMaxPending      = 256
	DefaultEphIDLifetime   = time.Hour
	DefaultUseWindow       = 30 * time.Second
	DefaultMaxPerUse       = 32
	DefaultMaxUsed         = 1 << 20
	DefaultSubmitRate      = 50
	DefaultUpstreamPing    = 5 * time.Second
)

// FileReserve is how many of the process's file descriptors sessions may
// never take. A TCP session holds one; the forwarder must still find one
// for its listeners, /healthz and /metrics (at most MaxHTTPConns) and its
// sessions to the clouds it relays to, when client sessions are at their
// bound.
const FileReserve = 128

// MaxHTTPConns and MaxHTTPConnsPerAddr cap the plain-HTTP listener of
// /metrics and /healthz, so that scrapes stay within FileReserve.
const (
	MaxHTTPConns        = 32
	MaxHTTPConnsPerAddr = 8
)

// SessionsFor returns how many sessions an open-file limit allows: the
// limit less FileReserve (zero or less: none).
func SessionsFor(fileLimit int) int { return fileLimit - FileReserve }

// Config configures a Forwarder. Zero values take the defaults.
type Config struct {
	// Certificate is the forwarder's TLS certificate; clients pin its key
	// from the forwarder's bundle.
	Certificate tls.Certificate
	// EphIDKey is k, the AES-256 key of ephemeral identifiers.
	EphIDKey []byte
	// Clouds are the clouds the forwarder relays sealed submissions to,
	// by their bundles; a submission for any other is refused, so the
	// forwarder cannot be used to reach arbitrary addresses.
	Clouds []*pecwire.Bundle
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger

	Keepalive        time.Duration // announced in Registered
	MissedPings      int           // silent intervals before a session is dropped
	HandshakeTimeout time.Duration
	WriteTimeout     time.Duration
	MaxClients       int
	// MaxSessions bounds all sessions: by default MaxClients plus a
	// quarter, at most what FileLimit allows (SessionsFor). New refuses
	// more than that: a session past the open-file limit would take the
	// descriptor /healthz or a session to a cloud needs.
	MaxSessions int
	// FileLimit is the process's open-file limit; zero: read it
	// (httplimit.FileLimit).
	FileLimit          int
	MaxSessionsPerAddr int
	MaxFrame           int
	MaxPending         int
	// EphIDLifetime is how long an issued identifier stays usable.
	EphIDLifetime time.Duration
	// UseWindow is how long after its first use an identifier's
	// connection may still receive messages; MaxPerUse how many.
	UseWindow time.Duration
	MaxPerUse int
	// MaxUsed bounds the identifiers remembered as used.
	MaxUsed int
	// SubmitRate bounds one client's sealed submissions per second (burst
	// twice that).
	SubmitRate float64
	// UpstreamPing is the keepalive of the forwarder's sessions to clouds.
	UpstreamPing time.Duration
	// UpstreamBind is the local address sessions to clouds are opened
	// from over TCP; nil: the system's choice. (QUIC sessions to clouds
	// use the system's choice.)
	UpstreamBind net.IP
	// Tap, if set, is called with every frame the forwarder receives or
	// sends, as it is after TLS (dir "in" or "out"): an audit of what the
	// forwarder holds in the clear. It must not block.
	Tap func(dir string, frame []byte)
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defD(&c.Keepalive, DefaultKeepalive)
	def(&c.MissedPings, DefaultMissedPings)
	defD(&c.HandshakeTimeout, DefaultHandshake)
	defD(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.MaxClients, DefaultMaxClients)
	def(&c.FileLimit, httplimit.FileLimit())
	def(&c.MaxSessions, max(1, min(c.MaxClients+max(c.MaxClients/4, 64), SessionsFor(c.FileLimit))))
	def(&c.MaxSessionsPerAddr, DefaultMaxSessionsAddr)
	def(&c.MaxFrame, pecwire.DefaultMaxFrame)
	def(&c.MaxPending, DefaultMaxPending)
	defD(&c.EphIDLifetime, DefaultEphIDLifetime)
	defD(&c.UseWindow, DefaultUseWindow)
	def(&c.MaxPerUse, DefaultMaxPerUse)
	def(&c.MaxUsed, DefaultMaxUsed)
	if c.SubmitRate <= 0 {
		c.SubmitRate = DefaultSubmitRate
	}
	defD(&c.UpstreamPing, DefaultUpstreamPing)
	if c.MaxFrame > pecwire.MaxFrameLimit {
		c.MaxFrame = pecwire.MaxFrameLimit
	}
}

// Forwarder is a privacy forwarder. Serve it with ServeQUIC and ServeTCP,
// and its HTTP endpoints with Handler.
type Forwarder struct {
	cfg    Config
	log    *slog.Logger
	tls    *tls.Config
	ids    *ephIDs
	used   *usedSet
	m      *metrics
	clouds map[[32]byte]*upstream
	// resetKey is the QUIC stateless reset key, derived from the TLS key.
	resetKey *quic.StatelessResetKey

	mu       sync.Mutex
	clients  map[pecwire.ClientID]*session
	sessions int
	perAddr  map[string]int

	wg sync.WaitGroup
}

// New returns a forwarder.
func New(cfg Config) (*Forwarder, error) {
	cfg.setDefaults()
	if len(cfg.Certificate.Certificate) == 0 || cfg.Certificate.PrivateKey == nil {
		return nil, errors.New("forwarder: no TLS certificate")
	}
	if n := SessionsFor(cfg.FileLimit); cfg.MaxSessions > n || len(cfg.Clouds) > n {
		return nil, fmt.Errorf("forwarder: %d sessions at most, but an open-file limit of %d allows %d (%d descriptors are kept for /healthz, /metrics and the sessions to clouds): raise the limit (ulimit -n) or lower the sessions",
			cfg.MaxSessions, cfg.FileLimit, max(n, 0), FileReserve)
	}
	ids, err := newEphIDs(cfg.EphIDKey)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{
		cfg: cfg, log: log, ids: ids,
		used: newUsedSet(cfg.MaxUsed, cfg.UseWindow, cfg.MaxPerUse), m: newMetrics(),
		clouds: map[[32]byte]*upstream{}, clients: map[pecwire.ClientID]*session{}, perAddr: map[string]int{},
	}
	if f.resetKey, err = sessionserver.ResetKey("forwarder", cfg.Certificate); err != nil {
		return nil, err
	}
	for _, b := range cfg.Clouds {
		pin, err := b.Pin()
		if err != nil {
			return nil, fmt.Errorf("forwarder: cloud bundle %q: %w", b.Name, err)
		}
		f.clouds[pin] = &upstream{f: f, bundle: b, pin: pin}
	}
	// A cloud that sends proofs to the forwarder (the client–server
	// deployment) authenticates with its own TLS certificate, the key its
	// bundle pins: an EphID travels in the clear in the ClientHello, so
	// without this anyone could send rejections or garbage under a
	// client's identifier. Clients present no certificate.
	f.tls = pecwire.ServerTLS(cfg.Certificate)
	f.tls.ClientAuth = tls.RequestClientCert
	f.tls.VerifyConnection = func(cs tls.ConnectionState) error {
		_, err := f.peerCloud(cs)
		return err
	}
	return f, nil
}

// peerCloud returns the name of the cloud whose pinned key the peer's
// client certificate holds, or "" when the peer sent none (a client). A
// certificate of no configured cloud fails the handshake. The TLS 1.3
// handshake has the peer sign with the certificate's key, so a match is
// proof of holding the cloud's key.
func (f *Forwarder) peerCloud(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", nil
	}
	got := pecwire.SPKIHash(cs.PeerCertificates[0])
	for pin, u := range f.clouds {
		if subtle.ConstantTimeCompare(got[:], pin[:]) == 1 {
			return u.bundle.Name, nil
		}
	}
	return "", errors.New("forwarder: the client certificate is no configured cloud's")
}

// Config returns the configuration in effect.
func (f *Forwarder) Config() Config { return f.cfg }

func (f *Forwarder) idleTimeout() time.Duration {
	return f.cfg.Keepalive * time.Duration(f.cfg.MissedPings)
}

// QUICConfig returns the QUIC settings the forwarder listens with.
func (f *Forwarder) QUICConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           f.cfg.HandshakeTimeout,
		MaxIdleTimeout:                 f.idleTimeout(),
		KeepAlivePeriod:                f.cfg.Keepalive,
		MaxIncomingStreams:             1,
		MaxIncomingUniStreams:          -1,
		InitialStreamReceiveWindow:     uint64(2 * f.cfg.MaxFrame),
		MaxStreamReceiveWindow:         uint64(8 * f.cfg.MaxFrame),
		InitialConnectionReceiveWindow: uint64(2 * f.cfg.MaxFrame),
		MaxConnectionReceiveWindow:     uint64(8 * f.cfg.MaxFrame),
	}
}

// Wait waits for every session, and the sessions to clouds, to end after
// the contexts of the Serve calls have ended.
func (f *Forwarder) Wait() {
	f.wg.Wait()
	for _, u := range f.clouds {
		u.close()
	}
}

func (f *Forwarder) admit(addr string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions >= f.cfg.MaxSessions {
		return "sessions"
	}
	if f.perAddr[addr] >= f.cfg.MaxSessionsPerAddr {
		return "sessions_per_addr"
	}
	f.sessions++
	f.perAddr[addr]++
	f.m.sessions.Set(float64(f.sessions))
	return ""
}

func (f *Forwarder) leave(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions--
	if f.perAddr[addr]--; f.perAddr[addr] <= 0 {
		delete(f.perAddr, addr)
	}
	f.m.sessions.Set(float64(f.sessions))
}

func (f *Forwarder) register(s *session) (pecwire.ClientID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.clients) >= f.cfg.MaxClients {
		return pecwire.ClientID{}, errBusy
	}
	for range 32 {
		var id pecwire.ClientID
		if _, err := rand.Read(id[:]); err != nil {
			return id, err
		}
		if _, taken := f.clients[id]; taken || id == (pecwire.ClientID{}) {
			continue
		}
		f.clients[id] = s
		f.m.clients.Set(float64(len(f.clients)))
		return id, nil
	}
	return pecwire.ClientID{}, errors.New("forwarder: no free client identifier after 32 draws")
}

func (f *Forwarder) unregister(id pecwire.ClientID, s *session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clients[id] == s {
		delete(f.clients, id)
	}
	f.m.clients.Set(float64(len(f.clients)))
}

func (f *Forwarder) lookup(id pecwire.ClientID) *session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clients[id]
}

var errBusy = errors.New("forwarder busy")

// tap hands m to Config.Tap.
func (f *Forwarder) tap(dir string, m pecwire.Message) {
	if f.cfg.Tap == nil {
		return
	}
	if b, err := pecwire.Marshal(m); err == nil {
		f.cfg.Tap(dir, b)
	}
}

// route relays a message under an ephemeral identifier to the client it
// names, counting it against the identifier's one use. It never tells the
// sender whether the client exists: a cloud learns nothing of the
// forwarder's clients.
func (f *Forwarder) route(eph []byte, m pecwire.Message) {
	client, exp, err := f.ids.open(eph)
	if err != nil {
		f.m.relayed.WithLabelValues("unknown").Inc()
		return
	}
	if err := f.used.relay(eph, exp, time.Now()); err != nil {
		f.m.relayed.WithLabelValues("reused").Inc()
		return
	}
	s := f.lookup(client)
	if s == nil {
		f.m.relayed.WithLabelValues("gone").Inc()
		return
	}
	if s.push(m) {
		f.m.relayed.WithLabelValues("ok").Inc()
	}
}

// Handler serves /healthz and /metrics.
func (f *Forwarder) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", f.m.handler())
	mux.HandleFunc("/healthz", f.healthz)
	return mux
}
