// Package server is the server side of origin-bound client certificates
// (TLS-OBC, "Origin-Bound Certificates: A Fresh Approach to Strong Client
// Authentication for the Web", USENIX Security 2012) for stock net/http and
// crypto/tls: a TLS configuration that asks every client for a certificate
// and accepts self-signed ones, the channel identity it yields (the SHA-256
// of the client's public key), cookies bound to that identity, and
// middleware that refuses requests without a client certificate.
//
// A channel-bound cookie carries a MAC over its name, its value and the
// identity of the channel it was set on. A cookie copied to another client
// arrives over a channel with another key, its MAC does not verify for that
// key, and Binder.Cookie refuses it. The server need keep no per-session
// state for this: the binding travels in the cookie, keyed by a secret only
// the server holds. Logging out does need state, since a cookie kept from
// before stays valid until it expires: Sessions holds sessions on the server,
// bounded, so that a cookie carrying a session's id opens it only until it
// ends.
package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"github.com/pkie/pkie/obc"
)

// Option adjusts TLSConfig.
type Option func(*tls.Config)

// RequireCertificate makes the handshake fail for a client that presents no
// certificate (tls.RequireAnyClientCert), for servers where every request
// needs an identity. Without it a client without a certificate completes
// the handshake and handlers see no identity (Identity reports false), so
// that a site can tell a user what to do rather than drop the connection.
func RequireCertificate() Option {
	return func(c *tls.Config) { c.ClientAuth = tls.RequireAnyClientCert }
}

// TLSConfig returns a copy of base (nil: an empty configuration) that asks
// every client for a certificate and accepts any certificate whose leaf
// parses, self-signed included, with no chain verification: an origin-bound
// certificate vouches for nothing but its key, and the handshake's
// CertificateVerify message proves the client holds that key. Any
// VerifyPeerCertificate hook of base still runs after the leaf check.
// MinVersion is raised to TLS 1.2 if lower.
//
// Chains are never verified, so ClientCAs is ignored, and
// VerifiedChains in a connection's state stays empty: handlers must use
// Identity, never the certificate's names, which the client chose.
func TLSConfig(base *tls.Config, opts ...Option) *tls.Config {
	var c *tls.Config
	if base == nil {
		c = &tls.Config{}
	} else {
		c = base.Clone()
	}
	c.ClientAuth = tls.RequestClientCert
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	prev := c.VerifyPeerCertificate
	c.VerifyPeerCertificate = func(raw [][]byte, chains [][]*x509.Certificate) error {
		if len(raw) > 0 {
			if _, err := x509.ParseCertificate(raw[0]); err != nil {
				return fmt.Errorf("obc/server: client certificate: %w", err)
			}
		}
		if prev != nil {
			return prev(raw, chains)
		}
		return nil
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Identity returns the identity of r's channel: that of the client
// certificate's key (obc.IdentityOf of the leaf). It reports false for a
// request without TLS or without a client certificate.
func Identity(r *http.Request) (obc.Identity, bool) {
	if r == nil || r.TLS == nil {
		return obc.Identity{}, false
	}
	return ConnIdentity(*r.TLS)
}

// ConnIdentity is Identity for a TLS connection's state, for servers that
// are not HTTP.
func ConnIdentity(cs tls.ConnectionState) (obc.Identity, bool) {
	if len(cs.PeerCertificates) == 0 {
		return obc.Identity{}, false
	}
	return obc.IdentityOf(cs.PeerCertificates[0]), true
}

// ErrNoCertificate reports a request whose channel has no client
// certificate, hence no identity to bind a cookie to or check one against.
var ErrNoCertificate = errors.New("obc/server: the client presented no TLS client certificate")

// NoCertificateMessage is the body Require answers with.
const NoCertificateMessage = "403 Forbidden: this site authenticates clients by origin-bound TLS client certificates, " +
	"and your client presented none. Use a client that creates one per site (e.g. \"pkie obc get URL\"), " +
	"or configure your client to send a (self-signed) certificate.\n"

// Require returns h refusing, with 403 and NoCertificateMessage, every
// request whose channel has no client certificate. 403 rather than 401:
// there is no HTTP authentication scheme to offer in WWW-Authenticate, the
// credential lives in the TLS handshake.
func Require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := Identity(r); !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, NoCertificateMessage)
			return
		}
		h.ServeHTTP(w, r)
	})
}
