package consensus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/probe"
)

// maxAnswerBody bounds a notary's answer: a history of a few thousand
// entries fits easily; a notary cannot make the client buffer more.
const maxAnswerBody = 1 << 20

// DialFunc opens a TCP connection, like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// API names the wire API a client speaks to a notary.
type API string

// APIs. Auto asks a notary host over v1 when its bundle pins a v1 key and
// the client knows the certificate's SHA-256, and over Convergence
// otherwise.
const (
	APIAuto        API = "auto"
	APIConvergence API = "convergence"
	APIV1          API = "v1"
)

// ParseAPI parses "auto", "convergence" or "v1"; "" is auto.
func ParseAPI(s string) (API, error) {
	switch a := API(strings.ToLower(strings.TrimSpace(s))); a {
	case "":
		return APIAuto, nil
	case APIAuto, APIConvergence, APIV1:
		return a, nil
	}
	return "", fmt.Errorf("notary API %q is not auto, convergence or v1", s)
}

// Client queries notaries over the Convergence API or pkie's v1 API. It
// keeps idle connections to each notary host for reuse, so a long-lived
// client pays the TLS handshake once. It is safe for concurrent use.
type Client struct {
	// Dial opens TCP connections; nil means a net.Dialer.
	Dial DialFunc
	// BounceVia, if set, is a notary whose bouncing listener (http_port)
	// relays, by CONNECT, the client's queries to every other notary, so they
	// do not learn the client's address. Queries to BounceVia itself go
	// direct.
	BounceVia *Bundle
	// API chooses the wire API; "" is APIAuto.
	API API
	// AnswerMaxAge bounds the age of a v1 answer's signed_at and
	// observed_at, and of a Convergence answer's newest observation (the
	// latest finish in its signed history: the API signs no time of its
	// own); 0 means DefaultAnswerMaxAge. An older answer stands aside.
	AnswerMaxAge time.Duration
	// Now is the clock answers are aged by; nil means time.Now.
	Now func() time.Time

	mu         sync.Mutex
	transports map[string]*http.Transport // by pinned host identity
}

// Request is what a client asks notaries about: the target as the client
// reached it and the fingerprints of the leaf certificate it saw. At least
// one fingerprint must be set.
type Request struct {
	Host string
	Port int
	// SNI is the server name the client sent, if the user chose one; it is
	// passed to v1 notaries when it differs from Host. The Convergence API
	// cannot carry it.
	SNI    string
	SHA1   *[20]byte
	SHA256 *[32]byte
}

// Query asks notary whether it sees fingerprint (the SHA-1 of the leaf
// certificate's DER) at host:port. It is Ask with only the SHA-1 known.
func (c *Client) Query(ctx context.Context, notary *Bundle, host string, port int, fingerprint [20]byte) Answer {
	return c.Ask(ctx, notary, Request{Host: host, Port: port, SHA1: &fingerprint})
}

// Ask asks notary whether it sees the certificate of r. Replica hosts are
// tried in order until one gives a verified yes or no. Ask never fails:
// every problem is an answer that stands aside, with the reason.
func (c *Client) Ask(ctx context.Context, notary *Bundle, r Request) Answer {
	start := time.Now()
	a := Answer{Notary: notary.Name, Vote: StandAside}
	for i := range notary.Hosts {
		h := &notary.Hosts[i]
		a = c.queryHost(ctx, notary, h, r, a.SigCheck)
		if a.Vote != StandAside || ctx.Err() != nil {
			break
		}
	}
	a.RoundTrip = time.Since(start)
	return a
}

// apiFor picks the API to ask host h about r, or explains why none fits.
func (c *Client) apiFor(h *Host, r Request) (API, string) {
	switch c.API {
	case APIConvergence:
		if r.SHA1 == nil {
			return "", "the Convergence API needs the certificate's SHA-1, which is not known"
		}
		return APIConvergence, ""
	case APIV1:
		if h.v1 == nil {
			return "", "bundle carries no " + V1FieldName + " key: this notary cannot be asked over v1"
		}
		return APIV1, ""
	}
	if h.v1 != nil && (r.SHA256 != nil || r.SHA1 == nil) {
		return APIV1, ""
	}
	if r.SHA1 == nil {
		return "", "bundle carries no " + V1FieldName + " key and the Convergence API needs the certificate's SHA-1, which is not known"
	}
	return APIConvergence, ""
}

func (c *Client) queryHost(ctx context.Context, notary *Bundle, h *Host, r Request, sigSoFar time.Duration) Answer {
	a := Answer{Notary: notary.Name, Host: h.SSLAddr(), Vote: StandAside, SigCheck: sigSoFar}
	if h.cert == nil {
		a.Reason = "bundle host has no parsed certificate (use ParseBundle or NewHost)"
		return a
	}
	api, why := c.apiFor(h, r)
	a.API = api
	if api == "" {
		a.Reason = why
		return a
	}
	bounce := c.bounceRoute(notary, h)
	a.Bounced = bounce != nil
	if api == APIV1 {
		c.askV1(ctx, h, bounce, r, &a)
	} else {
		c.askConvergence(ctx, h, bounce, r, &a)
	}
	return a
}

// post sends one request to a notary host and reads the answer, bounded.
// It returns the body of a 200 or 409; anything else sets a.Reason and
// returns false.
func (c *Client) post(ctx context.Context, h *Host, bounce *route, path, contentType string, body []byte, a *Answer) ([]byte, bool) {
	u := "https://" + h.SSLAddr() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		a.Reason = fmt.Sprintf("cannot build request: %v", err)
		return nil, false
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.transport(h, bounce).RoundTrip(req)
	if err != nil {
		// A notary that answered with another certificate was reached:
		// its bundle is stale or someone sits between client and notary,
		// which "unreachable" would hide.
		var pm *pinMismatchError
		if errors.As(err, &pm) {
			a.Reason, a.PinMismatch = "pin mismatch: "+pm.Error(), true
			return nil, false
		}
		a.Reason = "unreachable: " + describe(ctx, err)
		return nil, false
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody+1))
	if err == nil && ctx.Err() != nil {
		// An answer cut short by the deadline would otherwise look like a
		// malformed one.
		err = ctx.Err()
	}
	if err != nil {
		a.Reason = "unreachable: reading answer: " + describe(ctx, err)
		return nil, false
	}
	if len(out) > maxAnswerBody {
		a.Reason = fmt.Sprintf("invalid answer: body exceeds %d bytes", maxAnswerBody)
		return nil, false
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusConflict:
		return out, true
	case http.StatusServiceUnavailable:
		a.Reason = "notary could not reach the target or is overloaded (503)"
	case http.StatusBadRequest:
		a.Reason = "notary rejected the request (400)"
	case http.StatusForbidden:
		a.Reason = "notary refused the request (403)"
	default:
		a.Reason = fmt.Sprintf("unexpected status %d", resp.StatusCode)
	}
	if msg := notaryError(out); msg != "" {
		a.Reason += ": the notary says " + strconv.Quote(msg)
	}
	return nil, false
}

// maxNotaryError bounds how much of a notary's error text a verdict
// repeats.
const maxNotaryError = 200

// notaryError extracts a notary's own explanation from an error body: the
// "error" field of pkie's JSON errors, or else the text of the body with
// markup removed (the original notary answers "<html><body>Error
// retrieving records.</body></html>"). The body is untrusted: only
// printable characters are kept, and at most maxNotaryError of them.
func notaryError(body []byte) string {
	var j struct {
		Error string `json:"error"`
	}
	text := string(body)
	if json.Unmarshal(body, &j) == nil && j.Error != "" {
		text = j.Error
	} else {
		var b strings.Builder
		inTag := false
		for _, r := range text {
			switch {
			case r == '<':
				inTag = true
			case r == '>':
				inTag = false
				b.WriteByte(' ')
			case !inTag:
				b.WriteRune(r)
			}
		}
		text = b.String()
	}
	var b strings.Builder
	space := false
	for _, r := range text {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		n := utf8.RuneLen(r)
		if space {
			n++
		}
		if b.Len()+n > maxNotaryError {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *Client) askConvergence(ctx context.Context, h *Host, bounce *route, r Request, a *Answer) {
	fp := *r.SHA1
	form := url.Values{"fingerprint": {probe.ColonHex(fp[:])}}.Encode()
	path := "/target/" + url.PathEscape(r.Host) + "+" + strconv.Itoa(r.Port)
	body, ok := c.post(ctx, h, bounce, path, "application/x-www-form-urlencoded", []byte(form), a)
	if !ok {
		return
	}
	sigStart := time.Now()
	entries, err := VerifyResponse(body, h.PublicKey())
	a.SigCheck += time.Since(sigStart)
	if err != nil {
		a.Reason = "invalid answer: " + err.Error()
		return
	}
	a.History = entries
	mine, latest := currentEntry(entries, fp)
	if latest != nil {
		// Aged as a v1 answer's observed_at is: the newest finish is when
		// the notary last looked at the target. Without this bound a
		// signed answer, however old, votes forever, since the
		// Convergence API signs no time of its own.
		if err := c.checkAge("the notary's newest observation", latest.Finish); err != nil {
			a.Reason = "invalid answer: " + err.Error()
			return
		}
	}
	if a.Status == http.StatusConflict {
		a.Vote = No
		a.Reason = "notary sees a different certificate (409)"
		if latest != nil {
			a.Reason = fmt.Sprintf("notary sees a different certificate (409): %s, last seen %s", probe.ColonHex(latest.Fingerprint[:]), latest.Finish.Format(time.RFC3339))
		}
		return
	}
	if mine == nil {
		// A notary vouches for every certificate it has seen at the
		// target within its freshness window (several when a site serves
		// several at once), and answers 200 for each: the client counts
		// one its signed history shows seen within the age it accepts of a
		// v1 observation, and no older one.
		if old := lastEntry(entries, fp); old != nil && c.fresh(old.Finish) {
			mine = old
		}
	}
	if mine == nil {
		if old := lastEntry(entries, fp); old != nil {
			// The status is not signed; the history is, and it says the
			// notary has since seen another certificate.
			a.Vote = No
			a.Reason = fmt.Sprintf("notary's signed history shows a different current certificate: %s, last seen %s; the client's was last seen %s", probe.ColonHex(latest.Fingerprint[:]), latest.Finish.Format(time.RFC3339), old.Finish.Format(time.RFC3339))
			return
		}
		a.Reason = "invalid answer: 200 whose signed history does not list the fingerprint"
		return
	}
	a.Vote = Yes
	a.Observed = mine.Observed()
	a.Reason = fmt.Sprintf("notary sees the same certificate (200), observed from %s to %s", mine.Start.Format(time.RFC3339), mine.Finish.Format(time.RFC3339))
}

// currentEntry returns fp's entry among a Convergence history's current
// observations, and the newest entry. The current observations are those
// whose finish is the newest in the history (several when the notary saw
// more than one certificate in its last second, as behind a balancer
// serving two): what the original Convergence notary meant by the
// certificate it sees now. An entry that an observation of another
// certificate has superseded is history, not a vouching: counting it would
// let a certificate the notary saw once, however long ago, pass today.
func currentEntry(entries []Entry, fp [20]byte) (mine, latest *Entry) {
	for i := range entries {
		if latest == nil || entries[i].Finish.After(latest.Finish) {
			latest = &entries[i]
		}
	}
	for i := range entries {
		if entries[i].Fingerprint == fp && entries[i].Finish.Equal(latest.Finish) {
			return &entries[i], latest
		}
	}
	return nil, latest
}

// fresh reports whether a notary's observation finished at t is no older
// than the client's AnswerMaxAge.
func (c *Client) fresh(t time.Time) bool { return c.now().Sub(t) <= c.maxAge() }

// checkAge refuses a signed time older than the client's AnswerMaxAge or
// more than MaxClockSkew ahead of its clock, as VerifyV1 does.
func (c *Client) checkAge(what string, t time.Time) error {
	age, maxAge := c.now().Sub(t), c.maxAge()
	if age > maxAge {
		return fmt.Errorf("stale answer: %s, %s, is %s old (max %s)", what, t.UTC().Format(time.RFC3339), age.Round(time.Second), maxAge)
	}
	if age < -MaxClockSkew {
		return fmt.Errorf("answer from the future: %s, %s, is %s ahead of this clock (max skew %s)", what, t.UTC().Format(time.RFC3339), (-age).Round(time.Second), MaxClockSkew)
	}
	return nil
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) maxAge() time.Duration {
	if c.AnswerMaxAge > 0 {
		return c.AnswerMaxAge
	}
	return DefaultAnswerMaxAge
}

// lastEntry returns fp's most recently finished entry, if any.
func lastEntry(entries []Entry, fp [20]byte) *Entry {
	var last *Entry
	for i := range entries {
		if entries[i].Fingerprint == fp && (last == nil || entries[i].Finish.After(last.Finish)) {
			last = &entries[i]
		}
	}
	return last
}

func (c *Client) askV1(ctx context.Context, h *Host, bounce *route, r Request, a *Answer) {
	q := V1Question{Host: strings.ToLower(r.Host), Port: r.Port, SHA256: r.SHA256}
	if sni := strings.ToLower(r.SNI); sni != "" && sni != q.Host {
		q.SNI = sni
	}
	wire := struct {
		Host   string `json:"host"`
		Port   int    `json:"port"`
		SNI    string `json:"sni,omitempty"`
		SHA256 string `json:"sha256,omitempty"`
	}{Host: q.Host, Port: q.Port, SNI: q.SNI}
	if q.SHA256 != nil {
		wire.SHA256 = hex.EncodeToString(q.SHA256[:])
	}
	reqBody, err := json.Marshal(wire)
	if err != nil {
		a.Reason = fmt.Sprintf("cannot build request: %v", err)
		return
	}
	body, ok := c.post(ctx, h, bounce, "/v1/check", "application/json", reqBody, a)
	if !ok {
		return
	}
	if a.Status != http.StatusOK {
		a.Reason = fmt.Sprintf("unexpected status %d from the v1 API", a.Status)
		return
	}
	sigStart := time.Now()
	ans, err := VerifyV1(body, h.v1, q, c.now(), c.maxAge())
	a.SigCheck += time.Since(sigStart)
	if err != nil {
		a.Reason = "invalid v1 answer: " + err.Error()
		return
	}
	a.History, a.ObservedAt = v1Entries(ans), ans.ObservedAt.UTC()
	var match bool
	var mine notarywire.Record
	if q.SHA256 != nil {
		match = *ans.Match
		mine, _ = ans.Find(wire.SHA256)
	} else {
		// Only the SHA-1 is known: compare it with the SHA-1 the notary
		// signed for its current certificate.
		cur, _ := ans.Find(ans.Current)
		match = cur.SHA1 == hex.EncodeToString(r.SHA1[:])
		mine = cur
	}
	if !match {
		a.Vote = No
		a.Reason = fmt.Sprintf("notary sees a different certificate (v1): sha256 %s, last seen %s", ans.Current, ans.ObservedAt.UTC().Format(time.RFC3339))
		return
	}
	a.Vote = Yes
	a.Observed = mine.LastSeen.Sub(mine.FirstSeen)
	a.Reason = fmt.Sprintf("notary sees the same certificate (v1), observed from %s to %s, signed %s", mine.FirstSeen.UTC().Format(time.RFC3339), mine.LastSeen.UTC().Format(time.RFC3339), ans.SignedAt.UTC().Format(time.RFC3339))
}

// route is how a query reaches a notary host through a bouncer: the relay,
// and the notary's other replicas the relay may reach instead.
type route struct {
	relay *Host
	// peers are the "host+port" of the notary's other replicas that pin
	// the same certificate as the host asked, named to the relay in
	// X-Convergence-Notary headers as Convergence clients do. Only those:
	// the pin and the answer's signature are checked against the host
	// asked, and replicas with other certificates are asked in their turn.
	peers []string
}

// bounceRoute returns the route to notary's host h through the bounce
// notary, or nil to go direct.
func (c *Client) bounceRoute(notary *Bundle, h *Host) *route {
	relay := c.bounceHost(notary)
	if relay == nil {
		return nil
	}
	r := &route{relay: relay}
	for i := range notary.Hosts {
		p := &notary.Hosts[i]
		if p != h && p.SSLAddr() != h.SSLAddr() && p.cert != nil && h.cert != nil && bytes.Equal(p.cert.Raw, h.cert.Raw) {
			r.peers = append(r.peers, p.Host+"+"+strconv.Itoa(p.SSLPort))
		}
	}
	return r
}

// bounceHost returns the relay to reach notary through, or nil to go direct.
func (c *Client) bounceHost(notary *Bundle) *Host {
	b := c.BounceVia
	if b == nil || sameNotary(b, notary) {
		return nil
	}
	for i := range b.Hosts {
		if b.Hosts[i].HTTPPort != 0 {
			return &b.Hosts[i]
		}
	}
	return nil
}

func sameNotary(a, b *Bundle) bool {
	if a == b {
		return true
	}
	for _, x := range a.Hosts {
		for _, y := range b.Hosts {
			if x.cert != nil && y.cert != nil && bytes.Equal(x.cert.Raw, y.cert.Raw) {
				return true
			}
		}
	}
	return false
}

// transport returns the reusable transport for a pinned host (through a
// relay or not).
func (c *Client) transport(h *Host, bounce *route) *http.Transport {
	key := h.SSLAddr() + "|" + string(h.cert.Raw)
	if bounce != nil {
		key += "|via " + bounce.relay.HTTPAddr() + "|" + strings.Join(bounce.peers, ",")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.transports[key]; ok {
		return t
	}
	if c.transports == nil {
		c.transports = map[string]*http.Transport{}
	}
	pin := h.cert.Raw
	serverName := h.Host
	if ip := net.ParseIP(serverName); ip != nil {
		serverName = ""
	}
	t := &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var raw net.Conn
			var err error
			if bounce != nil {
				raw, err = c.connect(ctx, bounce.relay.HTTPAddr(), addr, bounce.peers)
			} else {
				raw, err = c.dial(ctx, "tcp", addr)
			}
			if err != nil {
				return nil, err
			}
			tc := tls.Client(raw, &tls.Config{
				ServerName: serverName,
				// The bundle certificate is the only trust anchor for a
				// notary: no CA validation, an exact pin instead.
				InsecureSkipVerify: true,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 {
						return &pinMismatchError{want: pin}
					}
					if got := cs.PeerCertificates[0].Raw; !bytes.Equal(got, pin) {
						return &pinMismatchError{got: got, want: pin}
					}
					return nil
				},
				MinVersion: tls.VersionTLS12,
			})
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return tc, nil
		},
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	c.transports[key] = t
	return t
}

// pinMismatchError is a notary host whose TLS certificate is not the one
// its bundle pins.
type pinMismatchError struct{ got, want []byte }

func (e *pinMismatchError) Error() string {
	want := sha256.Sum256(e.want)
	if e.got == nil {
		return fmt.Sprintf("the notary presented no certificate; its bundle pins sha256 %x…", want[:8])
	}
	got := sha256.Sum256(e.got)
	return fmt.Sprintf("the notary's TLS certificate (sha256 %x…) is not the one its bundle pins (sha256 %x…): a stale bundle, or someone between this client and the notary", got[:8], want[:8])
}

func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.Dial != nil {
		return c.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// connect opens a tunnel to target through a notary's bouncing listener,
// asking it, as Convergence clients do, to reach one of peers instead
// ("host+port", in X-Convergence-Notary headers) if target does not answer.
func (c *Client) connect(ctx context.Context, relay, target string, peers []string) (net.Conn, error) {
	conn, err := c.dial(ctx, "tcp", relay)
	if err != nil {
		return nil, fmt.Errorf("bounce relay %s: %w", relay, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	var req strings.Builder
	fmt.Fprintf(&req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	for _, p := range peers {
		fmt.Fprintf(&req, "X-Convergence-Notary: %s\r\n", p)
	}
	req.WriteString("\r\n")
	io.WriteString(conn, req.String())
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("bounce relay %s: %w", relay, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("bounce relay %s refused CONNECT %s: %s", relay, target, resp.Status)
	}
	if br.Buffered() != 0 {
		// The TLS client speaks first; a relay that sends bytes before it
		// is not relaying faithfully.
		conn.Close()
		return nil, fmt.Errorf("bounce relay %s sent data before the tunnel was used", relay)
	}
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// CloseIdleConnections closes every idle notary connection.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

func describe(ctx context.Context, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out: " + err.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out: " + err.Error()
	}
	return err.Error()
}
