package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// Target is where a replayed request goes: one notary (or, later, a PEC
// cloud) spoken to over one API. The scheduler knows nothing else about
// it, so another kind of target plugs in without touching it.
type Target interface {
	// Name names the target in the run record (RunHeader.Notaries).
	Name() string
	// Do sends r and returns what came back. src is the loopback source
	// address standing for r's client (the zero Addr: let the system
	// choose). ctx carries the client's timeout; Do must return soon
	// after it ends.
	Do(ctx context.Context, r replay.Request, src netip.Addr) Answer
}

// Answer is what one request to one target came to.
type Answer struct {
	Status  int    // HTTP status, 0 when none came
	Outcome string // replay.Outcome*
	Cache   string // replay.CacheHit, replay.CacheMiss, or "" when unknown
	Err     error  // why, for every outcome but ok and conflict
	// Sent is when the request was handed to the transport (for HTTP,
	// when RoundTrip was called): the moment a client sends, after the
	// target's own preparation and before whatever the connection costs
	// (waiting for one, dialing, the TLS handshake), which is latency
	// the client sees. The zero Time means when Do was called.
	Sent time.Time
}

// Fingerprints says which certificate a client saw at host:port: the
// leaf's SHA-1 (what a Convergence client sends) and SHA-256 (what a v1
// client sends). ok false means unknown (see ConvergenceTarget and
// V1Target for what is then sent).
type Fingerprints func(host string, port uint16) (sha1 [20]byte, sha256 [32]byte, ok bool)

// maxAnswer bounds one answer's body, as the check client bounds it.
const maxAnswer = 1 << 20

// notaryConn is the HTTPS side both notary APIs share: the bundle's hosts,
// pinned by certificate as Convergence clients pin them, one transport per
// (host, source address) so that each simulated client has connections of
// its own, at most idle of them, and a count of the bytes carried.
type notaryConn struct {
	bundle *consensus.Bundle
	bytes  atomic.Int64
	idle   int
	fresh  bool // a new connection per request (RunHeader.Conns "fresh")

	mu         sync.Mutex
	transports map[transportKey]*http.Transport
}

type transportKey struct {
	host int
	src  netip.Addr
}

func newNotaryConn(b *consensus.Bundle, connsPerSource int) (*notaryConn, error) {
	if b == nil || len(b.Hosts) == 0 {
		return nil, errors.New("driver: notary bundle has no hosts")
	}
	for i := range b.Hosts {
		if b.Hosts[i].Cert() == nil {
			return nil, fmt.Errorf("driver: notary %s host %d has no parsed certificate (use consensus.ParseBundle)", b.Name, i)
		}
	}
	if connsPerSource <= 0 {
		connsPerSource = 16
	}
	return &notaryConn{bundle: b, idle: connsPerSource, transports: map[transportKey]*http.Transport{}}, nil
}

// Bytes is the TCP payload carried both ways on every connection to the
// notary: TLS records, not IP and TCP headers.
func (c *notaryConn) Bytes() int64 { return c.bytes.Load() }

// FreshConnections makes every later request open a connection of its own
// (replay.ConnsFresh) instead of reusing pooled ones (replay.ConnsReuse,
// the default). Call it before the first request.
func (t *ConvergenceTarget) FreshConnections() { t.c.fresh = true }

// FreshConnections is ConvergenceTarget.FreshConnections for v1.
func (t *V1Target) FreshConnections() { t.c.fresh = true }

// Loopback reports whether every host of the bundle is a loopback address.
func (c *notaryConn) Loopback() bool { return OnLoopback(c.bundle) }

// OnLoopback reports whether every host of b is a loopback address (or
// "localhost"), so that requests to it may leave from distinct loopback
// source addresses (Options.Sources).
func OnLoopback(b *consensus.Bundle) bool {
	for _, h := range b.Hosts {
		a, err := netip.ParseAddr(h.Host)
		if err != nil {
			if h.Host != "localhost" {
				return false
			}
			continue
		}
		if !a.IsLoopback() {
			return false
		}
	}
	return true
}

func (c *notaryConn) transport(hi int, src netip.Addr) *http.Transport {
	k := transportKey{hi, src}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.transports[k]; ok {
		return t
	}
	h := &c.bundle.Hosts[hi]
	pin := h.Cert().Raw
	serverName := h.Host
	if net.ParseIP(serverName) != nil {
		serverName = ""
	}
	d := &net.Dialer{}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	t := &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(testbed.CountConn(raw, &c.bytes), &tls.Config{
				ServerName: serverName,
				// The bundle's certificate is the notary's only trust
				// anchor: an exact pin, no CA validation (as
				// internal/consensus and Convergence clients do).
				InsecureSkipVerify: true,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, pin) {
						return errors.New("notary certificate does not match its bundle (pin mismatch)")
					}
					return nil
				},
				MinVersion: tls.VersionTLS12,
				NextProtos: []string{"h2", "http/1.1"},
			})
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return tc, nil
		},
		// HTTP/2 carries a simulated client's concurrent requests on a
		// few connections, as a browser would, instead of one socket
		// (and one file descriptor at each end) per request in flight.
		ForceAttemptHTTP2: true,
		// A burst of requests from one source would otherwise dial a
		// connection each before the first is up: a storm of
		// handshakes (an RSA signature each at the notary) that a
		// notary's per-client connection cap then resets.
		MaxConnsPerHost:     c.idle,
		MaxIdleConnsPerHost: c.idle,
		// Fresh: each request on its own connection, closed after it,
		// so the notary's bytes include a handshake per request as a
		// client checking one certificate per connection would cost it.
		DisableKeepAlives:      c.fresh,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	c.transports[k] = t
	return t
}

// post sends body to path on the bundle's hosts, in order, moving to the
// next only when one cannot be reached (as Convergence clients fail over
// between a notary's replicas). It returns the status, the body, and when
// the request was handed to the first host's transport (Answer.Sent).
func (c *notaryConn) post(ctx context.Context, src netip.Addr, path, contentType string, body []byte) (int, []byte, time.Time, error) {
	var lastErr error
	var sent time.Time
	for hi := range c.bundle.Hosts {
		status, out, err := c.postHost(ctx, hi, src, path, contentType, body, &sent)
		if err == nil || ctx.Err() != nil {
			return status, out, sent, err
		}
		lastErr = err
	}
	return 0, nil, sent, lastErr
}

// postHost posts to one host; it sets *sent, if still zero, to when the
// request is handed to the transport.
func (c *notaryConn) postHost(ctx context.Context, hi int, src netip.Addr, path, contentType string, body []byte, sent *time.Time) (int, []byte, error) {
	u := "https://" + c.bundle.Hosts[hi].SSLAddr() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	rt := c.transport(hi, src)
	if sent.IsZero() {
		*sent = time.Now()
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(out) > maxAnswer {
		return resp.StatusCode, nil, fmt.Errorf("answer exceeds %d bytes", maxAnswer)
	}
	return resp.StatusCode, out, nil
}

// Close closes idle connections.
func (c *notaryConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

// failure turns a request that got no answer into an Answer: the client's
// timeout, or a connection that failed or broke.
func failure(ctx context.Context, status int, err error) Answer {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Answer{Status: status, Outcome: replay.OutcomeTimeout, Err: err}
	}
	return Answer{Status: status, Outcome: replay.OutcomeConnError, Err: err}
}

// byStatus classifies an answer by HTTP status alone: the answers that
// carry nothing to verify.
func byStatus(status int, body []byte) Answer {
	msg := fmt.Errorf("status %d: %s", status, notaryText(body))
	switch status {
	case http.StatusServiceUnavailable:
		return Answer{Status: status, Outcome: replay.OutcomeUnavailable, Err: msg}
	}
	return Answer{Status: status, Outcome: replay.OutcomeStatus, Err: msg}
}

// notaryText is a short, printable rendering of an error body: the "error"
// field of pkie's JSON errors, else the body's first line.
func notaryText(body []byte) string {
	var j struct {
		Error string `json:"error"`
	}
	s := string(body)
	if json.Unmarshal(body, &j) == nil && j.Error != "" {
		s = j.Error
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.TrimSpace(s)
}

// learned remembers the certificate a notary last reported at each target,
// for targets whose fingerprint the replayer is not told.
type learned struct {
	mu sync.Mutex
	m  map[string][32]byte
}

const maxLearned = 1 << 20

func (l *learned) get(k string) ([32]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[k]
	return v, ok
}

func (l *learned) set(k string, v [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLearned {
		l.m = map[string][32]byte{}
	}
	l.m[k] = v
}

func targetKey(host string, port uint16) string {
	return strings.ToLower(host) + "+" + strconv.Itoa(int(port))
}

// ConvergenceTarget asks a notary over the Convergence API, as the
// Convergence Firefox client does: POST /target/host+port with the form
// fingerprint=<the leaf's SHA-1, colon hex>, over HTTPS pinned to the
// bundle's certificate. A 200 or 409 is read only once its signature
// verifies against the bundle's key (consensus.VerifyResponse).
//
// The answer does not say whether the notary probed. Its signed history
// does, to the second: the notary timestamps each observation in whole
// seconds (Convergence's "finish"), so an answer whose newest finish is in
// the second the request left, or later, comes from a probe made for it
// (CacheMiss), and one whose newest finish is older comes from history
// (CacheHit). The one-second resolution errs one way only: a request
// answered from an observation made earlier in the same second it left
// would be counted a miss. The target narrows that: an observation an
// earlier answer had already shown before the request left is history,
// so only requests that left while the observation was being made and
// reported remain in doubt, and they are counted misses (as the v1 API
// counts a request that waited for a probe already under way). Against a
// remote notary the classification also assumes the two clocks agree to
// within a second.
//
// A target whose fingerprint is unknown (Fingerprints says !ok) is asked
// about the SHA-1 of the certificate the notary last reported there, once
// one answer has shown it; until then about 00:00:…:00, which no
// certificate has, so the notary probes and answers 409 with what it sees.
type ConvergenceTarget struct {
	name  string
	fp    Fingerprints
	c     *notaryConn
	seen  learned
	shown shownObs
	now   func() time.Time
}

// shownObs remembers, per target, the newest observation an answer has
// shown and when that answer arrived. An answer whose newest observation
// another answer had already shown before this request left is from
// history whatever the seconds say: that narrows the one-second
// imprecision to requests that left while the probe answering an earlier
// one was finishing.
type shownObs struct {
	mu sync.Mutex
	m  map[string]shown
}

type shown struct {
	fp      [20]byte
	finish  time.Time
	arrived time.Time
}

func (s *shownObs) before(k string, e *consensus.Entry, left time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return ok && v.fp == e.Fingerprint && v.finish.Equal(e.Finish) && v.arrived.Before(left)
}

func (s *shownObs) note(k string, e *consensus.Entry, arrived time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok && (v.finish.After(e.Finish) || (v.fp == e.Fingerprint && v.finish.Equal(e.Finish))) {
		return
	}
	if s.m == nil || len(s.m) >= maxLearned {
		s.m = map[string]shown{}
	}
	s.m[k] = shown{fp: e.Fingerprint, finish: e.Finish, arrived: arrived}
}

// NewConvergence returns a target asking the notary of bundle b over the
// Convergence API. connsPerSource bounds the connections to each notary
// host from each source address (0: 16); HTTP/2 carries up to the
// notary's stream limit (100 for pkie's) requests on each.
func NewConvergence(b *consensus.Bundle, fp Fingerprints, connsPerSource int) (*ConvergenceTarget, error) {
	c, err := newNotaryConn(b, connsPerSource)
	if err != nil {
		return nil, err
	}
	for i := range b.Hosts {
		if b.Hosts[i].PublicKey() == nil {
			return nil, fmt.Errorf("driver: notary %s host %d has no RSA key to verify Convergence answers with", b.Name, i)
		}
	}
	return &ConvergenceTarget{name: b.Name, fp: fp, c: c, now: time.Now}, nil
}

// Name implements Target.
func (t *ConvergenceTarget) Name() string { return t.name }

// Bytes is the bytes carried on the connections to the notary.
func (t *ConvergenceTarget) Bytes() int64 { return t.c.Bytes() }

// Loopback reports whether the notary is on loopback.
func (t *ConvergenceTarget) Loopback() bool { return t.c.Loopback() }

// Close closes idle connections.
func (t *ConvergenceTarget) Close() { t.c.Close() }

// Do implements Target.
func (t *ConvergenceTarget) Do(ctx context.Context, r replay.Request, src netip.Addr) Answer {
	var sha1 [20]byte
	known := false
	if t.fp != nil {
		var ok bool
		if sha1, _, ok = t.fp(r.Host, r.Port); ok {
			known = true
		}
	}
	if !known {
		if v, ok := t.seen.get(targetKey(r.Host, r.Port)); ok {
			copy(sha1[:], v[:20])
		}
	}
	left := t.now()
	form := url.Values{"fingerprint": {probe.ColonHex(sha1[:])}}.Encode()
	path := "/target/" + url.PathEscape(r.Host) + "+" + strconv.Itoa(int(r.Port))
	status, body, sent, err := t.c.post(ctx, src, path, "application/x-www-form-urlencoded", []byte(form))
	a := t.answer(ctx, r, known, left, status, body, err)
	a.Sent = sent
	return a
}

func (t *ConvergenceTarget) answer(ctx context.Context, r replay.Request, known bool, left time.Time, status int, body []byte, err error) Answer {
	if err != nil {
		return failure(ctx, status, err)
	}
	if status != http.StatusOK && status != http.StatusConflict {
		return byStatus(status, body)
	}
	// Any host's key: replicas of one notary share it.
	entries, err := consensus.VerifyResponse(body, t.c.bundle.Hosts[0].PublicKey())
	if err != nil {
		return Answer{Status: status, Outcome: replay.OutcomeStatus, Err: fmt.Errorf("invalid answer: %w", err)}
	}
	a := Answer{Status: status, Outcome: replay.OutcomeOK}
	if status == http.StatusConflict {
		a.Outcome = replay.OutcomeConflict
	}
	var newest *consensus.Entry
	for i := range entries {
		if newest == nil || entries[i].Finish.After(newest.Finish) {
			newest = &entries[i]
		}
	}
	if newest != nil {
		a.Cache = replay.CacheHit
		key := targetKey(r.Host, r.Port)
		if newest.Finish.Unix() >= left.Unix() && !t.shown.before(key, newest, left) {
			a.Cache = replay.CacheMiss
		}
		t.shown.note(key, newest, t.now())
		if !known {
			var v [32]byte
			copy(v[:], newest.Fingerprint[:])
			t.seen.set(targetKey(r.Host, r.Port), v)
		}
	}
	return a
}

// V1Target asks a notary over pkie's v1 API (docs/formats/api.md): POST /v1/check
// with the leaf's SHA-256. The answer is verified against the bundle's v1
// key (consensus.VerifyV1) before it is read; its "probed" field says
// exactly whether the notary probed for this request (CacheMiss) or
// answered from history (CacheHit). An answer that does not match the
// fingerprint asked about counts as a conflict (the v1 API answers 200 and
// match false where Convergence answers 409).
//
// A target whose fingerprint is unknown is asked about the certificate the
// notary last reported there, once one answer has shown it; until then
// without a fingerprint, which makes the notary probe and report what it
// sees (counted ok).
type V1Target struct {
	name string
	fp   Fingerprints
	c    *notaryConn
	seen learned
	now  func() time.Time
}

// NewV1 returns a target asking the notary of bundle b over the v1 API;
// the bundle must carry the v1 key.
func NewV1(b *consensus.Bundle, fp Fingerprints, connsPerSource int) (*V1Target, error) {
	c, err := newNotaryConn(b, connsPerSource)
	if err != nil {
		return nil, err
	}
	for i := range b.Hosts {
		if b.Hosts[i].V1PublicKey() == nil {
			return nil, fmt.Errorf("driver: notary %s host %d: bundle carries no %s key, so it cannot be asked over v1", b.Name, i, consensus.V1FieldName)
		}
	}
	return &V1Target{name: b.Name, fp: fp, c: c, now: time.Now}, nil
}

// Name implements Target.
func (t *V1Target) Name() string { return t.name }

// Bytes is the bytes carried on the connections to the notary.
func (t *V1Target) Bytes() int64 { return t.c.Bytes() }

// Loopback reports whether the notary is on loopback.
func (t *V1Target) Loopback() bool { return t.c.Loopback() }

// Close closes idle connections.
func (t *V1Target) Close() { t.c.Close() }

// Do implements Target.
func (t *V1Target) Do(ctx context.Context, r replay.Request, src netip.Addr) Answer {
	q := consensus.V1Question{Host: strings.ToLower(r.Host), Port: int(r.Port)}
	var sum [32]byte
	known, given := false, false
	if t.fp != nil {
		_, sum, known = t.fp(r.Host, r.Port)
		given = known
	}
	if !known {
		sum, known = t.seen.get(targetKey(r.Host, r.Port))
	}
	wire := struct {
		Host   string `json:"host"`
		Port   int    `json:"port"`
		SHA256 string `json:"sha256,omitempty"`
	}{Host: q.Host, Port: q.Port}
	if known {
		q.SHA256 = &sum
		wire.SHA256 = hex.EncodeToString(sum[:])
	}
	body, _ := json.Marshal(wire)
	status, out, sent, err := t.c.post(ctx, src, "/v1/check", "application/json", body)
	a := t.answer(ctx, r, q, given, status, out, err)
	a.Sent = sent
	return a
}

func (t *V1Target) answer(ctx context.Context, r replay.Request, q consensus.V1Question, given bool, status int, out []byte, err error) Answer {
	if err != nil {
		return failure(ctx, status, err)
	}
	if status != http.StatusOK {
		return byStatus(status, out)
	}
	ans, err := consensus.VerifyV1(out, t.c.bundle.Hosts[0].V1PublicKey(), q, t.now(), consensus.DefaultAnswerMaxAge)
	if err != nil {
		return Answer{Status: status, Outcome: replay.OutcomeStatus, Err: fmt.Errorf("invalid answer: %w", err)}
	}
	a := Answer{Status: status, Outcome: replay.OutcomeOK, Cache: replay.CacheHit}
	if ans.Probed {
		a.Cache = replay.CacheMiss
	}
	if ans.Match != nil && !*ans.Match {
		a.Outcome = replay.OutcomeConflict
	}
	if !given {
		if b, err := hex.DecodeString(ans.Current); err == nil && len(b) == 32 {
			var v [32]byte
			copy(v[:], b)
			t.seen.set(targetKey(r.Host, r.Port), v)
		}
	}
	return a
}
