// Package notary is a certificate notary: it probes TLS targets from its own
// network path and vouches, with a signature, for the certificate it saw. A
// man-in-the-middle on a client's path cannot also sit on the paths of
// several notaries, so agreement among notaries is evidence the client saw
// the real certificate (Perspectives, Convergence).
//
// The notary speaks the Convergence wire API exactly, so existing Convergence
// clients work unchanged, and a v1 JSON API with SHA-256 fingerprints,
// separate SNI names and Ed25519 signatures. It keeps an observation history
// (package store) and vouches for every certificate it has seen at a target
// within its freshness window (Config.MaxAge): a request whose fingerprint
// is among them is answered from the history without a probe. A miss
// probes the target and records what it saw; when what it saw is another
// certificate, it probes again a few times (Config.MaxReprobes, at most one
// such round per target per Config.ReprobeInterval) before it answers that
// it sees a different one, so a site serving several certificates at once
// (CDN edges, balancers, rotations) is not reported as a
// man-in-the-middle. Identical concurrent
// probes coalesce into one, outbound probes are bounded, and a full queue
// answers 503 at once rather than letting latency grow without bound.
package notary

import (
	"cmp"
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

	// MaxAge is the freshness window: the notary vouches for every
	// certificate it has seen at a target within it, answering a request
	// about one from the history without a new probe. Convergence vouched
	// for any certificate ever seen; the window bounds how long a notary
	// vouches for a certificate a site has since replaced (after a
	// compromise, say), even when the site serves several at once. 0
	// means 24 h.
	MaxAge time.Duration
	// MaxReprobes bounds the extra probes made when a probe sees a
	// certificate other than the one asked about, to discover the others a
	// target serves at once (CDN edges, balancers, rotations) before
	// answering that the notary sees a different one. They stop as soon as
	// the one asked about is seen, are recorded like any probe, and take
	// slots of the same queue, counted against the same client's and
	// target's shares. 0 means 3; negative disables them.
	MaxReprobes int
	// ReprobeInterval is how often one target (a host name, whatever its
	// port and SNI, or a pinned address) may get a round of reprobes: a
	// client sending fingerprints nobody serves then costs the target at
	// most MaxReprobes extra probes per interval, whatever its rate. A
	// mismatch within the interval is answered from the probe it made.
	// 0 means 1 minute.
	ReprobeInterval time.Duration
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
	// MaxSignedBytes bounds the signed Convergence answers kept, keyed by
	// the bytes they sign (counted with their keys), so that answering
	// again from the same history costs no RSA signature. An answer about
	// a target with one certificate takes about 800 bytes. 0 means
	// DefaultMaxSignedBytes.
	MaxSignedBytes int
	// HistoryTTL is how long a target's history read from the store is
	// reused in memory; 0 means 1 s, negative disables. Within one process
	// a new observation invalidates it at once; replicas sharing a
	// PostgreSQL history see each other's observations within HistoryTTL.
	HistoryTTL time.Duration

	Logger *slog.Logger     // nil discards
	Now    func() time.Time // nil means time.Now
}

// DefaultMaxSignedBytes is the default of Config.MaxSignedBytes: room for
// the answers about every target of an hour of a campus's HTTPS (Forced
// Perspectives, IMC 2014, Table 2: 38,704 targets) at about 800 bytes each.
const DefaultMaxSignedBytes = 64 << 20

// Notary serves the notary APIs. Create it with New.
type Notary struct {
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	flight  probeFlight[*probe.Observation]
	rounds  probeFlight[[]*probe.Observation] // reprobe rounds
	limiter roundLimiter
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
	if cfg.MaxReprobes == 0 {
		cfg.MaxReprobes = 3
	}
	if cfg.ReprobeInterval <= 0 {
		cfg.ReprobeInterval = time.Minute
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
	n.signed.init(max(1, cmp.Or(cfg.MaxSignedBytes, DefaultMaxSignedBytes)))
	n.recent.init(16384)
	n.limiter.init(16384)
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
	jm := httplimit.JSONErrors(mux)
	return n.limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/target/") {
			n.handleTarget(w, r)
			return
		}
		jm.ServeHTTP(w, r)
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
	obs, err := n.flight.do(ctx, flightKey(k, t), func(abandon <-chan struct{}, started func()) (*probe.Observation, error) {
		return n.probeOnce(client, k, t, abandon, started)
	})
	return obs, n.waitError(ctx, err)
}

func flightKey(k store.Key, t probe.Target) string {
	return k.Host + "\x00" + strconv.Itoa(k.Port) + "\x00" + k.SNI + "\x00" + t.IP.String()
}

// probeOnce waits for a probe slot for client's probe of t, probes and
// records what it saw under k.
func (n *Notary) probeOnce(client string, k store.Key, t probe.Target, abandon <-chan struct{}, started func()) (*probe.Observation, error) {
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
	// requester giving up must not cancel it for the others; the prober's
	// timeout bounds it.
	pctx := context.Background()
	start := time.Now()
	obs, err := n.cfg.Prober.Probe(pctx, t)
	n.metrics.probeSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		n.metrics.probeErrors.Inc()
		n.logProbeError(k, t, time.Since(start), err)
		return nil, err
	}
	wctx, cancel := context.WithTimeout(pctx, n.cfg.RequestTimeout)
	defer cancel()
	if err := n.cfg.History.Observe(wctx, k, obs.SHA256, obs.SHA1, obs.Time, n.cfg.MaxHistory); err != nil {
		if wctx.Err() != nil {
			// A stalled write (a locked table, an overloaded database) is
			// a timeout, 503, whichever of this deadline and the waiting
			// request's fires first; the database's own cancellation
			// error need not wrap the context's.
			return nil, &waitTimeout{fmt.Errorf("recording the observation took longer than %v: %w", n.cfg.RequestTimeout, err)}
		}
		return nil, &storageError{fmt.Errorf("notary storage failed recording the observation: %w", err)}
	}
	n.recent.forget(k)
	n.markHistory()
	return obs, nil
}

// waitError turns the error of a request that stopped waiting for a probe
// into what the request reports.
func (n *Notary) waitError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &waitTimeout{fmt.Errorf("timed out after %v waiting for the probe to finish and be recorded: %w", n.cfg.RequestTimeout, ctx.Err())}
		}
		return ctx.Err()
	}
	return err
}

// reprobe probes t again, up to MaxReprobes times, until it sees a
// certificate for which is reports true, and returns what it saw (nil when
// the target had its round within the last ReprobeInterval). Concurrent
// requests about one target share one round, each looking for its own
// certificate in what the round saw; the round stops early only for the
// certificate of the request that started it.
func (n *Notary) reprobe(ctx context.Context, client string, k store.Key, t probe.Target, is func(*probe.Observation) bool) ([]*probe.Observation, error) {
	if n.cfg.MaxReprobes <= 0 {
		return nil, nil
	}
	seen, err := n.rounds.do(ctx, flightKey(k, t), func(abandon <-chan struct{}, started func()) ([]*probe.Observation, error) {
		if !n.limiter.allow(targetKey(t), time.Now(), n.cfg.ReprobeInterval) {
			n.metrics.reprobesLimited.Inc()
			return nil, nil
		}
		var seen []*probe.Observation
		for range n.cfg.MaxReprobes {
			n.metrics.reprobes.Inc()
			obs, err := n.probeOnce(client, k, t, abandon, started)
			if err != nil {
				// What was seen stands; a probe failing now (the queue
				// full, the target gone) ends the round.
				if len(seen) > 0 {
					return seen, nil
				}
				return nil, err
			}
			seen = append(seen, obs)
			if is(obs) {
				break
			}
		}
		return seen, nil
	})
	return seen, n.waitError(ctx, err)
}

// vouching is what the notary found about a certificate at a target.
type vouching struct {
	recs []store.Record // the target's history, after any probe
	// rec is the record the answer is about: the certificate asked about
	// when the notary vouches for it, else the one it saw most recently.
	rec    store.Record
	match  bool               // the notary vouches for the certificate asked about
	probed bool               // rec comes from a probe made for this request
	obs    *probe.Observation // that probe, when probed
}

// vouch decides whether the notary vouches for the certificate at k for
// which is reports true (nil: no certificate asked about). A certificate
// seen at the target within MaxAge is vouched for from the history, unless
// mustProbe; otherwise the notary probes, and when the probe sees another
// certificate, reprobes to look for this one before it says no.
func (n *Notary) vouch(ctx context.Context, client string, k store.Key, t probe.Target, is func(store.Record) bool, mustProbe bool) (*vouching, error) {
	recs, err := n.lookup(ctx, k)
	if err != nil {
		return nil, &historyError{err}
	}
	if is != nil && !mustProbe {
		if rec, ok := n.vouched(recs, is); ok {
			n.metrics.cacheHits.Inc()
			return &vouching{recs: recs, rec: rec, match: true}, nil
		}
	}
	n.metrics.cacheMisses.Inc()
	obs, err := n.observe(ctx, client, k, t)
	if err != nil {
		return nil, err
	}
	v := &vouching{probed: true, obs: obs}
	isObs := func(o *probe.Observation) bool { return is != nil && is(observed(o)) }
	if is != nil && !isObs(obs) {
		round, err := n.reprobe(ctx, client, k, t, isObs)
		var se *storageError
		if err != nil && (errors.As(err, &se) || errors.Is(err, errOverloaded) || ctx.Err() != nil) {
			// The notary could not look: a 409 would claim more than
			// it saw, so the client is told to come back (503).
			return nil, err
		}
		// Otherwise a round whose first reprobe failed (the target gone
		// silent) leaves the answer to the first probe.
		for _, o := range round {
			v.obs = o
			if isObs(o) {
				break
			}
		}
	}
	v.match = isObs(v.obs)
	if v.recs, err = n.lookup(ctx, k); err != nil {
		return nil, &historyError{err}
	}
	v.rec = observed(v.obs)
	for _, r := range v.recs {
		if r.SHA256 == v.rec.SHA256 {
			v.rec = r
		}
	}
	return v, nil
}

// vouched returns the most recently seen record of recs for which is
// reports true, if it was seen within MaxAge.
func (n *Notary) vouched(recs []store.Record, is func(store.Record) bool) (store.Record, bool) {
	for i := len(recs) - 1; i >= 0; i-- {
		if is(recs[i]) && n.fresh(recs[i]) {
			return recs[i], true
		}
	}
	return store.Record{}, false
}

// fresh reports whether r was seen within MaxAge: the notary vouches for
// it.
func (n *Notary) fresh(r store.Record) bool { return n.now().Sub(r.Last) <= n.cfg.MaxAge }

// observed is the history record one observation makes.
func observed(o *probe.Observation) store.Record {
	return store.Record{SHA256: o.SHA256, SHA1: o.SHA1, First: o.Time, Last: o.Time}
}

// historyError is a failure to read the history.
type historyError struct{ err error }

func (e *historyError) Error() string { return "history unavailable: " + e.err.Error() }
func (e *historyError) Unwrap() error { return e.err }

// roundLimiter allows one reprobe round per target per interval. It holds
// at most max targets: when full of targets whose interval has not passed,
// it refuses new rounds rather than forget one (which would let a client
// cycling through targets reprobe without bound).
type roundLimiter struct {
	mu   sync.Mutex
	max  int
	last map[string]time.Time
}

func (l *roundLimiter) init(max int) { l.max, l.last = max, make(map[string]time.Time) }

func (l *roundLimiter) allow(target string, now time.Time, interval time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[target]; ok && now.Sub(t) < interval {
		return false
	}
	if len(l.last) >= l.max {
		for k, t := range l.last {
			if now.Sub(t) >= interval {
				delete(l.last, k)
			}
		}
		if len(l.last) >= l.max {
			return false
		}
	}
	l.last[target] = now
	return true
}

// logProbeError tells the operator why a probe of t failed, in more detail
// than the client is told (probeFailure): the kind of failure, the address
// the guard refused, how long the probe took.
func (n *Notary) logProbeError(k store.Key, t probe.Target, took time.Duration, err error) {
	attrs := []any{"target", t.String(), "reason", failureReason(err), "took", took.Round(time.Millisecond), "err", err}
	if k.SNI != "" {
		attrs = append(attrs, "sni", k.SNI)
	}
	if t.IP.IsValid() {
		attrs = append(attrs, "pinned_ip", t.IP.String())
	}
	var fe *probe.ForbiddenAddressError
	if errors.As(err, &fe) {
		// The client is not told which address a name resolved to; the
		// operator is, and how to allow it.
		attrs = append(attrs, "refused_addr", fe.Addr.String(), "hint", "the notary probes only public addresses unless started with --allow-private")
	}
	n.log.Warn("probe failed", attrs...)
}

// failureReason names the kind of a probe failure for the log.
func failureReason(err error) string {
	var se *storageError
	var he *historyError
	var wt *waitTimeout
	switch {
	case errors.Is(err, errOverloaded):
		return "overloaded"
	case errors.As(err, &se):
		return "storage error"
	case errors.As(err, &he):
		return "history unavailable"
	case errors.As(err, &wt):
		return "request timed out waiting"
	case errors.Is(err, probe.ErrForbiddenAddress):
		return "refused non-public address"
	case errors.Is(err, probe.ErrTimeout) && errors.Is(err, probe.ErrResolve):
		return "resolve timeout"
	case errors.Is(err, probe.ErrTimeout) && errors.Is(err, probe.ErrConnect):
		return "connect timeout"
	case errors.Is(err, probe.ErrTimeout) && errors.Is(err, probe.ErrHandshake):
		return "handshake timeout"
	case errors.Is(err, probe.ErrTimeout):
		return "timeout"
	case errors.Is(err, probe.ErrResolve):
		return "resolve error"
	case errors.Is(err, probe.ErrConnect):
		return "connect error"
	case errors.Is(err, probe.ErrHandshake):
		return "handshake error"
	}
	return "error"
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
	var he *historyError
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
	case errors.As(err, &he):
		return http.StatusInternalServerError, "history unavailable"
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
	attrs := []any{"api", api, "target", t.String(), "sni", t.ServerName, "client", r.RemoteAddr, "status", code, "reason", failureReason(err), "err", err}
	if t.IP.IsValid() {
		attrs = append(attrs, "ip", t.IP.String())
	}
	switch {
	case code == http.StatusInternalServerError:
		n.log.Error("the notary's history failed", attrs...)
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
	mu    sync.Mutex
	max   int // bytes of keys and bodies
	bytes int
	m     map[string][]byte
}

func (c *signedCache) init(max int) { c.max, c.m = max, make(map[string][]byte) }

func (c *signedCache) get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[k]
	return b, ok
}

func (c *signedCache) put(k string, b []byte) {
	size := len(k) + len(b)
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		c.bytes -= len(k) + len(old)
	}
	// Evict entries the map's randomised iteration yields first until
	// the new one fits: bounded and O(1) each. Clearing the whole cache
	// instead made a notary serving more targets than it held re-sign
	// nearly every answer (an RSA signature each), 40% of a campus-hour
	// replay's CPU.
	for ek, eb := range c.m {
		if c.bytes+size <= c.max {
			break
		}
		delete(c.m, ek)
		c.bytes -= len(ek) + len(eb)
	}
	c.m[k] = b
	c.bytes += size
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
