package obc

import (
	"container/list"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// ClientConfig returns a TLS client configuration for a connection to o
// that presents the store's certificate for o's scope when the server
// asks for one (making it on first use). ServerName is o.Host; set
// RootCAs and the rest on the result, which is the caller's. Use it for
// protocols other than HTTP; Transport does the same for HTTP.
//
// A session resumed from a ticket carries the identity of the connection
// that made the ticket, so a ClientSessionCache set on the result must
// serve o alone: sharing one across origins would let a resumed
// session show one origin's identity to another.
func (s *Store) ClientConfig(o Origin) *tls.Config {
	return s.clientConfig(nil, o)
}

func (s *Store) clientConfig(base *tls.Config, o Origin) *tls.Config {
	var cfg *tls.Config
	if base != nil {
		cfg = base.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = o.Host
	}
	// GetClientCertificate wins over Certificates, but clear them so that
	// nothing else of the base is ever presented.
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		r, err := s.Get(cri.Context(), o)
		if err != nil {
			return nil, err
		}
		return r.Cert, nil
	}
	return cfg
}

// Transport returns an http.RoundTripper that presents st's certificate
// for each request's origin and never lets two origins share a
// connection: each origin gets its own *http.Transport, cloned from base
// (nil means http.DefaultTransport's settings), with its own TLS session
// cache. The paper (Origin-Bound Certificates, USENIX Security 2012, §7.3)
// warns that a browser's connection pool, keyed by host alone, would send
// one origin's requests over a channel authenticated to another; HTTP/2
// connection coalescing (RFC 9113 §9.1.1) would do the same for origins
// sharing a server certificate and address. Separate transports make both
// impossible, at the cost of one idle pool per origin.
//
// It keeps the transports of the MaxOriginTransports origins used most
// recently; the one used least recently is dropped past that, its idle
// connections closed (requests in flight on it finish), so that a client
// visiting origins without end holds a bounded number of pools.
//
// Plain http:// requests carry no client certificate and go through one
// shared clone of base. base's DialTLSContext must be nil (it would bypass
// the TLS configuration); RoundTrip fails otherwise.
func Transport(base *http.Transport, st *Store) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	return &transport{base: base.Clone(), st: st, byOrigin: map[Origin]*list.Element{}, lru: list.New()}
}

// MaxOriginTransports bounds the per-origin transports Transport keeps.
const MaxOriginTransports = 1024

type originTransport struct {
	o  Origin
	tr *http.Transport
}

type transport struct {
	base *http.Transport
	st   *Store

	mu       sync.Mutex
	plain    *http.Transport
	byOrigin map[Origin]*list.Element // of *originTransport, in lru
	lru      *list.List               // most recently used first
	max      int                      // 0: MaxOriginTransports
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return nil, errors.New("obc: request has no URL")
	}
	if req.URL.Scheme == "http" {
		t.mu.Lock()
		if t.plain == nil {
			t.plain = t.base.Clone()
		}
		tr := t.plain
		t.mu.Unlock()
		return tr.RoundTrip(req)
	}
	if t.base.DialTLSContext != nil || t.base.DialTLS != nil { //nolint:staticcheck // DialTLS bypasses TLSClientConfig too
		return nil, errors.New("obc: the base transport sets DialTLSContext, which would bypass the origin-bound certificate")
	}
	o, err := OriginOf(req.URL)
	if err != nil {
		return nil, err
	}
	return t.forOrigin(o).RoundTrip(req)
}

// forOrigin returns o's transport, making it on first use.
func (t *transport) forOrigin(o Origin) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byOrigin[o]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*originTransport).tr
	}
	limit := t.max
	if limit <= 0 {
		limit = MaxOriginTransports
	}
	for t.lru.Len() >= limit {
		e := t.lru.Back()
		ot := t.lru.Remove(e).(*originTransport)
		delete(t.byOrigin, ot.o)
		ot.tr.CloseIdleConnections()
	}
	tr := t.base.Clone()
	tr.TLSClientConfig = t.st.clientConfig(t.base.TLSClientConfig, o)
	if tr.TLSClientConfig.ServerName == o.Host {
		// http.Transport sets ServerName from the request itself, which
		// is o.Host; leaving it empty keeps its handling of IP hosts.
		tr.TLSClientConfig.ServerName = ""
	}
	if t.base.TLSClientConfig != nil && t.base.TLSClientConfig.ClientSessionCache != nil {
		// Tickets resume the identity they were made with: one cache per
		// origin, never shared.
		tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	t.byOrigin[o] = t.lru.PushFront(&originTransport{o: o, tr: tr})
	return tr
}

// CloseIdleConnections closes every origin's idle connections.
func (t *transport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := t.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*originTransport).tr.CloseIdleConnections()
	}
	if t.plain != nil {
		t.plain.CloseIdleConnections()
	}
}

// String describes the transport, for logs.
func (t *transport) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("obc.Transport(%s, %d origins)", t.st.path, len(t.byOrigin))
}
