package obcbench

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkie/pkie/obc"
)

// TerminatorName is the name in the terminator's certificate.
const TerminatorName = "terminator.obc.test"

// TerminatorOptions configure a TLS terminator.
type TerminatorOptions struct {
	// Backend is the plain-HTTP backend's host:port.
	Backend string
	// ClientAuth asks every client for a certificate, accepting any
	// (self-signed) one whose possession the handshake proves: a TLS-OBC
	// server. Without it the terminator sends no CertificateRequest.
	ClientAuth bool
}

// Terminator is a TLS-terminating reverse proxy (the paper's §6.2): it
// ends TLS, passes the channel's client identity to the backend in the
// Pkie-Obc-Identity header and relays the request over plain HTTP. For each
// request it records the latency it added: the time from accepting the
// connection (the request's first byte on a reused connection) to the
// response's last byte, minus the backend's time from the request's
// forwarding to its response headers, and minus the time it spent waiting
// for the client's bytes during the handshake and the request.
type Terminator struct {
	// Addr is the listening address; Cert the certificate it serves
	// (self-signed, for TerminatorName).
	Addr string
	Cert *x509.Certificate

	ln    net.Listener
	srv   *http.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	overhead []float32 // ms, without waits for the client
	wall     []float32 // ms, with them
	keys     map[string]int
	resumed  int
	fresh    int
	failed   int
}

// StartTerminator listens on a loopback port.
func StartTerminator(opts TerminatorOptions) (*Terminator, error) {
	backend, err := url.Parse("http://" + opts.Backend)
	if err != nil || opts.Backend == "" {
		return nil, fmt.Errorf("obcbench: terminator backend %q: not host:port", opts.Backend)
	}
	cert, err := terminatorCert()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if opts.ClientAuth {
		cfg = obcServerConfig(cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("obcbench: terminator: %w", err)
	}
	t := &Terminator{Addr: ln.Addr().String(), Cert: cert.Leaf, ln: ln, keys: map[string]int{}}
	t.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backend)
			pr.Out.Header.Del("Pkie-Obc-Identity")
			if id, ok := identity(pr.In.TLS); ok {
				pr.Out.Header.Set("Pkie-Obc-Identity", id)
			}
		},
		Transport: backendTimer{&http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.mu.Lock()
			t.failed++
			t.mu.Unlock()
			http.Error(w, "backend unavailable", http.StatusBadGateway)
		},
	}
	t.srv = &http.Server{
		Handler:           t,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ci := &connInfo{accepted: time.Now()}
			if tc, ok := c.(*tls.Conn); ok {
				if a, ok := tc.NetConn().(*acceptedConn); ok {
					ci.accepted, ci.conn = a.at, a
				}
			}
			return context.WithValue(ctx, connKey{}, ci)
		},
		ErrorLog: nullLogger(),
	}
	go t.srv.Serve(tls.NewListener(acceptTimer{ln}, cfg))
	return t, nil
}

// obcServerConfig asks for any client certificate and accepts a
// self-signed one; crypto/tls still checks the CertificateVerify
// signature, which proves the client holds the key.
func obcServerConfig(base *tls.Config) *tls.Config {
	c := base.Clone()
	c.ClientAuth = tls.RequireAnyClientCert
	return c
}

type connKey struct{}

// connInfo is one connection's state; a connection's requests are served
// one at a time (HTTP/1.1), so it needs no lock.
type connInfo struct {
	accepted time.Time
	conn     *acceptedConn
	used     bool
}

type backendKey struct{}

// backendTimer records in the request's context how long the backend took
// to answer with its headers: its processing time.
type backendTimer struct{ base http.RoundTripper }

func (b backendTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := b.base.RoundTrip(r)
	if d, ok := r.Context().Value(backendKey{}).(*time.Duration); ok {
		*d = time.Since(t0)
	}
	return resp, err
}

func (t *Terminator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var clientWait time.Duration
	if ci, ok := r.Context().Value(connKey{}).(*connInfo); ok && !ci.used {
		// The connection's first request: its latency includes the
		// TLS handshake, where client certificates cost, but not the
		// time spent waiting for the client (its key exchange, its
		// CertificateVerify signature, its request).
		ci.used = true
		start = ci.accepted
		if ci.conn != nil {
			clientWait = ci.conn.stopTiming()
		}
	}
	var backend time.Duration
	r = r.WithContext(context.WithValue(r.Context(), backendKey{}, &backend))
	t.proxy.ServeHTTP(w, r)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	wall := time.Since(start) - backend
	over := wall - clientWait
	label := KeyLabel(r.TLS)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.overhead = append(t.overhead, float32(ms(over)))
	t.wall = append(t.wall, float32(ms(wall)))
	t.keys[label]++
	if r.TLS != nil && r.TLS.DidResume {
		t.resumed++
	} else {
		t.fresh++
	}
}

// identity is the hex channel identity of the client's certificate.
func identity(cs *tls.ConnectionState) (string, bool) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", false
	}
	id := obc.IdentityOf(cs.PeerCertificates[0])
	return hex.EncodeToString(id[:]), true
}

// KeyLabel names the client key algorithm of a connection as Algs does
// ("ecdsa-p256", "rsa-2048", …), or "none" without a client certificate.
func KeyLabel(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "none"
	}
	switch k := cs.PeerCertificates[0].PublicKey.(type) {
	case *ecdsa.PublicKey:
		return "ecdsa-" + strings.ToLower(strings.ReplaceAll(k.Curve.Params().Name, "-", ""))
	case ed25519.PublicKey:
		return "ed25519"
	case *rsa.PublicKey:
		return fmt.Sprintf("rsa-%d", k.N.BitLen())
	}
	return "other"
}

// TerminatorStats are a terminator's records since its last reset.
type TerminatorStats struct {
	// OverheadMs is the latency the terminator added to each request:
	// from accepting the connection to the response's last byte, less
	// the backend's time and the time spent waiting for the client.
	// WallMs is the same without subtracting the waits for the client.
	OverheadMs []float32 `json:"overhead_ms"`
	WallMs     []float32 `json:"wall_ms"`
	// Keys counts requests by client key algorithm (KeyLabel).
	Keys    map[string]int `json:"keys"`
	Resumed int            `json:"resumed"`
	Fresh   int            `json:"fresh"`
	Failed  int            `json:"failed"`
}

// Reset clears the records (at the end of a warm-up).
func (t *Terminator) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.overhead, t.wall, t.keys, t.resumed, t.fresh, t.failed = nil, nil, map[string]int{}, 0, 0, 0
}

// Stats returns the records since the last reset.
func (t *Terminator) Stats() TerminatorStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make(map[string]int, len(t.keys))
	for k, v := range t.keys {
		keys[k] = v
	}
	return TerminatorStats{OverheadMs: append([]float32(nil), t.overhead...), WallMs: append([]float32(nil), t.wall...), Keys: keys, Resumed: t.resumed, Fresh: t.fresh, Failed: t.failed}
}

// Close stops the terminator.
func (t *Terminator) Close() error {
	return t.srv.Close()
}

// acceptTimer stamps each connection with the time it was accepted.
type acceptTimer struct{ net.Listener }

// acceptedConn adds up the time the terminator spends blocked reading
// from the client until its first request is handled: that time is the
// client's (its computation, the network), not the terminator's. Timing
// stops at the handler because net/http then keeps a background Read
// pending for the whole request.
type acceptedConn struct {
	net.Conn
	at      time.Time
	stopped atomic.Bool
	wait    atomic.Int64 // ns
}

func (a acceptTimer) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &acceptedConn{Conn: c, at: time.Now()}, nil
}

func (c *acceptedConn) Read(b []byte) (int, error) {
	if c.stopped.Load() {
		return c.Conn.Read(b)
	}
	t0 := time.Now()
	n, err := c.Conn.Read(b)
	c.wait.Add(int64(time.Since(t0)))
	return n, err
}

// stopTiming ends the accounting and returns the time spent waiting.
func (c *acceptedConn) stopTiming() time.Duration {
	c.stopped.Store(true)
	return time.Duration(c.wait.Load())
}

func terminatorCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: TerminatorName},
		DNSNames:              []string{TerminatorName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("obcbench: terminator certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Usage is a process's resource use at one moment.
type Usage struct {
	// CPUSeconds is the process's user and system CPU time so far.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set (VmRSS); HeapBytes the Go heap's live
	// and not yet swept objects; GoBytes all memory the Go runtime has
	// mapped.
	RSSBytes  uint64    `json:"rss_bytes"`
	HeapBytes uint64    `json:"heap_bytes"`
	GoBytes   uint64    `json:"go_bytes"`
	At        time.Time `json:"at"`
}

// SelfUsage measures this process.
func SelfUsage() Usage {
	u := Usage{At: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.CPUSeconds = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		u.HeapBytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		u.GoBytes = s[1].Value.Uint64()
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				var kb uint64
				fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
				u.RSSBytes = kb << 10
			}
		}
	}
	return u
}

// ChildReady is the first line a terminator child writes.
type ChildReady struct {
	Addr    string `json:"addr"`
	CertDER []byte `json:"cert_der"`
}

// ServeChild runs a terminator as a child process of a benchmark (pkie
// bench obc --terminator-only): it writes a ChildReady line to out, then
// answers each line of in: "usage" with a Usage line, "reset" with "{}",
// "stats" with a TerminatorStats line. It returns when in ends or says
// "quit".
func ServeChild(ctx context.Context, opts TerminatorOptions, in io.Reader, out io.Writer) error {
	t, err := StartTerminator(opts)
	if err != nil {
		return err
	}
	defer t.Close()
	enc := json.NewEncoder(out)
	if err := enc.Encode(ChildReady{Addr: t.Addr, CertDER: t.Cert.Raw}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var v any
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "usage":
			v = SelfUsage()
		case "reset":
			t.Reset()
			v = struct{}{}
		case "stats":
			v = t.Stats()
		case "quit":
			return nil
		default:
			return fmt.Errorf("obcbench: terminator child: unknown command %q", cmd)
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// nullLogger silences http.Server's per-connection error lines (a load
// generator's closed connections would flood stderr).
func nullLogger() *log.Logger { return log.New(io.Discard, "", 0) }
