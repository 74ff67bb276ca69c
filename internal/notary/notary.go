// Package notary is a certificate notary: it probes TLS targets from its own
// network path and vouches, with a signature, for the certificate it saw. A
// man-in-the-middle on a client's path cannot also sit on the paths of
// several notaries, so agreement among notaries is evidence the client saw
// the real certificate (Perspectives, Convergence).
//
// The notary speaks the Convergence wire API exactly, so existing Convergence
// clients work unchanged, and a v1 JSON API with SHA-256 fingerprints,
// separate SNI names and Ed25519 signatures. It keeps an observation history
// (package store): a request whose fingerprint matches what the notary saw
// recently is answered from the history without a probe; a miss or a
// mismatch probes the target and records what it saw. Identical concurrent
// probes coalesce into one, outbound probes are bounded, and a full queue
// answers 503 at once rather than letting latency grow without bound.
package notary

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

// Config configures a Notary.
type Config struct {
	Identity *Identity
	History  store.History
	Prober   *probe.Prober

	// MaxAge is how long an observation answers a matching request without a
	// new probe. Convergence let cache entries live for months, relying on
	// mismatches to refresh them; a shorter default bounds how long a notary
	// vouches for a certificate a site has since replaced. 0 means 24 h.
	MaxAge time.Duration
	// MaxProbes bounds outbound probes in flight; 0 means 64.
	MaxProbes int
	// MaxQueue bounds probes waiting for a slot; beyond it requests get 503
	// at once. 0 means 4 × MaxProbes.
	MaxQueue int
	// MaxProbesPerClient bounds the probes one client address (IPv6: one
	// /64) has in flight, and its share of MaxQueue in the same proportion
	// (MaxQueue × MaxProbesPerClient / MaxProbes places, at least one), so
	// that one client cannot take every probe slot or queue place. The
	// address is the connection's: requests relayed through a proxy or the
	// bouncer share the relay's. 0 means MaxProbes / 8, at least 1; more
	// than MaxProbes means MaxProbes.
	MaxProbesPerClient int
	// MaxProbesPerTarget bounds, in the same way, the probes of one target:
	// one host name (whatever its SNI), or one pinned address. 0 means
	// MaxProbes / 8, at least 1.
	MaxProbesPerTarget int
	// MaxHistory bounds the records kept per target: each write keeps the
	// MaxHistory seen most recently and deletes the rest, so a server that
	// shows a new certificate on every connection cannot grow its history,
	// and the answers listing it, without bound. 0 means 64; negative keeps
	// everything.
	MaxHistory int
	// HistoryMarker is a file the notary creates once its history has held
	// an observation. CheckHistory reads it to tell a new notary's empty
	// history from a lost one. Empty means none.
	HistoryMarker string
	// MaxRequests bounds probing requests (Convergence POST, v1 check)
	// being handled at once; beyond it the notary answers 503 at once. 0
	// means 4096.
	MaxRequests int
	// MaxReads bounds read requests (Convergence GET of a history, v1 key)
	// being handled at once, in a pool of their own so that a flood of
	// probing requests cannot starve them, nor they it. 0 means 1024.
	MaxReads int
	// MaxRequestsPerClient is one client address's share of each of those
	// pools (httplimit.ClientKey); 0 means a sixteenth of the pool.
	// /healthz and /metrics take no slot: they always answer.
	MaxRequestsPerClient int
	// BodyTimeout is how long a request body may take to arrive (see
	// httplimit.HandlerOptions); 0 means httplimit.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Conns bounds the connections ServeTLS accepts, in total and per
	// client address, and HTTP/2 streams per connection; zero fields mean
	// httplimit's defaults.
	Conns httplimit.Options
	// RequestTimeout bounds the handling of one request, history reads
	// included, and each write of an observation to the history (which
	// outlives the request that started the probe). A stalled store (a
	// lock held in a shared PostgreSQL) then costs errors, not requests and
	// probe slots held forever. 0 means 30 s, the server's WriteTimeout:
	// a later answer could not be sent anyway.
	RequestTimeout time.Duration
	// HistoryTTL is how long a target's history read from the store is
	// reused in memory; 0 means 1 s, negative disables. Within one process
	// a new observation invalidates it at once; replicas sharing a
	// PostgreSQL history see each other's observations within HistoryTTL.
	HistoryTTL time.Duration

	Logger *slog.Logger     // nil discards
	Now    func() time.Time // nil means time.Now
}

// Notary serves the notary APIs. Create it with New.
type Notary struct {
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	flight  probeFlight
	queue   *probeQueue
	marked  atomic.Bool      // HistoryMarker exists
	checks  *httplimit.Slots // probing requests
	reads   *httplimit.Slots // history and key reads
	metrics *metrics
	signed  signedCache
	recent  recentCache
}

// New returns a Notary.
func New(cfg Config) (*Notary, error) {
	if cfg.Identity == nil || cfg.History == nil || cfg.Prober == nil {
		return nil, errors.New("notary: Config needs Identity, History and Prober")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.MaxProbes <= 0 {
		cfg.MaxProbes = 64
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 4 * cfg.MaxProbes
	}
	if cfg.MaxProbesPerClient <= 0 {
		cfg.MaxProbesPerClient = max(1, cfg.MaxProbes/8)
	}
	if cfg.MaxProbesPerTarget <= 0 {
		cfg.MaxProbesPerTarget = max(1, cfg.MaxProbes/8)
	}
	// A share larger than the whole is the whole (benchmarks, whose one
	// loopback client should get every slot, ask for that).
	cfg.MaxProbesPerClient = min(cfg.MaxProbesPerClient, cfg.MaxProbes)
	cfg.MaxProbesPerTarget = min(cfg.MaxProbesPerTarget, cfg.MaxProbes)
	if cfg.MaxHistory == 0 {
		cfg.MaxHistory = 64
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = 4096
	}
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = 1024
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.HistoryTTL == 0 {
		cfg.HistoryTTL = time.Second
	}
	n := &Notary{
		cfg:     cfg,
		now:     cfg.Now,
		log:     cfg.Logger,
		queue:   newProbeQueue(cfg.MaxProbes, cfg.MaxQueue, cfg.MaxProbesPerClient, cfg.MaxProbesPerTarget),
		checks:  newSlots(cfg.MaxRequests, cfg.MaxRequestsPerClient),
		reads:   newSlots(cfg.MaxReads, cfg.MaxRequestsPerClient),
		metrics: newMetrics(),
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.signed.init(4096)
	n.recent.init(16384)
	return n, nil
}

// Identity returns the notary's keys.
func (n *Notary) Identity() *Identity { return n.cfg.Identity }

// Handler returns the notary's HTTP handler: the Convergence API under
// /target/, the v1 API under /v1/, /metrics and /healthz, bounded by
// httplimit.Handler (request slots, body deadlines, canonical paths).
func (n *Notary) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/", n.handleV1)
	// Without an exact pattern ServeMux would redirect "/v1" to "/v1/".
	mux.HandleFunc("/v1", n.handleV1)
	mux.Handle("/metrics", n.metrics.handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	})
	// The Convergence paths bypass ServeMux, which would answer a
	// non-canonical path such as "/target/." with a redirect: a Convergence
	// client expects 400 for a malformed target, not a 307.
	return n.limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/target/") {
			n.handleTarget(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// newSlots returns a pool of size request slots with the per-client share
// perClient, 0 meaning a sixteenth of the pool: a notary has many clients,
// each asking little at a time.
func newSlots(size, perClient int) *httplimit.Slots {
	if perClient <= 0 {
		perClient = max(1, size/16)
	}
	return httplimit.NewSlots(size, perClient)
}

// limit bounds concurrent requests (beyond MaxRequests or MaxReads, or a
// client's share of them, the notary answers 503 at once), the time each
// may take (RequestTimeout) and the time its body may take (BodyTimeout).
// /healthz and /metrics take no slot.
func (n *Notary) limit(h http.Handler) http.Handler {
	return httplimit.Handler(h, httplimit.HandlerOptions{
		Pool: func(r *http.Request) *httplimit.Slots {
			switch {
			case r.URL.Path == "/healthz" || r.URL.Path == "/metrics":
				return nil
			case r.Method == http.MethodGet || r.Method == http.MethodHead:
				return n.reads
			}
			return n.checks
		},
		// The Convergence parser names what is wrong with a target path.
		ParsesPath:  func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/target/") },
		Timeout:     n.cfg.RequestTimeout,
		BodyTimeout: n.cfg.BodyTimeout,
		Overloaded:  func(*http.Request) { n.metrics.overloaded.Inc() },
	})
}

// NewServer returns an http.Server for h with the notary's certificate and
// the timeouts and size caps a public server needs.
func NewServer(id *Identity, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{id.TLS}, MinVersion: tls.VersionTLS12},
	}
}

// ServeTLS serves the notary over HTTPS on ln until ctx ends, with the
// connection bounds of Config.Conns.
func (n *Notary) ServeTLS(ctx context.Context, ln net.Listener) error {
	srv := NewServer(n.cfg.Identity, n.Handler())
	ln = httplimit.Listen(srv, ln, n.cfg.Conns)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// observe probes t for the client at address client (coalescing
// identical concurrent probes), records what it saw under k and returns it.
// The record is committed before observe returns, so every answer given is
// durable.
func (n *Notary) observe(ctx context.Context, client string, k store.Key, t probe.Target) (*probe.Observation, error) {
	key := k.Host + "\x00" + strconv.Itoa(k.Port) + "\x00" + k.SNI + "\x00" + t.IP.String()
	obs, err := n.flight.do(ctx, key, func(abandon <-chan struct{}, started func()) (*probe.Observation, error) {
		release, err := n.queue.acquire(client, targetKey(t), abandon)
		if errors.Is(err, errAbandoned) {
			n.metrics.abandoned.Inc()
		}
		if err != nil {
			return nil, err
		}
		started()
		defer release()
		n.metrics.inflight.Inc()
		defer n.metrics.inflight.Dec()
		// The probe is shared by every request coalesced onto it, so one
		// requester giving up must not cancel it for the others.
		pctx := context.WithoutCancel(ctx)
		start := time.Now()
		obs, err := n.cfg.Prober.Probe(pctx, t)
		n.metrics.probeSeconds.Observe(time.Since(start).Seconds())
		if err != nil {
			n.metrics.probeErrors.Inc()
			return nil, err
		}
		wctx, cancel := context.WithTimeout(pctx, n.cfg.RequestTimeout)
		defer cancel()
		if err := n.cfg.History.Observe(wctx, k, obs.SHA256, obs.SHA1, obs.Time, n.cfg.MaxHistory); err != nil {
			return nil, &storageError{fmt.Errorf("notary storage failed recording the observation: %w", err)}
		}
		n.recent.forget(k)
		n.markHistory()
		return obs, nil
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &waitTimeout{fmt.Errorf("timed out after %v waiting for the probe to finish and be recorded: %w", n.cfg.RequestTimeout, ctx.Err())}
		}
		return nil, ctx.Err()
	}
	return obs, err
}

// storageError is the notary's own failure to record what it saw: the
// target answered, so it must not be reported as unreachable (503) but as
// the notary's error (500).
type storageError struct{ err error }

func (e *storageError) Error() string { return e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

// waitTimeout is a request that gave up waiting for its probe and the
// write of what it saw.
type waitTimeout struct{ err error }

func (e *waitTimeout) Error() string { return e.err.Error() }
func (e *waitTimeout) Unwrap() error { return e.err }

// probeFailure maps an observe failure to the HTTP status the notary
// answers and what it tells the client: 403 for a target whose address is
// not public, 500 when the notary's own storage failed, and 503 when the
// target could not be reached or the probe queue is full. The message says
// which of these happened and nothing more: the addresses a name resolved
// to, the resolver's address and the system's exact connect error would
// make the notary an oracle for internal DNS and a port scanner, so they
// only go to the log.
func probeFailure(err error) (code int, msg string) {
	var se *storageError
	var wt *waitTimeout
	timedOut := ""
	if errors.Is(err, probe.ErrTimeout) {
		timedOut = " (timed out)"
	}
	switch {
	case errors.Is(err, errOverloaded):
		return http.StatusServiceUnavailable, err.Error() // says which share was full, no more
	case errors.As(err, &se):
		return http.StatusInternalServerError, "notary storage failed recording the observation"
	case errors.As(err, &wt):
		return http.StatusServiceUnavailable, "timed out waiting for the probe to finish and be recorded"
	case errors.Is(err, probe.ErrForbiddenAddress):
		return http.StatusForbidden, "the target's address is not public; this notary probes only public addresses"
	case errors.Is(err, probe.ErrResolve):
		return http.StatusServiceUnavailable, "cannot resolve the target's host name" + timedOut
	case errors.Is(err, probe.ErrHandshake):
		return http.StatusServiceUnavailable, "TLS handshake with the target failed" + timedOut
	case errors.Is(err, probe.ErrConnect):
		return http.StatusServiceUnavailable, "cannot connect to the target" + timedOut
	}
	return http.StatusServiceUnavailable, "cannot reach the target" + timedOut
}

// probeFailed answers a request whose probe of t failed: the status and
// message of probeFailure (with Retry-After and the overload count when
// the queue refused it), the detail to the log.
func (n *Notary) probeFailed(w http.ResponseWriter, r *http.Request, api string, t probe.Target, err error) int {
	code, msg := probeFailure(err)
	attrs := []any{"api", api, "target", t.String(), "sni", t.ServerName, "client", r.RemoteAddr, "status", code, "err", err}
	if t.IP.IsValid() {
		attrs = append(attrs, "ip", t.IP.String())
	}
	switch {
	case code == http.StatusInternalServerError:
		n.log.Error("recording an observation failed", attrs...)
	case errors.Is(err, errOverloaded):
		n.metrics.overloaded.Inc()
		w.Header().Set("Retry-After", "1")
		n.log.Warn("probe refused", attrs...)
	default:
		n.log.Info("probe failed", attrs...)
	}
	httpError(w, code, "cannot verify "+t.String()+": "+msg)
	return code
}

// signedCache remembers signed answers keyed by what they sign, so a cache
// hit costs a history lookup and no RSA signature (2 ms of CPU each).
type signedCache struct {
	mu  sync.Mutex
	max int
	m   map[string][]byte
}

func (c *signedCache) init(max int) { c.max, c.m = max, make(map[string][]byte) }

func (c *signedCache) get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[k]
	return b, ok
}

func (c *signedCache) put(k string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		// Dropping everything is crude but bounded and O(1) amortised; the
		// cache refills from hot targets at one signature each.
		clear(c.m)
	}
	c.m[k] = b
}

// lookup returns k's history, from memory when it was read less than
// HistoryTTL ago.
func (n *Notary) lookup(ctx context.Context, k store.Key) ([]store.Record, error) {
	ttl := n.cfg.HistoryTTL
	if ttl > 0 {
		if recs, ok := n.recent.get(k, time.Now(), ttl); ok {
			return recs, nil
		}
	}
	recs, err := n.cfg.History.Lookup(ctx, k)
	if err != nil {
		return nil, err
	}
	// Writes keep the history within MaxHistory; a history written before
	// that bound, or with a larger one, is cut here so answers are bounded
	// too.
	if m := n.cfg.MaxHistory; m > 0 && len(recs) > m {
		recs = recs[len(recs)-m:]
	}
	if ttl > 0 {
		n.recent.put(k, recs, time.Now())
	}
	return recs, nil
}

// recentCache holds histories recently read from the store. Callers must
// not modify the returned slices.
type recentCache struct {
	mu  sync.RWMutex
	max int
	m   map[store.Key]recentEntry
}

type recentEntry struct {
	recs []store.Record
	at   time.Time
}

func (c *recentCache) init(max int) { c.max, c.m = max, make(map[store.Key]recentEntry) }

func (c *recentCache) get(k store.Key, now time.Time, ttl time.Duration) ([]store.Record, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || now.Sub(e.at) > ttl {
		return nil, false
	}
	return e.recs, true
}

func (c *recentCache) put(k store.Key, recs []store.Record, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = recentEntry{recs, now}
}

func (c *recentCache) forget(k store.Key) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
