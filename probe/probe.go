// Package probe fetches a TLS server's certificate chain the way a notary or
// a scanner sees it: it observes, it does not validate. Every connection goes
// through an address guard so that a service probing on behalf of others
// cannot be pointed at loopback, private or otherwise internal addresses
// (server-side request forgery), and the guard is applied to the address
// actually dialled, so a DNS answer that changes between check and use
// (rebinding) cannot slip past it.
//
// Observing is not trusting: a probe offers every protocol version (TLS
// 1.0 to 1.3) and cipher suite crypto/tls implements, the insecure ones
// included, and verifies nothing, so that it sees every certificate a
// client can be shown. What it cannot see: SSL 3.0 and SSL 2.0 servers,
// export and NULL suites, finite-field DHE, static DH, and ciphers other
// than AES, ChaCha20, 3DES and RC4, which crypto/tls does not implement;
// TLS 1.2 servers that sign their key exchange only with SHA-1, unless
// the process runs with GODEBUG=tlssha1=1; and RSA keys above 8192 bits,
// unless GODEBUG=tlsmaxrsasize allows them.
package probe

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds connect plus handshake, as the Convergence notary
// evaluated in Forced Perspectives (IMC 2014) was configured (2 s).
const DefaultTimeout = 2 * time.Second

// Target is what a client wants to reach.
type Target struct {
	Host       string     // DNS name or IP literal to connect to
	Port       int        // TCP port
	ServerName string     // SNI name; empty means Host (unless Host is an IP)
	IP         netip.Addr // optional pinned address: skips DNS
}

// String returns host:port.
func (t Target) String() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// SNI returns the server name to send.
func (t Target) SNI() string {
	if t.ServerName != "" {
		return t.ServerName
	}
	if _, err := netip.ParseAddr(t.Host); err == nil {
		return ""
	}
	return t.Host
}

// Validate reports whether t names something probeable.
func (t Target) Validate() error {
	if t.Host == "" {
		return errors.New("target has no host")
	}
	if len(t.Host) > 253 {
		return fmt.Errorf("target host is %d bytes long; a DNS name has at most 253", len(t.Host))
	}
	if t.Port < 1 || t.Port > 65535 {
		return fmt.Errorf("target port %d is out of range 1-65535", t.Port)
	}
	return nil
}

// Timings are the phases of one probe.
type Timings struct {
	DNS       time.Duration `json:"dns_ns"`
	Connect   time.Duration `json:"connect_ns"`
	Handshake time.Duration `json:"handshake_ns"`
	Total     time.Duration `json:"total_ns"`
}

// Observation is what one vantage point saw of a target at one time.
type Observation struct {
	Target      Target
	Addr        netip.AddrPort // the address actually dialled
	Chain       [][]byte       // DER certificates as sent, leaf first
	SHA256      [32]byte       // of the leaf DER
	SHA1        [20]byte       // of the leaf DER (Convergence compatibility)
	Version     uint16         // TLS version negotiated
	CipherSuite uint16
	Time        time.Time // when the handshake finished
	Timings     Timings
	Vantage     string
	// SCTs are the signed certificate timestamps the server sent in the
	// TLS signed_certificate_timestamp extension, as received, and
	// OCSPResponse the OCSP response it stapled; nil when none. A probe
	// asks for both (crypto/tls's client always sends the
	// signed_certificate_timestamp and status_request extensions), so a
	// CT check can count the SCTs the Web delivers outside the
	// certificate.
	SCTs         [][]byte
	OCSPResponse []byte
}

// FingerprintSHA1 renders the leaf's SHA-1 the Convergence way:
// uppercase hex pairs joined by colons.
func (o *Observation) FingerprintSHA1() string { return ColonHex(o.SHA1[:]) }

// ColonHex renders b as uppercase hex pairs joined by colons ("AB:CD:…").
func ColonHex(b []byte) string {
	h := strings.ToUpper(hex.EncodeToString(b))
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}

// ParseColonHex parses a colon-separated hex fingerprint of n bytes, in any
// letter case.
func ParseColonHex(s string, n int) ([]byte, error) {
	if len(s) != 3*n-1 {
		return nil, fmt.Errorf("fingerprint %q: want %d colon-separated hex bytes", truncate(s, 80), n)
	}
	out := make([]byte, n)
	for i := 0; i < n; i++ {
		if i > 0 && s[3*i-1] != ':' {
			return nil, fmt.Errorf("fingerprint %q: byte %d is not followed by ':'", truncate(s, 80), i)
		}
		if _, err := hex.Decode(out[i:i+1], []byte(s[3*i:3*i+2])); err != nil {
			return nil, fmt.Errorf("fingerprint %q: %q is not hex", truncate(s, 80), s[3*i:3*i+2])
		}
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Lookup resolves a host to the addresses to try, with ports. Tests and the
// testbed supply their own to map names onto loopback listeners; nil means
// DNS with the target's port.
type Lookup func(ctx context.Context, host string, port int) ([]netip.AddrPort, error)

// Options configure a Prober. The zero value is a safe default.
type Options struct {
	Timeout      time.Duration // connect + handshake; 0 means DefaultTimeout
	AllowPrivate bool          // allow loopback, private and other internal addresses
	Lookup       Lookup        // nil means DNS
	Vantage      string        // label recorded in observations
	MinVersion   uint16        // 0 means TLS 1.0, the oldest Go speaks
	MaxVersion   uint16        // 0 means TLS 1.3
}

// Prober fetches certificate chains. It is safe for concurrent use.
type Prober struct {
	opts Options
}

// New returns a Prober.
func New(opts Options) *Prober {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MinVersion == 0 {
		opts.MinVersion = tls.VersionTLS10
	}
	if opts.MaxVersion == 0 {
		opts.MaxVersion = tls.VersionTLS13
	}
	return &Prober{opts: opts}
}

// CurvePreferences are the key exchanges a probe offers. A probe needs the
// certificate, not a secret channel, so it skips the post-quantum hybrid,
// which costs more CPU than the rest of the handshake; any server that
// speaks TLS 1.2 or 1.3 accepts one of these.
func CurvePreferences() []tls.CurveID {
	return []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}
}

// CipherSuites are the TLS 1.0–1.2 cipher suites a probe offers: every
// suite crypto/tls implements, the insecure ones included (RSA key
// exchange, 3DES, RC4, CBC with SHA-256). A probe observes, it does not
// trust: a server that speaks only an old suite still has a certificate a
// client behind it sees, and a notary that cannot see it answers 503 where
// the original Convergence notary answers. Listing the suites in
// Config.CipherSuites offers them whatever the tlsrsakex and tls3des
// GODEBUG settings say (those change only the defaults), and crypto/tls
// still orders them by its own preference, so a modern server picks a
// modern suite. TLS 1.3 suites are not configurable and always offered.
func CipherSuites() []uint16 {
	var ids []uint16
	for _, c := range tls.CipherSuites() {
		ids = append(ids, c.ID)
	}
	for _, c := range tls.InsecureCipherSuites() {
		ids = append(ids, c.ID)
	}
	return ids
}

// Error kinds a caller may test for with errors.Is.
var (
	ErrForbiddenAddress = errors.New("address is not public")
	ErrResolve          = errors.New("cannot resolve host")
	ErrConnect          = errors.New("cannot connect")
	ErrTimeout          = errors.New("timed out")
	ErrHandshake        = errors.New("TLS handshake failed")
)

// Probe connects to t, completes a TLS handshake without validating the
// certificate and returns what it saw.
func (p *Prober) Probe(ctx context.Context, t Target) (*Observation, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	start := time.Now()
	obs := &Observation{Target: t, Vantage: p.opts.Vantage}

	addrs, err := p.resolve(ctx, t)
	obs.Timings.DNS = time.Since(start)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	var lastErr error
	d := net.Dialer{}
	connStart := time.Now()
	for _, a := range addrs {
		if err := p.allowed(a.Addr()); err != nil {
			lastErr = &AddrError{Addr: a, Err: err}
			continue
		}
		c, err := d.DialContext(ctx, "tcp", a.String())
		if err != nil {
			lastErr = &AddrError{Addr: a, Err: classify(ctx, fmt.Errorf("%w to %s: %w", ErrConnect, a, err))}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		// Check the address of the socket itself as well: it is what the
		// kernel connected to, whatever resolved it.
		if ra, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			rap := ra.AddrPort()
			if err := p.allowed(rap.Addr()); err != nil {
				c.Close()
				lastErr = &AddrError{Addr: rap, Err: err}
				continue
			}
			obs.Addr = netip.AddrPortFrom(rap.Addr().Unmap(), rap.Port())
		}
		conn = c
		break
	}
	obs.Timings.Connect = time.Since(connStart)
	if conn == nil {
		if lastErr == nil {
			lastErr = fmt.Errorf("%w: %s has no addresses", ErrResolve, t.Host)
		}
		return nil, lastErr
	}
	defer conn.Close()

	hsStart := time.Now()
	tc := tls.Client(conn, &tls.Config{
		ServerName:         t.SNI(),
		InsecureSkipVerify: true, // observing, not validating
		// An explicit MinVersion is what lets a Go client offer TLS 1.0
		// and 1.1 at all.
		MinVersion:       p.opts.MinVersion,
		MaxVersion:       p.opts.MaxVersion,
		CipherSuites:     CipherSuites(),
		CurvePreferences: CurvePreferences(),
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, &AddrError{Addr: obs.Addr, Err: classify(ctx, fmt.Errorf("%w with %s: %w", ErrHandshake, obs.Addr, err))}
	}
	now := time.Now()
	obs.Timings.Handshake = now.Sub(hsStart)
	obs.Timings.Total = now.Sub(start)
	obs.Time = now
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return nil, &AddrError{Addr: obs.Addr, Err: fmt.Errorf("%w with %s: server sent no certificate", ErrHandshake, obs.Addr)}
	}
	for _, c := range st.PeerCertificates {
		obs.Chain = append(obs.Chain, c.Raw)
	}
	obs.SHA256 = sha256.Sum256(obs.Chain[0])
	obs.SHA1 = sha1.Sum(obs.Chain[0])
	obs.Version = st.Version
	obs.CipherSuite = st.CipherSuite
	obs.SCTs, obs.OCSPResponse = st.SignedCertificateTimestamps, st.OCSPResponse
	return obs, nil
}

// AddrError is a probe failure at one address: the last one tried, for a
// caller that records where a failed probe went (a scan record, say).
type AddrError struct {
	Addr netip.AddrPort
	Err  error
}

func (e *AddrError) Error() string { return e.Err.Error() }
func (e *AddrError) Unwrap() error { return e.Err }

func (p *Prober) resolve(ctx context.Context, t Target) ([]netip.AddrPort, error) {
	if t.IP.IsValid() {
		return []netip.AddrPort{netip.AddrPortFrom(t.IP.Unmap(), uint16(t.Port))}, nil
	}
	if p.opts.Lookup != nil {
		addrs, err := p.opts.Lookup(ctx, t.Host, t.Port)
		if err != nil {
			return nil, classify(ctx, fmt.Errorf("%w %s: %w", ErrResolve, t.Host, err))
		}
		return addrs, nil
	}
	addrs, err := LookupDNS(ctx, t.Host, t.Port)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("%w %s: %w", ErrResolve, t.Host, err))
	}
	return addrs, nil
}

// LookupDNS is the Lookup a Prober uses when none is given: an IP literal
// is itself, anything else is resolved by the system's resolver. Lookup
// functions that map a few names (tests, offline runs) fall back to it.
func LookupDNS(ctx context.Context, host string, port int) ([]netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	}
	return out, nil
}

func (p *Prober) allowed(a netip.Addr) error {
	if p.opts.AllowPrivate {
		return nil
	}
	if reason := NonPublic(a); reason != "" {
		return &ForbiddenAddressError{Addr: a, Reason: reason}
	}
	return nil
}

// ForbiddenAddressError is the error a Prober returns for an address the
// guard refuses (see NonPublic); errors.Is(err, ErrForbiddenAddress)
// reports it. Its text names the reason but not the address, which a
// service probing on behalf of others should not reveal (it tells a client
// what an internal name resolves to): a caller that may show the address,
// such as a command-line tool or a log, takes it from Addr.
type ForbiddenAddressError struct {
	Addr   netip.Addr // the refused address
	Reason string     // NonPublic's reason, e.g. "Private-Use"
}

func (e *ForbiddenAddressError) Error() string {
	return fmt.Sprintf("%v (%s): refusing to connect", ErrForbiddenAddress, e.Reason)
}

// Is reports whether target is ErrForbiddenAddress.
func (e *ForbiddenAddressError) Is(target error) bool { return target == ErrForbiddenAddress }

// classify turns context deadline errors into ErrTimeout so callers can tell
// "slow" from "refused".
func classify(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}
