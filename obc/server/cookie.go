package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/pkie/pkie/obc"
)

// MinKeySize is the least Binder key length, in bytes: HMAC-SHA256's full
// strength.
const MinKeySize = 32

// MaxCookieSize bounds the bound value ParseBound accepts and SetCookie
// writes: browsers keep at most 4096 bytes of a cookie, name and attributes
// included.
const MaxCookieSize = 4096

// Domain-separation labels: the MAC of a binding, and the key stream that
// hides the bound identity. They differ in their 16th byte, so no input of
// one is an input of the other.
const (
	macLabel  = "pkie obc cookie v1"
	sealLabel = "pkie obc cookie-identity v1"
)

var (
	// ErrUnbound reports a cookie that carries no valid binding: not in
	// the bound format, altered, or bound under another key (another
	// server, or this one before its key changed). It says nothing about
	// the channel: such a cookie was never this server's to accept.
	ErrUnbound = errors.New("obc/server: cookie carries no valid channel binding")
	// ErrMismatch reports a cookie with a valid binding to another
	// channel's identity than the one it arrived on: a cookie copied from
	// the client it was set for. Errors of this kind are *MismatchError.
	ErrMismatch = errors.New("obc/server: cookie is bound to another client")
)

// MismatchError is the error for a cookie bound to another channel.
type MismatchError struct {
	Name    string       // the cookie's name
	BoundTo obc.Identity // the identity the cookie was set for
	Channel obc.Identity // the identity of the channel it arrived on
	// NoCertificate is set when the channel has no client certificate
	// (Channel is then zero).
	NoCertificate bool
}

// Error names the cookie and the two channel identities.
func (e *MismatchError) Error() string {
	if e.NoCertificate {
		return fmt.Sprintf("obc/server: cookie %q is bound to client %s and arrived over a channel without a client certificate", e.Name, e.BoundTo)
	}
	return fmt.Sprintf("obc/server: cookie %q is bound to client %s and arrived over the channel of client %s", e.Name, e.BoundTo, e.Channel)
}

// Is reports ErrMismatch, and ErrNoCertificate when the channel had none.
func (e *MismatchError) Is(target error) bool {
	return target == ErrMismatch || (e.NoCertificate && target == ErrNoCertificate)
}

// Binder sets and checks channel-bound cookies.
//
// A bound cookie's value is "v1.VALUE.MAC.SEALED" (docs/formats/notary-and-tools.md,
// "Channel-bound cookies"), each part unpadded base64url: VALUE the
// caller's value, MAC = HMAC-SHA256(Key, "pkie obc cookie v1" ‖ len(name) ‖
// name ‖ len(value) ‖ value ‖ identity) with 4-byte big-endian lengths, and
// SEALED the channel identity XORed with HMAC-SHA256(Key, "pkie obc
// cookie-identity v1" ‖ MAC). The identity is thus hidden from whoever
// reads the cookie, yet the server recovers it to tell a cookie bound to
// another client (logged with both identities) from a forged one; the MAC,
// checked after recovery, authenticates the identity as well as the name and
// value (the construction is SIV's: the MAC is the IV of its own
// encryption).
type Binder struct {
	// Key is the server's secret, at least MinKeySize bytes; LoadKeyFile
	// reads one. Every cookie set under one key is refused under another.
	Key []byte
	// Mode says which cookies SetCookie writes. In obc.Strict a cookie is
	// host-only: a Domain cookie would reach other origins, where the
	// client presents other keys. In obc.Legacy (the paper's §7.1) a
	// cookie without a Domain gets the request host's registrable domain
	// (eTLD+1), whose subdomains the client's legacy-mode key is shared
	// across; the binding is the same.
	Mode obc.Mode
	// Logger receives a warning for every cookie bound to another client
	// (both identities, the cookie's name, never its value) and an info
	// line for every cookie with no valid binding. Nil: slog.Default().
	Logger *slog.Logger
}

func (b *Binder) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

func (b *Binder) checkKey() error {
	if len(b.Key) < MinKeySize {
		return fmt.Errorf("obc/server: binder key has %d bytes, want at least %d", len(b.Key), MinKeySize)
	}
	return nil
}

// SetCookie sets c on w, bound to the identity of r's channel. c is not
// modified; the cookie written is forced Secure (a bound cookie sent over
// plain HTTP would be sent without the channel it is bound to). It returns
// ErrNoCertificate when r's channel has none, and an error for a cookie
// http.Cookie.Valid refuses, one larger than MaxCookieSize, or, in Strict
// mode, one with a Domain.
func (b *Binder) SetCookie(w http.ResponseWriter, r *http.Request, c *http.Cookie) error {
	if err := b.checkKey(); err != nil {
		return err
	}
	id, ok := Identity(r)
	if !ok {
		return ErrNoCertificate
	}
	out := *c
	switch b.Mode {
	case obc.Strict:
		if out.Domain != "" {
			return fmt.Errorf("obc/server: cookie %q: Domain %q in strict mode reaches other origins, where the client's key differs; use legacy mode", c.Name, c.Domain)
		}
	case obc.Legacy:
		if out.Domain == "" {
			out.Domain = registrableDomain(r.Host)
		}
	default:
		return fmt.Errorf("obc/server: unknown mode %v", b.Mode)
	}
	out.Secure = true
	out.Value = b.bind(c.Name, []byte(c.Value), id).String()
	if err := out.Valid(); err != nil {
		return fmt.Errorf("obc/server: cookie %q: %w", c.Name, err)
	}
	if n := len(out.String()); n > MaxCookieSize {
		return fmt.Errorf("obc/server: cookie %q is %d bytes bound, more than the %d browsers keep", c.Name, n, MaxCookieSize)
	}
	http.SetCookie(w, &out)
	return nil
}

// Cookie returns the value of r's cookie name if its binding matches r's
// channel. With several cookies of that name (a host-only and a domain
// one), the first that matches wins. Errors: http.ErrNoCookie when r has
// none; a *MismatchError (errors.Is ErrMismatch) when the cookie is bound to
// another client, logged as a warning; an error wrapping ErrUnbound when it
// carries no valid binding, logged at info level.
func (b *Binder) Cookie(r *http.Request, name string) (string, error) {
	if err := b.checkKey(); err != nil {
		return "", err
	}
	cs := r.CookiesNamed(name)
	if len(cs) == 0 {
		return "", http.ErrNoCookie
	}
	id, hasID := Identity(r)
	var mismatch *MismatchError
	var unbound error
	for _, c := range cs {
		bc, err := ParseBound(c.Value)
		if err != nil {
			unbound = fmt.Errorf("%w: %w", ErrUnbound, err)
			continue
		}
		bound, ok := b.boundTo(name, bc)
		if !ok {
			unbound = fmt.Errorf("%w: its MAC does not verify (altered, or set under another key)", ErrUnbound)
			continue
		}
		if hasID && bound == id {
			return string(bc.Value), nil
		}
		mismatch = &MismatchError{Name: name, BoundTo: bound, Channel: id, NoCertificate: !hasID}
	}
	if mismatch != nil {
		channel := "none"
		if hasID {
			channel = id.String()
		}
		b.logger().Warn("obc: cookie bound to another client refused",
			"cookie", name, "bound_to", mismatch.BoundTo.String(), "channel", channel,
			"remote", r.RemoteAddr, "host", r.Host, "path", r.URL.Path)
		return "", mismatch
	}
	b.logger().Info("obc: cookie without a valid binding refused", "cookie", name, "reason", unbound.Error(),
		"remote", r.RemoteAddr, "host", r.Host, "path", r.URL.Path)
	return "", unbound
}

// mac computes a binding's MAC.
func (b *Binder) mac(name string, value []byte, id obc.Identity) [32]byte {
	m := hmac.New(sha256.New, b.Key)
	m.Write([]byte(macLabel))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(name)))
	m.Write(n[:])
	m.Write([]byte(name))
	binary.BigEndian.PutUint32(n[:], uint32(len(value)))
	m.Write(n[:])
	m.Write(value)
	m.Write(id[:])
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// stream is the key stream that hides the identity bound by mac.
func (b *Binder) stream(mac [32]byte) [32]byte {
	m := hmac.New(sha256.New, b.Key)
	m.Write([]byte(sealLabel))
	m.Write(mac[:])
	var out [32]byte
	m.Sum(out[:0])
	return out
}

func (b *Binder) bind(name string, value []byte, id obc.Identity) Bound {
	bc := Bound{Value: value, MAC: b.mac(name, value, id)}
	ks := b.stream(bc.MAC)
	subtle.XORBytes(bc.SealedIdentity[:], id[:], ks[:])
	return bc
}

// boundTo recovers the identity bc is bound to and reports whether its MAC
// verifies for that identity.
func (b *Binder) boundTo(name string, bc Bound) (obc.Identity, bool) {
	var id obc.Identity
	ks := b.stream(bc.MAC)
	subtle.XORBytes(id[:], bc.SealedIdentity[:], ks[:])
	want := b.mac(name, bc.Value, id)
	if !hmac.Equal(want[:], bc.MAC[:]) {
		return obc.Identity{}, false
	}
	return id, true
}

// Bound is a channel-bound cookie value, parsed but not verified: only a
// Binder holding the key can tell whom it is bound to.
type Bound struct {
	Value          []byte   // the value the server set
	MAC            [32]byte // the binding
	SealedIdentity [32]byte // the bound identity, hidden
}

// String encodes bc as a cookie value: "v1.VALUE.MAC.SEALED".
func (bc Bound) String() string {
	enc := base64.RawURLEncoding
	return "v1." + enc.EncodeToString(bc.Value) + "." + enc.EncodeToString(bc.MAC[:]) + "." + enc.EncodeToString(bc.SealedIdentity[:])
}

// ParseBound parses a bound cookie value, as received from a client: any
// bytes. It accepts only the canonical encoding String writes (no padding,
// no stray bits, no characters outside base64url and the three dots), so
// that one binding has one spelling.
func ParseBound(s string) (Bound, error) {
	if len(s) > MaxCookieSize {
		return Bound{}, fmt.Errorf("bound cookie is %d bytes, more than %d", len(s), MaxCookieSize)
	}
	rest, ok := strings.CutPrefix(s, "v1.")
	if !ok {
		return Bound{}, errors.New("bound cookie does not start with \"v1.\"")
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return Bound{}, fmt.Errorf("bound cookie has byte %#02x at offset %d, outside base64url", c, i+3)
		}
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return Bound{}, fmt.Errorf("bound cookie has %d dot-separated parts after v1, want 3 (value, MAC, identity)", len(parts))
	}
	enc := base64.RawURLEncoding.Strict()
	var bc Bound
	v, err := enc.DecodeString(parts[0])
	if err != nil {
		return Bound{}, fmt.Errorf("bound cookie value: %w", err)
	}
	bc.Value = v
	for i, dst := range [][]byte{bc.MAC[:], bc.SealedIdentity[:]} {
		what := [...]string{"MAC", "sealed identity"}[i]
		raw, err := enc.DecodeString(parts[i+1])
		if err != nil {
			return Bound{}, fmt.Errorf("bound cookie %s: %w", what, err)
		}
		if len(raw) != len(dst) {
			return Bound{}, fmt.Errorf("bound cookie %s has %d bytes, want %d", what, len(raw), len(dst))
		}
		copy(dst, raw)
	}
	return bc, nil
}

// registrableDomain returns host's eTLD+1 for a legacy-mode Domain
// attribute, or "" (a host-only cookie) for an IP address, a single label
// or a public suffix, which have none a browser would accept.
func registrableDomain(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || net.ParseIP(host) != nil {
		return ""
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return ""
	}
	return d
}
