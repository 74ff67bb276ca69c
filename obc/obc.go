// Package obc implements origin-bound client certificates (TLS-OBC: Dietz,
// Czeskis, Balfanz and Wallach, "Origin-Bound Certificates: A Fresh Approach
// to Strong Client Authentication for the Web", USENIX Security 2012) for Go
// clients: every web origin gets its own key and self-signed certificate,
// made on first contact and presented as the TLS client certificate on every
// later connection to that origin. A server binds its cookies to the key
// (package obc/server), so a cookie stolen from one client is useless on any
// other channel.
//
// This file holds what client and server share: the origin, the scope a key
// is bound to, and the channel identity a server sees.
package obc

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Origin is a web origin (RFC 6454): scheme, host and port. Host is lower
// case, without brackets for IPv6, and Port is always set (443 for https
// when the URL names none).
type Origin struct {
	// Scheme is "https": only https origins carry client certificates.
	Scheme string
	// Host is the host name or IP address, lower case, without a trailing
	// dot.
	Host string
	// Port is the port, 443 when the URL names none.
	Port uint16
}

// OriginOf returns the origin of u. Only https origins carry TLS client
// certificates.
func OriginOf(u *url.URL) (Origin, error) {
	if u == nil {
		return Origin{}, errors.New("obc: no URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" {
		return Origin{}, fmt.Errorf("obc: origin %q: scheme %q carries no TLS client certificate; want https", u.Redacted(), u.Scheme)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return Origin{}, fmt.Errorf("obc: URL %q has no host", u.Redacted())
	}
	port := uint16(443)
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return Origin{}, fmt.Errorf("obc: URL %q: port %q is not 1-65535", u.Redacted(), p)
		}
		port = uint16(n)
	}
	return Origin{Scheme: scheme, Host: host, Port: port}, nil
}

// ParseOrigin parses "https://host[:port]" (a path, query or fragment is
// refused: an origin has none).
func ParseOrigin(s string) (Origin, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Origin{}, fmt.Errorf("obc: origin %q: %w", s, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Origin{}, fmt.Errorf("obc: origin %q has a path, query, fragment or user; an origin is scheme://host[:port]", s)
	}
	return OriginOf(u)
}

// String returns "https://host:port", IPv6 hosts in brackets.
func (o Origin) String() string {
	return o.Scheme + "://" + net.JoinHostPort(o.Host, strconv.Itoa(int(o.Port)))
}

// Mode says how widely one key is used.
type Mode int

const (
	// Strict gives every origin its own key: the paper's design.
	Strict Mode = iota
	// Legacy gives every registrable domain (eTLD+1 by the public suffix
	// list) one key, whatever the scheme, subdomain and port, so that
	// cookies set for a whole domain stay bound across its subdomains
	// (the paper's §7.1 "legacy mode"). Related subdomains then see the
	// same key.
	Legacy
)

// String returns "strict" or "legacy".
func (m Mode) String() string {
	switch m {
	case Strict:
		return "strict"
	case Legacy:
		return "legacy"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses "strict" or "legacy".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "strict":
		return Strict, nil
	case "legacy":
		return Legacy, nil
	}
	return 0, fmt.Errorf("obc: mode %q: want strict or legacy", s)
}

// Scope returns what o's key is bound to under m: the origin's String in
// Strict mode; in Legacy mode the registrable domain ("example.co.uk"),
// or, for an IP address or a name that is itself a public suffix (which
// has no registrable domain), the host alone.
func Scope(o Origin, m Mode) (string, error) {
	switch m {
	case Strict:
		return o.String(), nil
	case Legacy:
		if net.ParseIP(o.Host) != nil {
			return o.Host, nil
		}
		d, err := publicsuffix.EffectiveTLDPlusOne(o.Host)
		if err != nil {
			// A public suffix itself ("co.uk", "github.io") or a
			// single label ("localhost"): nothing to share with.
			return o.Host, nil
		}
		return d, nil
	}
	return "", fmt.Errorf("obc: unknown mode %d", int(m))
}

// Identity names a channel's client: the SHA-256 of the client
// certificate's SubjectPublicKeyInfo. It is the key that matters, not the
// certificate: an origin-bound certificate is self-signed and may be
// re-issued for the same key.
type Identity [32]byte

// IdentityOf returns the identity of cert.
func IdentityOf(cert *x509.Certificate) Identity {
	return sha256.Sum256(cert.RawSubjectPublicKeyInfo)
}

// String returns the identity in hex.
func (id Identity) String() string { return hex.EncodeToString(id[:]) }
