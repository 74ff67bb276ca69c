package consensus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/pkie/pkie/probe"
)

// maxAnswerBody bounds a notary's answer: a history of a few thousand
// entries fits easily; a notary cannot make the client buffer more.
const maxAnswerBody = 1 << 20

// DialFunc opens a TCP connection, like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Client queries Convergence notaries. It keeps idle connections to each
// notary host for reuse, so a long-lived client pays the TLS handshake once.
// It is safe for concurrent use.
type Client struct {
	// Dial opens TCP connections; nil means a net.Dialer.
	Dial DialFunc
	// BounceVia, if set, is a notary whose bouncing listener (http_port)
	// relays, by CONNECT, the client's queries to every other notary, so they
	// do not learn the client's address. Queries to BounceVia itself go
	// direct.
	BounceVia *Bundle

	mu         sync.Mutex
	transports map[string]*http.Transport // by pinned host identity
}

// Query asks notary whether it sees fingerprint (the SHA-1 of the leaf
// certificate's DER) at host:port. Replica hosts are tried in order until
// one gives a verified yes or no. Query never fails: every problem is an
// answer that stands aside, with the reason.
func (c *Client) Query(ctx context.Context, notary *Bundle, host string, port int, fingerprint [20]byte) Answer {
	start := time.Now()
	a := Answer{Notary: notary.Name, Vote: StandAside}
	for i := range notary.Hosts {
		h := &notary.Hosts[i]
		a = c.queryHost(ctx, notary, h, host, port, fingerprint, a.SigCheck)
		if a.Vote != StandAside || ctx.Err() != nil {
			break
		}
	}
	a.RoundTrip = time.Since(start)
	return a
}

func (c *Client) queryHost(ctx context.Context, notary *Bundle, h *Host, host string, port int, fp [20]byte, sigSoFar time.Duration) Answer {
	a := Answer{Notary: notary.Name, Host: h.SSLAddr(), Vote: StandAside, SigCheck: sigSoFar}
	if h.cert == nil {
		a.Reason = "bundle host has no parsed certificate (use ParseBundle or NewHost)"
		return a
	}
	bounce := c.bounceHost(notary)
	a.Bounced = bounce != nil
	form := url.Values{"fingerprint": {probe.ColonHex(fp[:])}}.Encode()
	u := "https://" + h.SSLAddr() + "/target/" + url.PathEscape(host) + "+" + strconv.Itoa(port)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewBufferString(form))
	if err != nil {
		a.Reason = fmt.Sprintf("cannot build request: %v", err)
		return a
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.transport(h, bounce).RoundTrip(req)
	if err != nil {
		a.Reason = "unreachable: " + describe(ctx, err)
		return a
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody+1))
	if err == nil && ctx.Err() != nil {
		// An answer cut short by the deadline would otherwise look like a
		// malformed one.
		err = ctx.Err()
	}
	if err != nil {
		a.Reason = "unreachable: reading answer: " + describe(ctx, err)
		return a
	}
	if len(body) > maxAnswerBody {
		a.Reason = fmt.Sprintf("invalid answer: body exceeds %d bytes", maxAnswerBody)
		return a
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusConflict:
	case http.StatusServiceUnavailable:
		a.Reason = "notary could not reach the target or is overloaded (503)"
		return a
	case http.StatusBadRequest:
		a.Reason = "notary rejected the request (400): " + string(firstLine(body))
		return a
	default:
		a.Reason = fmt.Sprintf("unexpected status %d", resp.StatusCode)
		return a
	}
	sigStart := time.Now()
	entries, err := VerifyResponse(body, h.PublicKey())
	a.SigCheck += time.Since(sigStart)
	if err != nil {
		a.Reason = "invalid answer: " + err.Error()
		return a
	}
	a.History = entries
	var mine *Entry
	for i := range entries {
		if entries[i].Fingerprint == fp {
			mine = &entries[i]
		}
	}
	if resp.StatusCode == http.StatusConflict {
		a.Vote = No
		a.Reason = "notary sees a different certificate (409)"
		if len(entries) > 0 {
			last := entries[len(entries)-1]
			a.Reason = fmt.Sprintf("notary sees a different certificate (409): %s, last seen %s", probe.ColonHex(last.Fingerprint[:]), last.Finish.Format(time.RFC3339))
		}
		return a
	}
	if mine == nil {
		a.Reason = "invalid answer: 200 whose signed history does not list the fingerprint"
		return a
	}
	a.Vote = Yes
	a.Observed = mine.Observed()
	a.Reason = fmt.Sprintf("notary sees the same certificate (200), observed from %s to %s", mine.Start.Format(time.RFC3339), mine.Finish.Format(time.RFC3339))
	return a
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
func (c *Client) transport(h *Host, bounce *Host) *http.Transport {
	key := h.SSLAddr() + "|" + string(h.cert.Raw)
	if bounce != nil {
		key += "|via " + bounce.HTTPAddr()
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
				raw, err = c.connect(ctx, bounce.HTTPAddr(), addr)
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
					if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, pin) {
						return errors.New("notary certificate does not match its bundle (pin mismatch)")
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

func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.Dial != nil {
		return c.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// connect opens a tunnel to target through a notary's bouncing listener.
func (c *Client) connect(ctx context.Context, relay, target string) (net.Conn, error) {
	conn, err := c.dial(ctx, "tcp", relay)
	if err != nil {
		return nil, fmt.Errorf("bounce relay %s: %w", relay, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
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

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return bytes.TrimSpace(b)
}
