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
// its own, and a count of the bytes carried.
type notaryConn struct {
	bundle *consensus.Bundle
	bytes  atomic.Int64
	idle   int

	mu         sync.Mutex
	transports map[transportKey]*http.Transport
}

type transportKey struct {
	host int
	src  netip.Addr
}

func newNotaryConn(b *consensus.Bundle, idlePerSource int) (*notaryConn, error) {
	if b == nil || len(b.Hosts) == 0 {
		return nil, errors.New("driver: notary bundle has no hosts")
	}
	for i := range b.Hosts {
		if b.Hosts[i].Cert() == nil {
			return nil, fmt.Errorf("driver: notary %s host %d has no parsed certificate (use consensus.ParseBundle)", b.Name, i)
		}
	}
	if idlePerSource <= 0 {
		idlePerSource = 16
	}
	return &notaryConn{bundle: b, idle: idlePerSource, transports: map[transportKey]*http.Transport{}}, nil
}

// Bytes is the TCP payload carried both ways on every connection to the
// notary: TLS records, not IP and TCP headers.
func (c *notaryConn) Bytes() int64 { return c.bytes.Load() }

// Loopback reports whether every host of the bundle is a loopback address,
// so that requests may leave from distinct loopback source addresses.
func (c *notaryConn) Loopback() bool {
	for _, h := range c.bundle.Hosts {
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
			tc := tls.Client(&countConn{Conn: raw, n: &c.bytes}, &tls.Config{
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
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    c.idle,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	c.transports[k] = t
	return t
}

// post sends body to path on the bundle's hosts, in order, moving to the
// next only when one cannot be reached (as Convergence clients fail over
// between a notary's replicas). It returns the status and the body.
func (c *notaryConn) post(ctx context.Context, src netip.Addr, path, contentType string, body []byte) (int, []byte, error) {
	var lastErr error
	for hi := range c.bundle.Hosts {
		status, out, err := c.postHost(ctx, hi, src, path, contentType, body)
		if err == nil || ctx.Err() != nil {
			return status, out, err
		}
		lastErr = err
	}
	return 0, nil, lastErr
}

func (c *notaryConn) postHost(ctx context.Context, hi int, src netip.Addr, path, contentType string, body []byte) (int, []byte, error) {
	u := "https://" + c.bundle.Hosts[hi].SSLAddr() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.transport(hi, src).RoundTrip(req)
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
// answered from an observation made earlier in the same second it left is
// counted a miss. Against a remote notary the classification also assumes
// the two clocks agree to within that second.
//
// A target whose fingerprint is unknown (Fingerprints says !ok) is asked
// about the SHA-1 of the certificate the notary last reported there, once
// one answer has shown it; until then about 00:00:…:00, which no
// certificate has, so the notary probes and answers 409 with what it sees.
type ConvergenceTarget struct {
	name string
	fp   Fingerprints
	c    *notaryConn
	seen learned
	now  func() time.Time
}

// NewConvergence returns a target asking the notary of bundle b over the
// Convergence API. idlePerSource sizes each source address's pool of idle
// connections (0: 16).
func NewConvergence(b *consensus.Bundle, fp Fingerprints, idlePerSource int) (*ConvergenceTarget, error) {
	c, err := newNotaryConn(b, idlePerSource)
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
	status, body, err := t.c.post(ctx, src, path, "application/x-www-form-urlencoded", []byte(form))
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
		if newest.Finish.Unix() >= left.Unix() {
			a.Cache = replay.CacheMiss
		}
		if !known {
			var v [32]byte
			copy(v[:], newest.Fingerprint[:])
			t.seen.set(targetKey(r.Host, r.Port), v)
		}
	}
	return a
}

// V1Target asks a notary over pkie's v1 API (docs/api.md): POST /v1/check
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
func NewV1(b *consensus.Bundle, fp Fingerprints, idlePerSource int) (*V1Target, error) {
	c, err := newNotaryConn(b, idlePerSource)
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
	status, out, err := t.c.post(ctx, src, "/v1/check", "application/json", body)
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

// countConn adds the bytes read and written through it to n.
type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(int64(k))
	return k, err
}

func (c *countConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(int64(k))
	return k, err
}
