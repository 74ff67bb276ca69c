package ct

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/lru"
	"github.com/pkie/pkie/internal/pkies/conf"
	ctpkie "github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/sct"
)

// Bounds on what a request may make the prover do.
const (
	// MaxParams bounds a request's Params: sct.MarshalList of the SCTs the
	// client received in TLS and OCSP. A v1 SCT with an ECDSA signature is
	// about 120 bytes.
	MaxParams = 4 << 10
	// MaxSCTs bounds the SCTs proved for one request (embedded and sent
	// together), which is also how many evidences a body carries.
	MaxSCTs = ctpkie.MaxInclusions
)

// Defaults of the SCT half's configuration.
const (
	DefaultLogListRefresh    = time.Hour
	DefaultInclusionCache    = 100_000
	DefaultCheckpointRefresh = time.Hour
	// notYetFor is how long NotYet evidence is served from the cache: a
	// static-ct-api log publishes a checkpoint every second or so, an RFC
	// 6962 log within its merge delay, so a NotYet is soon out of date.
	notYetFor = 15 * time.Second
	// fetchTimeout bounds one SCT's lookup when the request's deadline
	// does not bound it sooner.
	fetchTimeout = 10 * time.Second
	// warnEvery spaces a log's lookup-failure warnings: every failure is
	// counted, and logged at WARN at most this often per log with the
	// count since the last one, so that an outage is seen without a
	// line per connection.
	warnEvery = 10 * time.Second
	// sctCacheSize bounds the verified-SCT cache.
	sctCacheSize = 10_000
)

// Prover is the cloud's ct prover: inclusion evidence for a certificate's
// SCTs, fetched from their logs (internal/ctinclusion) and cached, and,
// when a mirror is configured, the mirror's sorted-tree proof for a
// certificate that has no SCT.
//
// The SCTs come from the certificate (embedded) and from the request's
// Params (those the client received in TLS and OCSP), never from a lookup
// at a log: a log that cannot be reached makes that SCT's evidence
// LookupFailed, which a client reads as unknown, never as evidence against
// the certificate.
type Prover struct {
	mirror *Mirror // nil without log_url

	// The log list half; src empty without log_list.
	src      string
	listOpts loglist.LoadOptions
	every    time.Duration
	list     atomic.Pointer[loglist.List]
	listMu   sync.Mutex // one load at a time
	listErr  atomic.Pointer[string]
	fetcher  *ctinclusion.Fetcher
	cache    *evidenceCache
	memo     *lru.Cache[memoKey, evidenceKey]
	scts     *sct.Cache
	hc       *http.Client
	log      *slog.Logger
	now      func() time.Time
	failures sync.Map // [32]byte log ID → *logFailures
	lookups  atomic.Uint64
}

type logFailures struct {
	name     string
	count    atomic.Uint64
	mu       sync.Mutex
	lastWarn time.Time
	unwarned uint64
}

// NewProver builds the CT prover from a ProverConfig in JSON: the log
// list half (log_list), loaded before it returns and reloaded every
// log_list_refresh while the host runs it, and the mirror half (log_url),
// synced once before it returns and then every sync_interval. Either or
// both.
func NewProver(ctx context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("ct prover configuration: %w", err)
	}
	if err := checkConfig(c); err != nil {
		return nil, err
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Prover{log: log, now: time.Now, hc: env.HTTP}
	if p.hc == nil {
		p.hc = &http.Client{Timeout: time.Minute}
	}
	if c.LogList != "" {
		if err := p.openList(ctx, c); err != nil {
			return nil, err
		}
	}
	if c.LogURL != "" {
		m, err := openMirror(ctx, env, c, log)
		if err != nil {
			return nil, err
		}
		p.mirror = m
	}
	return p, nil
}

func (p *Prover) openList(ctx context.Context, c ProverConfig) error {
	p.src, p.every = c.LogList, c.LogListRefresh.D()
	if p.every == 0 {
		p.every = DefaultLogListRefresh
	}
	p.listOpts.Signature = c.LogListSignature
	if c.LogListPublicKey != "" {
		k, err := readPublicKey(c.LogListPublicKey)
		if err != nil {
			return fmt.Errorf("ct prover configuration: log_list_public_key: %w", err)
		}
		p.listOpts.PublicKey = k
	}
	n := c.InclusionCache
	if n == 0 {
		n = DefaultInclusionCache
	}
	refresh := c.CheckpointRefresh.D()
	if refresh == 0 {
		refresh = DefaultCheckpointRefresh
	}
	p.cache = newEvidenceCache(n, refresh, min(notYetFor, refresh), p.now)
	p.memo = lru.New[memoKey, evidenceKey](n)
	p.scts = sct.NewCache(sctCacheSize)
	p.fetcher = &ctinclusion.Fetcher{HTTP: p.hc}
	if err := p.LoadLogList(ctx); err != nil {
		if isURL(p.src) {
			// A list server that is down at start is retried by Run; the
			// prover answers ErrUnavailable for SCTs until a list loads.
			p.log.Error("ct prover: the log list did not load; retrying", "log_list", p.src, "err", err)
			return nil
		}
		return fmt.Errorf("ct prover configuration: log_list: %w", err)
	}
	return nil
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// readPublicKey reads the PEM public key a log list is signed with.
func readPublicKey(file string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return loglist.ParsePublicKeyPEM(b)
}

// LoadLogList loads the log list now. A list that fails to load or to
// verify leaves the previous one in place; the error is returned and kept
// for Health.
func (p *Prover) LoadLogList(ctx context.Context) error {
	if p.src == "" {
		return errors.New("ct prover: no log_list configured")
	}
	p.listMu.Lock()
	defer p.listMu.Unlock()
	l, err := loglist.Load(ctx, p.hc, p.src, p.listOpts)
	if err != nil {
		msg := err.Error()
		p.listErr.Store(&msg)
		return err
	}
	p.listErr.Store(nil)
	if old := p.list.Load(); old == nil || old.Version != l.Version || !old.Timestamp.Equal(l.Timestamp) {
		p.log.Info("ct prover: log list loaded", "log_list", p.src, "version", l.Version, "timestamp", l.Timestamp, "logs", len(l.Logs))
	}
	p.list.Store(l)
	return nil
}

// LogList returns the log list in use, or nil.
func (p *Prover) LogList() *loglist.List { return p.list.Load() }

// ID returns pkie.CT.
func (p *Prover) ID() pkie.ID { return pkie.CT }

// Run syncs the mirror and reloads the log list until ctx ends. A list
// that fails to load is logged at ERROR, each time, and the previous one
// kept; while none has loaded, loading is retried every minute.
func (p *Prover) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if p.mirror != nil {
		wg.Go(func() { p.mirror.Run(ctx) })
	}
	if p.src != "" {
		wg.Go(func() {
			for {
				wait := p.every
				if p.list.Load() == nil {
					wait = min(wait, time.Minute)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				if err := p.LoadLogList(ctx); err != nil && ctx.Err() == nil {
					p.log.Error("ct prover: the log list did not reload; keeping the previous one", "log_list", p.src, "err", err,
						"previous", p.listVersion())
				}
			}
		})
	}
	wg.Wait()
}

func (p *Prover) listVersion() string {
	l := p.list.Load()
	if l == nil {
		return "none"
	}
	return l.Version + " of " + l.Timestamp.UTC().Format(time.RFC3339)
}

// Health fails only when the prover can prove nothing: no log list loaded
// and no healthy mirror. A mirror that is behind while a list is loaded
// is reported by the mirror's own status, not here: SCTs are still proved.
func (p *Prover) Health() error {
	var errs []string
	if p.src != "" {
		if p.list.Load() != nil {
			return nil
		}
		e := "no log list loaded"
		if m := p.listErr.Load(); m != nil {
			e += ": " + *m
		}
		errs = append(errs, "ct prover: "+e)
	}
	if p.mirror != nil {
		err := p.mirror.Health()
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return errors.New(strings.Join(errs, "; "))
}

// Close closes the mirror, if any.
func (p *Prover) Close() error {
	if p.mirror != nil {
		return p.mirror.Close()
	}
	return nil
}

// Mirror returns the sorted-tree mirror, or nil.
func (p *Prover) Mirror() *Mirror { return p.mirror }

// Sync syncs the mirror (see Mirror.Sync).
func (p *Prover) Sync(ctx context.Context) (*ctfollow.State, error) {
	if p.mirror == nil {
		return nil, errors.New("ct prover: no mirror configured (log_url)")
	}
	return p.mirror.Sync(ctx)
}

// Status reports the mirror's state, or an unsynced status without one.
func (p *Prover) Status() prover.Status {
	if p.mirror == nil {
		return prover.Status{PKIE: prover.CT}
	}
	return p.mirror.Status()
}

// RefusedSyncs counts the mirror's refused syncs (zero without one).
func (p *Prover) RefusedSyncs() uint64 {
	if p.mirror == nil {
		return 0
	}
	return p.mirror.RefusedSyncs()
}

// LookupFailures returns, for each log whose lookups failed, how many did,
// keyed by the log's description and the first bytes of its ID.
func (p *Prover) LookupFailures() map[string]uint64 {
	out := map[string]uint64{}
	p.failures.Range(func(_, v any) bool {
		f := v.(*logFailures)
		out[f.name] = f.count.Load()
		return true
	})
	return out
}

// Lookups counts the lookups made at logs (cache misses), failed or not.
func (p *Prover) Lookups() uint64 { return p.lookups.Load() }

// Prove proves what the prover can about the request's certificate: the
// inclusion evidence of its SCTs (embedded, and those in req.Params) from
// the logs of the log list, and, for a certificate with no SCT or when no
// log list is configured, the mirror's sorted-tree proof.
func (p *Prover) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	if len(req.Chain) == 0 {
		return nil, fmt.Errorf("%w: no certificate", pkie.ErrUnsupported)
	}
	leaf, issuer, err := leafAndIssuer(req)
	if err != nil {
		return nil, err
	}
	scts, err := p.requestSCTs(leaf, req.Params)
	if err != nil {
		return nil, err
	}
	var body ctpkie.Body
	if len(scts) == 0 || p.src == "" {
		if p.mirror == nil {
			return nil, fmt.Errorf("%w: ct prover: no SCT in the certificate or the request, and no mirror configured", pkie.ErrUnsupported)
		}
		if body.Tree, err = p.treeProof(req); err != nil {
			return nil, err
		}
	}
	if len(scts) > 0 && p.src != "" {
		list := p.list.Load()
		if list == nil {
			return nil, fmt.Errorf("%w: ct prover: no log list loaded yet (%s)", pkie.ErrUnavailable, p.src)
		}
		body.Inclusions = p.inclusions(ctx, list, leaf, issuer, scts)
	}
	b, err := body.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("ct prover: %w", err)
	}
	return &pkie.Proof{ID: pkie.CT, Version: ctpkie.BodyVersion, Body: b}, nil
}

// leafAndIssuer returns the chain's first two certificates, parsed: the
// cloud parses every chain once for all provers (req.Certs), and a host
// that did not is served too. The issuer is the one the server sent,
// unauthenticated: it only serves to rebuild the precertificate entry an
// embedded SCT signs, which a wrong issuer does not match.
func leafAndIssuer(req *pkie.ProveRequest) (leaf, issuer *x509.Certificate, err error) {
	certs := req.Certs
	if len(certs) == 0 {
		for i, der := range req.Chain[:min(2, len(req.Chain))] {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: certificate %d of the chain: %w", pkie.ErrUnsupported, i, err)
			}
			certs = append(certs, c)
		}
	}
	if len(certs) > 1 {
		issuer = certs[1]
	}
	return certs[0], issuer, nil
}

// requestSCTs returns the certificate's embedded SCTs and those the
// request carries, each once. Bad Params are the client's to fix
// (ErrUnsupported); a certificate whose embedded list does not parse is
// proved on the SCTs the client sent, if any.
func (p *Prover) requestSCTs(leaf *x509.Certificate, params []byte) ([]*sct.SCT, error) {
	if len(params) > MaxParams {
		return nil, fmt.Errorf("%w: ct parameters of %d bytes, at most %d (an SCT list)", pkie.ErrUnsupported, len(params), MaxParams)
	}
	var sent []*sct.SCT
	if len(params) > 0 {
		var err error
		if sent, err = sct.ParseList(params, sct.TLSExtension); err != nil {
			return nil, fmt.Errorf("%w: ct parameters are not an SCT list: %w", pkie.ErrUnsupported, err)
		}
		if len(sent) > MaxSCTs {
			return nil, fmt.Errorf("%w: ct parameters carry %d SCTs, at most %d", pkie.ErrUnsupported, len(sent), MaxSCTs)
		}
	}
	embedded, err := sct.FromCertificate(leaf)
	if err != nil {
		p.log.Debug("ct prover: the certificate's embedded SCT list does not parse", "err", err)
		embedded = nil
	}
	var out []*sct.SCT
	seen := map[[32]byte]bool{}
	for _, s := range append(embedded, sent...) {
		h := s.Hash()
		if seen[h] {
			continue
		}
		seen[h] = true
		out = append(out, s)
	}
	if len(out) > MaxSCTs {
		return nil, fmt.Errorf("%w: %d SCTs in the certificate and the request, at most %d", pkie.ErrUnsupported, len(out), MaxSCTs)
	}
	return out, nil
}

func (p *Prover) treeProof(req *pkie.ProveRequest) (*treeproof.Body, error) {
	key, err := leafKey(req)
	if err != nil {
		return nil, err
	}
	resp, err := p.mirror.Prove(key)
	if errors.Is(err, prover.ErrNotSynced) {
		return nil, fmt.Errorf("%w: ct prover holds no verified tree of its log: %w", pkie.ErrUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	return treeproof.FromResponse(resp)
}

// inclusions returns the evidence for each SCT whose log is in the list,
// in the order of scts: from the cache, or fetched from the logs
// concurrently within ctx's deadline.
func (p *Prover) inclusions(ctx context.Context, list *loglist.List, leaf, issuer *x509.Certificate, scts []*sct.SCT) []ctinclusion.Evidence {
	out := make([]*ctinclusion.Evidence, len(scts))
	// The leaf hash of an SCT's entry is memoized by the SCT's and the
	// certificates' hashes: rebuilding a precertificate's TBSCertificate
	// and hashing it for every SCT of every request costs more than the
	// rest of a cached answer.
	leafID := sha256.Sum256(leaf.Raw)
	var issuerID [32]byte
	if issuer != nil {
		issuerID = sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	}
	var entries [2]*sct.Entry // precertificate, certificate: the same for every SCT of the request
	// Lookups are waited for until four fifths of the request's time
	// has passed, so that the proof, with what did arrive, still reaches
	// the client in time; a lookup not done by then goes on and serves
	// the next request.
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(d)*4/5))
		defer cancel()
	}
	var wg sync.WaitGroup
	for i, s := range scts {
		l := list.Lookup(s.LogID)
		if l == nil {
			continue // the client's log list decides what an unknown log means
		}
		h := s.Hash()
		mk := memoKey{sct: h, leaf: leafID, issuer: issuerID, embedded: s.Source == sct.Embedded}
		if k, ok := p.memo.Get(mk); ok {
			if ev, fresh := p.cache.get(k); fresh {
				out[i] = about(ev, s)
				continue
			}
		}
		slot := 1
		if mk.embedded {
			slot = 0
		}
		e := entries[slot]
		if e == nil {
			var err error
			if e, err = sct.EntryFor(s, leaf, issuer); err != nil {
				out[i] = failed(s, l, fmt.Sprintf("the cloud could not rebuild the log entry: %v", err))
				continue
			}
			entries[slot] = e
		}
		k := evidenceKey{log: l.ID, leaf: e.LeafHash(s)}
		p.memo.Put(mk, k)
		ev, fresh := p.cache.get(k)
		if fresh {
			out[i] = about(ev, s)
			continue
		}
		// Only an SCT the log signed is worth a lookup: a client cannot
		// send the cloud to fetch tiles for made-up indices.
		if err := p.scts.Verify(s, e, l.Key); err != nil {
			p.log.Debug("ct prover: an SCT does not verify; no lookup", "log", l.Description, "err", err)
			continue
		}
		wg.Go(func() { out[i] = p.lookup(ctx, l, s, k, ev) })
	}
	wg.Wait()
	var evs []ctinclusion.Evidence
	for _, e := range out {
		if e != nil {
			evs = append(evs, *e)
		}
	}
	return evs
}

// lookup fetches one SCT's evidence through the cache; stale is the
// cached Included evidence to fall back on, or nil.
func (p *Prover) lookup(ctx context.Context, l *loglist.Log, s *sct.SCT, k evidenceKey, stale *ctinclusion.Evidence) *ctinclusion.Evidence {
	ev, err := p.cache.do(ctx, k, func() (*ctinclusion.Evidence, error) {
		p.lookups.Add(1)
		// Not the request's cancellation: the fetch serves the next
		// request too. Its time is bounded here.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		ev, err := p.fetcher.Fetch(fctx, l, s, k.leaf)
		var mismatch *ctinclusion.MismatchError
		if errors.As(err, &mismatch) && ev != nil && ev.Status == ctinclusion.Conflict {
			// Signed evidence against the SCT: the log's tree holds
			// another entry where the SCT says its entry is. Relayed
			// (the client verifies it); an operator should know.
			p.log.Error("ct prover: a log's signed tree holds another entry at an SCT's leaf index", "log", logName(l), "err", err)
			return ev, nil
		}
		return ev, err
	})
	if err == nil && ev != nil && ev.Status == ctinclusion.LookupFailed {
		err = errors.New(ev.Message)
	}
	if err != nil || ev == nil {
		switch {
		case errors.Is(err, errLookupsFull):
			// The cloud is busy, not the log: not counted against it.
		case err != nil && ctx.Err() != nil:
			// The request's time ran out before the log answered; the
			// lookup goes on, for the next request, and the log is not
			// blamed for the cloud's own limit.
			err = errors.New("the cloud stopped waiting at the request's deadline; the lookup goes on")
		default:
			if err == nil {
				err = errors.New("no evidence")
			}
			p.failed(l, err)
		}
		if stale != nil {
			return about(stale, s)
		}
		return failed(s, l, err.Error())
	}
	return about(ev, s)
}

// about returns ev as the evidence about s. Evidence is cached by leaf
// hash, and two SCTs can share one: a log that signs its SCT for an entry
// again (ECDSA signatures differ each time), as for a certificate
// submitted twice. The evidence holds for both; it names the SCT the
// request carried, by which the client finds it.
func about(ev *ctinclusion.Evidence, s *sct.SCT) *ctinclusion.Evidence {
	if h := s.Hash(); ev.SCTHash != h {
		c := *ev
		c.SCTHash = h
		return &c
	}
	return ev
}

// failed counts a failed lookup at l and logs it at WARN, at most every
// warnEvery per log, with the count since the last warning.
func (p *Prover) failed(l *loglist.Log, err error) {
	v, _ := p.failures.LoadOrStore(l.ID, &logFailures{name: logName(l)})
	f := v.(*logFailures)
	f.count.Add(1)
	now := p.now()
	f.mu.Lock()
	f.unwarned++
	if now.Sub(f.lastWarn) < warnEvery {
		f.mu.Unlock()
		return
	}
	n := f.unwarned
	f.unwarned, f.lastWarn = 0, now
	f.mu.Unlock()
	p.log.Warn("ct prover: inclusion lookup failed: the SCT's inclusion is unknown to clients", "log", f.name, "url", logURL(l),
		"err", err, "failures", n, "failures_total", f.count.Load())
}

// failed returns the LookupFailed evidence for s, naming l.
func failed(s *sct.SCT, l *loglist.Log, why string) *ctinclusion.Evidence {
	e := &ctinclusion.Evidence{SCTHash: s.Hash(), LogID: l.ID, Status: ctinclusion.LookupFailed}
	msg := fmt.Sprintf("log %s: %s", logName(l), why)
	if len(msg) > ctinclusion.MaxMessage {
		msg = strings.ToValidUTF8(msg[:ctinclusion.MaxMessage-len("…")], "") + "…"
	}
	e.Message = msg
	return e
}

func logName(l *loglist.Log) string {
	if l.Description == "" {
		return l.Name()
	}
	return l.Description + " (" + loglist.ShortID(l.ID) + ")"
}

func logURL(l *loglist.Log) string {
	if l.MonitoringURL != "" {
		return l.MonitoringURL
	}
	return l.URL
}
