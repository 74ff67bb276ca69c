package pec

import (
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
)

// Defaults of a ServerConfig.
const (
	// DefaultHelloTimeout bounds the wait for a connection's ClientHello.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultForwardRate and DefaultForwardBurst bound the forwarding of
	// all connections together: chains sent per second, and at once.
	DefaultForwardRate  = 200.0
	DefaultForwardBurst = 400
	// DefaultPerClientRate and DefaultPerClientBurst bound one client
	// address's share.
	DefaultPerClientRate  = 5.0
	DefaultPerClientBurst = 20
	// DefaultCloudDialTimeout bounds opening a session with a cloud.
	DefaultCloudDialTimeout = 5 * time.Second
)

// AllowedCloud is a point of presence a PEC server forwards chains to.
type AllowedCloud struct {
	// Addr is the point of presence's address and transport.
	Addr Addr
	// Pin is the SHA-256 of the cloud's SubjectPublicKeyInfo, as in its
	// bundle. Without one (Pinned false) the server accepts whatever key
	// the point of presence shows: what it sends (its own public chain,
	// the name the client asked for, the client's identifier and nonce) is
	// what a network observer sees anyway, but a pinned cloud cannot be
	// impersonated to learn the client's identifier.
	Pin    [32]byte
	Pinned bool
}

// AllowBundle returns every point of presence of a cloud's bundle, pinned
// to its key.
func AllowBundle(b *Bundle) ([]AllowedCloud, error) {
	pin, err := b.Pin()
	if err != nil {
		return nil, fmt.Errorf("pec: bundle %q: %w", b.Name, err)
	}
	var out []AllowedCloud
	for _, p := range b.Points {
		if p.QUIC != "" {
			out = append(out, AllowedCloud{Addr: Addr{pecwire.QUIC, p.QUIC}, Pin: pin, Pinned: true})
		}
		if p.TCP != "" {
			out = append(out, AllowedCloud{Addr: Addr{pecwire.TCP, p.TCP}, Pin: pin, Pinned: true})
		}
	}
	return out, nil
}

// ServerConfig configures a PEC server's listener.
type ServerConfig struct {
	// TLSConfig is the configuration the connections are served with: the
	// chain sent to the cloud is the one it presents for the client's
	// server name (GetCertificate, or Certificates). It is not modified.
	TLSConfig *tls.Config
	// Clouds are the points of presence the server forwards to; a
	// ClientHello naming any other is not forwarded (the reflection guard
	// of the PEC paper, §7). Empty: nothing is forwarded.
	Clouds []AllowedCloud
	// Port is the port clients connect to, as they name it in their own
	// submissions; 0 means the listener's local port. Set it behind a port
	// mapping, or the cloud proves the client's submission and the
	// server's separately.
	Port int
	// HelloTimeout bounds the wait for the ClientHello; 0 means
	// DefaultHelloTimeout. The TLS stack's own deadlines still apply.
	HelloTimeout time.Duration
	// ForwardRate and ForwardBurst bound forwarding over all connections
	// (chains per second; at once); 0 means the defaults, negative
	// forwards nothing.
	ForwardRate  float64
	ForwardBurst int
	// PerClientRate and PerClientBurst bound forwarding for one client IP
	// address; 0 means the defaults.
	PerClientRate  float64
	PerClientBurst int
	// Budget is what the server tells the cloud it may spend on the
	// proofs; 0 lets the cloud use its maximum.
	Budget time.Duration
	// Logger receives forwarding failures; nil discards them.
	Logger *slog.Logger
}

// ServerStats counts what a Listener did with ClientHellos.
type ServerStats struct {
	// Hellos counts ClientHellos read; WithExtension those carrying a PEC
	// extension that parsed.
	Hellos        uint64 `json:"hellos"`
	WithExtension uint64 `json:"with_extension"`
	// Malformed counts extensions that did not parse.
	Malformed uint64 `json:"malformed"`
	// Forwarded counts chains sent to a cloud.
	Forwarded uint64 `json:"forwarded"`
	// NotAllowed counts extensions naming a cloud not on the allowlist.
	NotAllowed uint64 `json:"not_allowed"`
	// RateLimited counts forwards refused by the rate limits.
	RateLimited uint64 `json:"rate_limited"`
	// NoChain counts connections whose server name matched no certificate.
	NoChain uint64 `json:"no_chain"`
	// Failed counts forwards that could not be sent.
	Failed uint64 `json:"failed"`
	// Rejected counts submissions the cloud refused (Reject).
	Rejected uint64 `json:"rejected"`
}

// Listener is a net.Listener for a stock crypto/tls server that makes it a
// PEC server (PEC paper §4.1, Figure 2a): it reads each connection's
// ClientHello before the TLS stack does, and when it carries the PEC
// extension naming an allowed cloud, sends the server's own chain for the
// client's server name to that cloud at once, half a round trip before
// the client could; then it hands the connection on with the bytes it read
// replayed, so the TLS stack sees it untouched. It never fails a
// connection: an unreadable ClientHello, a missing or malformed extension,
// a cloud not allowed or unreachable all leave the connection to the TLS
// stack, and the client, which submits the chain itself when no proofs
// come, to the client-only deployment.
//
// Wrap the listener given to tls.NewListener or http.Server.ServeTLS.
type Listener struct {
	net.Listener
	cfg     ServerConfig
	log     *slog.Logger
	allowed map[Addr]AllowedCloud
	total   *bucket
	perIP   *bucketMap
	port    int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	pools map[Addr]*cloudSession

	st struct {
		hellos, withExt, malformed, forwarded, notAllowed, limited, noChain, failed, rejected atomic.Uint64
	}
}

// NewListener wraps inner.
func NewListener(inner net.Listener, cfg ServerConfig) (*Listener, error) {
	if cfg.TLSConfig == nil || (len(cfg.TLSConfig.Certificates) == 0 && cfg.TLSConfig.GetCertificate == nil) {
		return nil, errors.New("pec: ServerConfig needs a TLSConfig with a certificate")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("pec: port %d out of range", cfg.Port)
	}
	l := &Listener{Listener: inner, cfg: cfg, log: cfg.Logger, allowed: map[Addr]AllowedCloud{}, pools: map[Addr]*cloudSession{}}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	for _, a := range cfg.Clouds {
		if err := a.Addr.Check(); err != nil {
			return nil, fmt.Errorf("pec: allowed cloud: %w", err)
		}
		l.allowed[a.Addr] = a
	}
	rate, burst := orDefault(cfg.ForwardRate, DefaultForwardRate), cfg.ForwardBurst
	if burst == 0 {
		burst = DefaultForwardBurst
	}
	l.total = newBucket(rate, burst, time.Now())
	prate, pburst := orDefault(cfg.PerClientRate, DefaultPerClientRate), cfg.PerClientBurst
	if pburst == 0 {
		pburst = DefaultPerClientBurst
	}
	l.perIP = newBucketMap(prate, pburst, maxTracked)
	l.port = cfg.Port
	if l.port == 0 {
		if ta, ok := inner.Addr().(*net.TCPAddr); ok {
			l.port = ta.Port
		}
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

func orDefault(v, d float64) float64 {
	if v == 0 {
		return d
	}
	return v
}

// Accept returns the next connection. Its ClientHello is read on the
// connection's first Read, in the goroutine that serves it, so one slow
// client never holds up Accept.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &helloConn{Conn: c, l: l}, nil
}

// Close closes the listener and the sessions with the clouds, and waits
// for forwards under way.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.cancel()
	l.mu.Lock()
	for _, s := range l.pools {
		s.conn.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ServerStats {
	return ServerStats{
		Hellos: l.st.hellos.Load(), WithExtension: l.st.withExt.Load(), Malformed: l.st.malformed.Load(),
		Forwarded: l.st.forwarded.Load(), NotAllowed: l.st.notAllowed.Load(), RateLimited: l.st.limited.Load(),
		NoChain: l.st.noChain.Load(), Failed: l.st.failed.Load(), Rejected: l.st.rejected.Load(),
	}
}

// helloConn reads the ClientHello on its first Read and then replays it.
type helloConn struct {
	net.Conn
	l *Listener

	once   sync.Once
	replay []byte
	rerr   error

	dmu      sync.Mutex
	deadline time.Time // the TLS stack's read deadline
	peeking  bool
}

// NetConn returns the accepted connection, for wrappers that look through
// (httplimit's connection caps).
func (c *helloConn) NetConn() net.Conn { return c.Conn }

func (c *helloConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.deadline = t
	peeking := c.peeking
	c.dmu.Unlock()
	if peeking {
		return nil // applied once the ClientHello is read
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *helloConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *helloConn) Read(b []byte) (int, error) {
	c.once.Do(c.peek)
	if len(c.replay) > 0 {
		n := copy(b, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	if c.rerr != nil {
		return 0, c.rerr
	}
	return c.Conn.Read(b)
}

// peek reads the ClientHello within HelloTimeout (or the TLS stack's
// earlier deadline) and forwards the chain when the extension asks.
func (c *helloConn) peek() {
	l := c.l
	c.dmu.Lock()
	c.peeking = true
	limit := time.Now().Add(cmpOr(l.cfg.HelloTimeout, DefaultHelloTimeout))
	if !c.deadline.IsZero() && c.deadline.Before(limit) {
		limit = c.deadline
	}
	c.dmu.Unlock()
	c.Conn.SetReadDeadline(limit)
	raw, hello, err := readClientHello(c.Conn, MaxClientHello)
	c.dmu.Lock()
	c.peeking = false
	c.Conn.SetReadDeadline(c.deadline)
	c.dmu.Unlock()
	c.replay = raw
	if err != nil {
		// Hand on what was read; a read error recurs on the next Read
		// unless it was only the ClientHello being unusual.
		var ne net.Error
		if len(raw) == 0 || errors.As(err, &ne) {
			c.rerr = unwrapRead(err)
		}
		return
	}
	l.st.hellos.Add(1)
	if !hello.HasPEC {
		return
	}
	ext, err := ParseExtension(hello.PEC)
	if err != nil {
		l.st.malformed.Add(1)
		l.log.Debug("pec: malformed extension", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	l.st.withExt.Add(1)
	l.forward(c, hello.ServerName, ext)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// unwrapRead returns the transport error inside a reader error, so that
// the TLS stack sees the timeout or EOF it would have seen itself.
func unwrapRead(err error) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return ne
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == nil {
			return e
		}
	}
	return err
}

// forward sends the server's chain to the cloud the extension names, if it
// is allowed and the rate limits let it, without waiting: the TLS
// handshake goes on meanwhile.
func (l *Listener) forward(c net.Conn, serverName string, ext *Extension) {
	if len(ext.EphID) > 0 && (!ext.HasKey || ext.Forwarder.IsZero()) {
		// An identifier without the key the proofs are sealed to, or
		// without the forwarder they go to, cannot be served.
		l.st.notAllowed.Add(1)
		return
	}
	ac, ok := l.allowed[ext.Cloud]
	if !ok {
		l.st.notAllowed.Add(1)
		l.log.Debug("pec: extension names a cloud not on the allowlist", "remote", c.RemoteAddr().String(), "cloud", ext.Cloud.String())
		return
	}
	now := time.Now()
	if !l.perIP.take(httplimit.ClientName(c.RemoteAddr()), now) || !l.total.take(now) {
		l.st.limited.Add(1)
		return
	}
	cert := l.certFor(c, serverName)
	if cert == nil || len(cert.Certificate) == 0 {
		l.st.noChain.Add(1)
		return
	}
	chain, reqs := cert.Certificate, l.requestsFor(ext.Requests, cert)
	var m pecwire.Message = &pecwire.ServerSubmit{Ticket: pecwire.Ticket(ext.Ticket), Submit: pecwire.Submit{
		ClientID: pecwire.ClientID(ext.ClientID), Nonce: pecwire.Nonce(ext.Nonce), Budget: l.cfg.Budget,
		ServerName: serverName, Port: uint16(l.port), Requests: reqs, Chain: chain,
	}}
	if len(ext.EphID) > 0 {
		// A client in privacy mode (privacy.go): the cloud seals the
		// proofs to the client's key and sends them to its forwarder.
		m = &pecwire.ServerSealed{EphID: ext.EphID, Key: ext.Key, Forwarder: ext.Forwarder.String(),
			Submit: pecwire.Submit{Budget: l.cfg.Budget, ServerName: serverName, Port: uint16(l.port), Requests: reqs, Chain: chain}}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.send(ac, m); err != nil {
			l.st.failed.Add(1)
			l.log.Warn("pec: forwarding to the cloud failed", "cloud", ac.Addr.String(), "err", err)
			return
		}
		l.st.forwarded.Add(1)
	}()
}

// certFor returns the certificate the TLS stack presents for serverName, as
// crypto/tls chooses it: GetCertificate, else the only certificate, else
// the first whose leaf is valid for the name, else the first; nil if none.
func (l *Listener) certFor(c net.Conn, serverName string) *tls.Certificate {
	tc := l.cfg.TLSConfig
	if tc.GetCertificate != nil {
		cert, err := tc.GetCertificate(&tls.ClientHelloInfo{ServerName: serverName, Conn: c})
		if err == nil && cert != nil {
			return cert
		}
		if len(tc.Certificates) == 0 {
			return nil
		}
	}
	if len(tc.Certificates) == 1 || serverName == "" {
		return &tc.Certificates[0]
	}
	for i := range tc.Certificates {
		cert := &tc.Certificates[i]
		leaf := cert.Leaf
		if leaf == nil && len(cert.Certificate) > 0 {
			leaf, _ = x509.ParseCertificate(cert.Certificate[0])
		}
		if leaf != nil && leaf.VerifyHostname(serverName) == nil {
			return cert
		}
	}
	return &tc.Certificates[0]
}

// requestsFor returns the client's requests with the ct request carrying
// the SCTs the server delivers beside cert (its TLS extension's and its
// stapled OCSP response's), so that the cloud can fetch their inclusion
// evidence. The client computes the same parameters from the handshake, so
// that the two submissions have one digest; the ticket binds the requests
// without their parameters, which the client could not know when it sent
// its ClientHello.
func (l *Listener) requestsFor(reqs []pkie.Request, cert *tls.Certificate) []pkie.Request {
	if len(cert.SignedCertificateTimestamps) == 0 && len(cert.OCSPStaple) == 0 {
		return reqs
	}
	s := pkie.Subject{SCTs: cert.SignedCertificateTimestamps, OCSPResponse: cert.OCSPStaple}
	leaf := cert.Leaf
	if leaf == nil && len(cert.OCSPStaple) > 0 && len(cert.Certificate) > 0 {
		// The staple's SCTs are those of the leaf's response.
		leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	if leaf != nil {
		s.Certs = []*x509.Certificate{leaf}
	}
	return withCTParams(reqs, &s)
}

// cloudSession is the pooled session with one allowed cloud.
type cloudSession struct {
	conn *pecwire.Conn
	dead atomic.Bool
	used atomic.Int64 // unix nanoseconds of the last submission
}

// Pooled sessions are pinged every poolPing, below any cloud's idle
// timeout (three missed 15 s keepalives by default), so that a forward
// rarely meets a session the cloud has just dropped; one unused for
// poolIdle is closed.
const (
	poolPing = 10 * time.Second
	poolIdle = 5 * time.Minute
)

// send submits m over the pooled session with ac, opening it if needed,
// and once more on a fresh session if the pooled one broke.
func (l *Listener) send(ac AllowedCloud, m pecwire.Message) error {
	var err error
	for range 2 {
		var s *cloudSession
		s, err = l.session(ac)
		if err != nil {
			return err
		}
		s.used.Store(time.Now().UnixNano())
		if err = s.conn.Send(m, time.Now().Add(DefaultCloudDialTimeout)); err == nil {
			return nil
		}
		l.drop(ac.Addr, s)
	}
	return err
}

// sessionMu serialises dialling, so that a burst of connections opens one
// session per cloud.
func (l *Listener) session(ac AllowedCloud) (*cloudSession, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.pools[ac.Addr]; s != nil && !s.dead.Load() {
		return s, nil
	}
	if l.ctx.Err() != nil {
		return nil, net.ErrClosed
	}
	ctx, cancel := context.WithTimeout(l.ctx, DefaultCloudDialTimeout)
	defer cancel()
	tc := pecwire.ClientTLS(ac.Pin)
	if !ac.Pinned {
		tc.VerifyConnection = nil
	}
	var conn *pecwire.Conn
	var err error
	if ac.Addr.Transport == pecwire.QUIC {
		conn, err = pecwire.DialQUIC(ctx, ac.Addr.HostPort, tc, nil)
	} else {
		conn, err = pecwire.DialTCP(ctx, ac.Addr.HostPort, tc)
	}
	if err != nil {
		return nil, err
	}
	s := &cloudSession{conn: conn}
	s.used.Store(time.Now().UnixNano())
	l.pools[ac.Addr] = s
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		l.readCloud(ac.Addr, s)
	}()
	go func() {
		defer l.wg.Done()
		l.pingCloud(ac.Addr, s)
	}()
	return s, nil
}

// pingCloud keeps a pooled session alive while it is in use.
func (l *Listener) pingCloud(a Addr, s *cloudSession) {
	t := time.NewTicker(poolPing)
	defer t.Stop()
	for seq := uint64(1); ; seq++ {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		if s.dead.Load() {
			return
		}
		if time.Since(time.Unix(0, s.used.Load())) > poolIdle {
			l.drop(a, s)
			return
		}
		if err := s.conn.Send(&pecwire.Ping{Seq: seq}, time.Now().Add(DefaultCloudDialTimeout)); err != nil {
			l.drop(a, s)
			return
		}
	}
}

// readCloud reads what the cloud sends the server (refusals; it sends no
// proofs to a submitter that is not the client) until the session ends.
func (l *Listener) readCloud(a Addr, s *cloudSession) {
	defer l.drop(a, s)
	for {
		m, err := s.conn.Recv(time.Time{})
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *pecwire.Reject:
			l.st.rejected.Add(1)
			l.log.Debug("pec: the cloud refused a forwarded chain", "cloud", a.String(), "code", m.Code.String(), "text", m.Text)
		case *pecwire.EphIDReject:
			l.st.rejected.Add(1)
			l.log.Debug("pec: the cloud refused a forwarded chain for a privacy client", "cloud", a.String(), "code", m.Code.String(), "text", m.Text)
		case *pecwire.Error:
			l.log.Info("pec: the cloud ended the session", "cloud", a.String(), "err", m)
			return
		}
	}
}

func (l *Listener) drop(a Addr, s *cloudSession) {
	s.dead.Store(true)
	s.conn.Close()
	l.mu.Lock()
	if l.pools[a] == s {
		delete(l.pools, a)
	}
	l.mu.Unlock()
}

// bucket is a token bucket.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	at     time.Time
}

func newBucket(rate float64, burst int, now time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), at: now}
}

func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate < 0 {
		return false
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// bucketMap is a token bucket per client, holding at most capacity of them: a
// new client beyond that evicts the least recently used one, so the cost
// of an address never seen before is O(1) however many are tracked. An
// evicted client that comes back starts with a full bucket; only someone
// holding more than capacity addresses (or /64s) can cause that, and such a
// client gets a fresh bucket per address anyway, so the global limit
// (Listener.total) is what bounds them.
type bucketMap struct {
	mu        sync.Mutex
	rate      float64
	burst     int
	capacity  int
	m         map[string]*list.Element // of *bucketEntry, most recent first in lru
	lru       list.List
	evictions uint64
}

type bucketEntry struct {
	key string
	b   *bucket
}

// maxTracked bounds the clients a Listener tracks (a few MB at most).
const maxTracked = 1 << 16

func newBucketMap(rate float64, burst, capacity int) *bucketMap {
	return &bucketMap{rate: rate, burst: burst, capacity: capacity, m: make(map[string]*list.Element)}
}

func (bm *bucketMap) take(key string, now time.Time) bool {
	bm.mu.Lock()
	var b *bucket
	if e := bm.m[key]; e != nil {
		bm.lru.MoveToFront(e)
		b = e.Value.(*bucketEntry).b
	} else {
		if bm.lru.Len() >= bm.capacity {
			old := bm.lru.Back()
			bm.lru.Remove(old)
			delete(bm.m, old.Value.(*bucketEntry).key)
			bm.evictions++
		}
		b = newBucket(bm.rate, bm.burst, now)
		bm.m[key] = bm.lru.PushFront(&bucketEntry{key, b})
	}
	bm.mu.Unlock()
	return b.take(now)
}

// size returns how many clients bm tracks and how many it has evicted.
func (bm *bucketMap) size() (tracked int, evictions uint64) {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	return len(bm.m), bm.evictions
}
