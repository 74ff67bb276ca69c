// Package cloud is the PEC cloud service: the middleware of "Towards
// Sustainable Evolution for the TLS PKI" (PEC, ASIA CCS 2018, §4.2,
// Figure 3) over the messages of internal/pecwire.
//
//   - The client module registers clients (Register → Registered with a
//     random 4-byte client identifier), answers their keepalives and pushes
//     proofs on the registered client's session.
//   - The server module takes submissions (Submit) from any session: a
//     registered client submitting its own connection (client-only
//     deployment), or a PEC server, which opens a session whose first
//     message is a Submit and never registers. The ClientID of a Submit
//     names the client the outcomes go to.
//   - The PKIE handler parses the chain once, runs the requested provers
//     concurrently and pushes each outcome the moment it is known, so one
//     slow enhancement never holds the others back; at the submission's
//     budget, provers still running are reported as timed out.
//
// Everything is bounded: sessions, registered clients, submissions in
// flight in total and per submitter address, prover calls per enhancement,
// undelivered messages per session, frame sizes and handshake and idle
// times. Past a bound the cloud answers at once (Reject busy or limited,
// ProofBusy), never queues.
//
// A cloud keeps no state but its sessions and what its provers sync from
// their trusted third parties, so replicas need no shared database: a
// client's session, and with it every submission for that client, lives on
// one replica (docs/operations/cloud.md).
package cloud

import (
	"context"
	"crypto/hpke"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/sessionserver"
)

// Defaults of Config's bounds.
const (
	DefaultKeepalive        = 15 * time.Second
	DefaultMissedPings      = 3
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultMaxClients       = 1 << 16
	DefaultMaxSessionsAddr  = 1024
	DefaultMaxPending       = 256
	DefaultMaxJobs          = 4096
	DefaultMaxJobsPerClient = 64
	DefaultMaxProverCalls   = 1024
	DefaultMaxBudget        = 10 * time.Second
	DefaultSubmitRate       = 2000
	DefaultSessionRate      = 500
	DefaultMaxRemembered    = 1 << 18
	// maxDone bounds how many completed submissions a session remembers
	// for duplicate suppression.
	maxDone = 1024
)

// FileReserve is how many of the process's file descriptors sessions may
// never take. A TCP session holds one; what else the cloud needs must find
// one free even when sessions are at their bound: its listeners, /healthz
// and /metrics (at most MaxHTTPConns), the CT and revocation syncs and SCT
// lookups (at most MaxConnsPerTTP per host), the
// data directory (the notary's history) and the notary prover's probes
// (its max_probes, 64 by default).
const FileReserve = 256

// MaxConnsPerTTP bounds the connections the provers open to one host (a
// TTP, a peer replica): syncs, consistency proofs and the CT prover's SCT
// lookups, one per submission of an unlogged certificate, wait for one of
// them rather than open a descriptor each.
const MaxConnsPerTTP = 16

// MaxHTTPConns bounds the connections of the HTTP listener (/healthz,
// /metrics), MaxHTTPConnsPerAddr one address's share, so that they stay
// within FileReserve.
const (
	MaxHTTPConns        = 64
	MaxHTTPConnsPerAddr = 16
)

// SessionsFor returns how many sessions an open-file limit allows: the
// limit less FileReserve (zero or less: none).
func SessionsFor(fileLimit int) int { return fileLimit - FileReserve }

// Config configures a Cloud. Zero values take the defaults above.
type Config struct {
	// Certificate is the cloud's TLS certificate and key, the same on
	// both transports; clients pin its public key from the bundle.
	Certificate tls.Certificate
	// Provers are the enhancements this cloud hosts, one per identifier.
	Provers []pkie.Prover
	// Registry names enhancements in metrics, logs and /healthz; nil:
	// identifiers in hexadecimal.
	Registry *pkie.Registry
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger

	// Keepalive is the ping interval announced in Registered.
	Keepalive time.Duration
	// MissedPings is how many intervals a session may stay silent before
	// it is dropped and its client identifier freed.
	MissedPings int
	// HandshakeTimeout bounds the TLS (or QUIC) handshake and the wait
	// for a session's first message.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds the delivery of one message to a session; a
	// session that does not take its messages within it is dropped.
	WriteTimeout time.Duration

	// MaxClients bounds registered clients.
	MaxClients int
	// MaxSessions bounds sessions, registered or submitting, including
	// those still in their handshake (default MaxClients plus a quarter
	// of that, at least 64, for submitters, and at most what FileLimit
	// allows, SessionsFor). New refuses more than FileLimit allows: past
	// the process's open-file limit, accepting a session would take the
	// descriptor /healthz or a TTP sync needs.
	MaxSessions int
	// FileLimit is the process's open-file limit; zero: read it
	// (httplimit.FileLimit).
	FileLimit int
	// MaxSessionsPerAddr bounds one address's sessions (an IPv6 address
	// counts per /64). Clients behind one NAT share it, which is why the
	// PEC paper names clients by identifier and not by address.
	MaxSessionsPerAddr int
	// MaxFrame bounds the body of a frame the cloud accepts.
	MaxFrame int
	// MaxPending bounds the messages queued for one session and not yet
	// written; a session that falls that far behind is dropped.
	MaxPending int
	// MaxJobs bounds submissions being proved at once.
	MaxJobs int
	// MaxJobsPerAddr is one submitter address's share of MaxJobs
	// (default MaxJobs/8).
	MaxJobsPerAddr int
	// MaxJobsPerClient bounds the submissions being proved for one
	// registered client that it submitted itself (enough for a browser's
	// burst of connections), and apart from those the ones other
	// sessions submitted for it with its tickets, one submitter address
	// holding at most a quarter: others' submissions never take the
	// client's own room.
	MaxJobsPerClient int
	// MaxProverCalls bounds the calls in flight to each prover; past it
	// the enhancement's outcome is ProofBusy at once.
	MaxProverCalls int
	// MaxBudget caps a submission's budget; a submission without one
	// gets MaxBudget. It is also how long a proved submission is
	// remembered for duplicate suppression.
	MaxBudget time.Duration
	// CertCache bounds the parsed certificates kept for later submissions
	// (default 4,096; see certCache).
	CertCache int

	// MaxRemembered bounds the proved submissions remembered for
	// duplicate suppression across all sessions (each session remembers
	// at most 1,024, none older than MaxBudget).
	MaxRemembered int

	// SubmitRate bounds the submissions one address (an IPv6 /64) may
	// send a second, SubmitBurst how many it may save up (default twice
	// the rate). Every Submit counts, refused or not. Negative: no limit.
	SubmitRate  float64
	SubmitBurst int
	// SessionSubmitRate and SessionSubmitBurst are the same for one
	// session.
	SessionSubmitRate  float64
	SessionSubmitBurst int
	// HPKEKey is the key of submissions sealed through a privacy
	// forwarder (FileHPKE); nil: the cloud refuses them.
	HPKEKey hpke.PrivateKey
	// Forwarders are the privacy forwarders the cloud sends sealed
	// outcomes to in the client–server deployment, by their bundles; a
	// server's submission naming any other is refused.
	Forwarders []*pecwire.Bundle
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
	defD(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	defD(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.MaxClients, DefaultMaxClients)
	def(&c.FileLimit, httplimit.FileLimit())
	def(&c.MaxSessions, max(1, min(c.MaxClients+max(c.MaxClients/4, 64), SessionsFor(c.FileLimit))))
	def(&c.MaxSessionsPerAddr, DefaultMaxSessionsAddr)
	def(&c.MaxFrame, pecwire.DefaultMaxFrame)
	def(&c.MaxPending, DefaultMaxPending)
	def(&c.MaxJobs, DefaultMaxJobs)
	def(&c.MaxJobsPerAddr, max(1, c.MaxJobs/8))
	def(&c.MaxJobsPerClient, DefaultMaxJobsPerClient)
	def(&c.MaxProverCalls, DefaultMaxProverCalls)
	def(&c.CertCache, certCacheSize)
	defD(&c.MaxBudget, DefaultMaxBudget)
	def(&c.MaxRemembered, DefaultMaxRemembered)
	if c.SubmitRate == 0 {
		c.SubmitRate = DefaultSubmitRate
	}
	if c.SessionSubmitRate == 0 {
		c.SessionSubmitRate = DefaultSessionRate
	}
	def(&c.SubmitBurst, max(1, int(2*c.SubmitRate)))
	def(&c.SessionSubmitBurst, max(1, int(2*c.SessionSubmitRate)))
	if c.MaxFrame > pecwire.MaxFrameLimit {
		c.MaxFrame = pecwire.MaxFrameLimit
	}
}

// hosted is one prover and the bound on its calls in flight.
type hosted struct {
	p    pkie.Prover
	name string
	sem  chan struct{}
}

func (h *hosted) tryAcquire() bool {
	select {
	case h.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (h *hosted) release() { <-h.sem }

// Cloud is one replica of the PEC cloud service. It is safe for concurrent
// use; serve it with ServeQUIC and ServeTCP, and its HTTP endpoints with
// Handler, and call Run so that provers with background work (syncing
// from their TTPs) do it.
type Cloud struct {
	cfg     Config
	log     *slog.Logger
	tls     *tls.Config
	provers map[pkie.ID]*hosted
	ids     []pkie.ID // hosted identifiers, sorted
	m       *metrics

	resetKey *quic.StatelessResetKey
	certs    *certCache
	fwd      forwarderLinks

	mu          sync.Mutex
	clients     map[pecwire.ClientID]*session
	sessions    int
	perAddr     map[string]int
	jobs        int
	jobsPerAddr map[string]int
	// submitBuckets rate-limits submissions per address.
	submitBuckets map[string]*tokenBucket
	// remembered counts the proved submissions sessions remember.
	remembered int

	wg sync.WaitGroup // sessions and jobs
}

// New returns a cloud hosting cfg.Provers.
func New(cfg Config) (*Cloud, error) {
	cfg.setDefaults()
	if len(cfg.Certificate.Certificate) == 0 || cfg.Certificate.PrivateKey == nil {
		return nil, errors.New("cloud: no TLS certificate")
	}
	if cfg.Keepalive/time.Millisecond > 0xffffffff {
		return nil, errors.New("cloud: keepalive interval does not fit the wire format")
	}
	if n := SessionsFor(cfg.FileLimit); cfg.MaxSessions > n {
		return nil, fmt.Errorf("cloud: %d sessions at most, but an open-file limit of %d allows %d (%d descriptors are kept for /healthz, /metrics, TTP syncs, the data directory and the notary's probes): raise the limit (ulimit -n) or lower the sessions",
			cfg.MaxSessions, cfg.FileLimit, max(n, 0), FileReserve)
	}
	if cfg.Registry == nil {
		cfg.Registry = new(pkie.Registry)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cloud{
		cfg: cfg, log: log, tls: pecwire.ServerTLS(cfg.Certificate),
		provers: map[pkie.ID]*hosted{}, m: newMetrics(), certs: newCertCache(cfg.CertCache),
		clients: map[pecwire.ClientID]*session{}, perAddr: map[string]int{}, jobsPerAddr: map[string]int{},
		submitBuckets: map[string]*tokenBucket{},
	}
	var err error
	if c.resetKey, err = sessionserver.ResetKey("cloud", cfg.Certificate); err != nil {
		return nil, err
	}
	for _, p := range cfg.Provers {
		id := p.ID()
		if _, dup := c.provers[id]; dup {
			return nil, fmt.Errorf("cloud: two provers for %s", cfg.Registry.Name(id))
		}
		h := &hosted{p: p, name: cfg.Registry.Name(id), sem: make(chan struct{}, cfg.MaxProverCalls)}
		c.provers[id] = h
		c.ids = append(c.ids, id)
		c.m.addHealth(h.name, func() bool { return h.health() == nil })
		if rc, ok := p.(refusalCounter); ok {
			c.m.addRefusals(h.name, rc.RefusedSyncs)
		}
		if lc, ok := p.(lookupCounter); ok {
			c.m.addLookupFailures(h.name, lc.LookupFailures)
		}
	}
	slices.Sort(c.ids)
	return c, nil
}

// Config returns the configuration in effect, defaults filled in.
func (c *Cloud) Config() Config { return c.cfg }

// Hosted returns the identifiers of the enhancements this cloud proves.
func (c *Cloud) Hosted() []pkie.ID { return slices.Clone(c.ids) }

// Run runs the background work of every prover that has some (a
// pkie.Runner: syncing from its TTP and verifying what it fetched) until
// ctx ends.
func (c *Cloud) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, id := range c.ids {
		if r, ok := c.provers[id].p.(pkie.Runner); ok {
			wg.Go(func() { r.Run(ctx) })
		}
	}
	wg.Wait()
}

// idleTimeout is how long a session may stay silent.
func (c *Cloud) idleTimeout() time.Duration {
	return c.cfg.Keepalive * time.Duration(c.cfg.MissedPings)
}

// QUICConfig returns the QUIC settings the cloud listens with: one stream
// per connection, QUIC's own keepalives at the announced interval (they
// keep NAT bindings alive between the client's pings) and the same idle
// limit as the session's.
func (c *Cloud) QUICConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           c.cfg.HandshakeTimeout,
		MaxIdleTimeout:                 c.idleTimeout(),
		KeepAlivePeriod:                c.cfg.Keepalive,
		MaxIncomingStreams:             1,
		MaxIncomingUniStreams:          -1,
		InitialStreamReceiveWindow:     uint64(2 * c.cfg.MaxFrame),
		MaxStreamReceiveWindow:         uint64(8 * c.cfg.MaxFrame),
		InitialConnectionReceiveWindow: uint64(2 * c.cfg.MaxFrame),
		MaxConnectionReceiveWindow:     uint64(8 * c.cfg.MaxFrame),
	}
}

// Wait waits for every session and submission to end, after the contexts
// their Serve calls were given have ended.
func (c *Cloud) Wait() {
	c.closeLinks()
	c.wg.Wait()
}

// admit counts a new session against the bounds, or says which it is over.
func (c *Cloud) admit(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions >= c.cfg.MaxSessions {
		return "sessions"
	}
	if c.perAddr[addr] >= c.cfg.MaxSessionsPerAddr {
		return "sessions_per_addr"
	}
	c.sweepBucketsLocked()
	c.sessions++
	c.perAddr[addr]++
	c.m.sessions.Set(float64(c.sessions))
	return ""
}

// leave undoes admit.
func (c *Cloud) leave(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions--
	if c.perAddr[addr]--; c.perAddr[addr] <= 0 {
		delete(c.perAddr, addr)
	}
	c.m.sessions.Set(float64(c.sessions))
}

// register gives s a fresh random client identifier, unique among live
// sessions, or fails when the cloud has MaxClients already.
func (c *Cloud) register(s *session) (pecwire.ClientID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clients) >= c.cfg.MaxClients {
		return pecwire.ClientID{}, errBusy
	}
	// With at most 2^16 of 2^32 identifiers taken a draw collides with
	// probability 2^-16; 32 draws all colliding means a broken RNG.
	for range 32 {
		var id pecwire.ClientID
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("cloud: drawing a client identifier: %w", err)
		}
		// The zero identifier is kept free to mean "no client".
		if _, taken := c.clients[id]; taken || id == (pecwire.ClientID{}) {
			continue
		}
		c.clients[id] = s
		c.m.clients.Set(float64(len(c.clients)))
		return id, nil
	}
	return pecwire.ClientID{}, errors.New("cloud: no free client identifier after 32 draws")
}

func (c *Cloud) unregister(id pecwire.ClientID, s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients[id] == s {
		delete(c.clients, id)
	}
	c.m.clients.Set(float64(len(c.clients)))
}

func (c *Cloud) lookup(id pecwire.ClientID) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clients[id]
}

// Clients returns the number of registered clients.
func (c *Cloud) Clients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// Load reports the sessions open and the submissions in flight.
func (c *Cloud) Load() (sessions, jobs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions, c.jobs
}

var errBusy = errors.New("cloud busy")

// acquireJob takes a slot for one submission from addr, or returns the
// reject code of the bound it is over.
func (c *Cloud) acquireJob(addr string) pecwire.RejectCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs >= c.cfg.MaxJobs {
		return pecwire.RejectBusy
	}
	if c.jobsPerAddr[addr] >= c.cfg.MaxJobsPerAddr {
		return pecwire.RejectLimited
	}
	c.jobs++
	c.jobsPerAddr[addr]++
	c.m.jobs.Set(float64(c.jobs))
	return 0
}

// jobCode reports the reject code acquireJob would return, taking nothing.
func (c *Cloud) jobCode(addr string) pecwire.RejectCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs >= c.cfg.MaxJobs {
		return pecwire.RejectBusy
	}
	if c.jobsPerAddr[addr] >= c.cfg.MaxJobsPerAddr {
		return pecwire.RejectLimited
	}
	return 0
}

func (c *Cloud) releaseJob(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs--
	if c.jobsPerAddr[addr]--; c.jobsPerAddr[addr] <= 0 {
		delete(c.jobsPerAddr, addr)
	}
	c.m.jobs.Set(float64(c.jobs))
}

// Handler serves /healthz, /metrics and /v1/heads/{pkie}.
func (c *Cloud) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", c.m.handler())
	mux.HandleFunc("/healthz", c.healthz)
	mux.HandleFunc("GET /v1/heads/{pkie}", c.head)
	return mux
}
