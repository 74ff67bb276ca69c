package consensus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/notarywire"
)

// Freshness defaults for v1 answers.
const (
	// DefaultAnswerMaxAge bounds how old a v1 answer's observation may be.
	// A pkie notary answers from its history for up to its own max age
	// (24 h by default) before it probes again, so a day accepts every
	// honest answer and refuses a replayed or long-cached one.
	DefaultAnswerMaxAge = 24 * time.Hour
	// MaxClockSkew is how far in the future a signed time may lie before
	// the answer is refused: the notary's clock and ours may differ a
	// little, not by hours.
	MaxClockSkew = time.Minute
)

// V1Question is what the client asks a notary over the v1 API.
type V1Question struct {
	Host   string    // connect host, lower case
	Port   int       //
	SNI    string    // "" when the SNI is the host (or none is sent)
	SHA256 *[32]byte // the leaf's SHA-256; nil asks what the notary sees
	// IP is the address the request pinned, or the zero Addr. An answer
	// about a pinned address is about that address only, and an answer
	// about the name never comes from a pinned one.
	IP netip.Addr
}

// V1Answer is a notary's v1 answer, once VerifyV1 has checked it.
type V1Answer = notarywire.Answer

// VerifyV1 checks a v1 response body: it verifies the Ed25519 signature
// over notarywire.SignaturePrefix and the exact bytes of "answer" against pub, the
// key pinned in the notary's bundle, before reading anything else in it.
// Then it parses the answer strictly and checks that it is about q (host,
// port, sni, the pinned address if any, and the fingerprint asked about)
// and fresh: signed_at and observed_at no older than maxAge before now and
// no more than MaxClockSkew after it.
func VerifyV1(body []byte, pub ed25519.PublicKey, q V1Question, now time.Time, maxAge time.Duration) (*V1Answer, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("no v1 key to verify with")
	}
	var resp struct {
		Answer    json.RawMessage `json:"answer"`
		Signature *string         `json:"signature"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("v1 response is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("v1 response has data after its JSON object")
	}
	if len(resp.Answer) == 0 || resp.Answer[0] != '{' {
		return nil, errors.New("v1 response has no answer object")
	}
	if resp.Signature == nil || *resp.Signature == "" {
		return nil, errors.New("v1 response has no signature")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(*resp.Signature)
	if err != nil {
		return nil, fmt.Errorf("v1 signature is not base64: %w", err)
	}
	if !ed25519.Verify(pub, notarywire.SignedMessage(resp.Answer), sig) {
		return nil, errors.New("v1 signature does not verify against the notary's pinned bundle key")
	}

	// Signed; now the content. Unknown fields are allowed so that a newer
	// notary can add some; missing or wrong ones are not.
	var a V1Answer
	if err := json.Unmarshal(resp.Answer, &a); err != nil {
		return nil, fmt.Errorf("signed v1 answer does not parse: %w", err)
	}
	if err := checkV1(&a, q, now, maxAge); err != nil {
		return nil, err
	}
	return &a, nil
}

// checkV1 checks that a signed answer is about q, fresh and consistent.
func checkV1(a *V1Answer, q V1Question, now time.Time, maxAge time.Duration) error {
	if !strings.EqualFold(a.Host, q.Host) || a.Port != q.Port {
		return fmt.Errorf("answer is about %s port %d, not %s port %d", truncate(a.Host, 80), a.Port, q.Host, q.Port)
	}
	if !strings.EqualFold(a.SNI, q.SNI) {
		return fmt.Errorf("answer is about SNI %q, not %q", truncate(a.SNI, 80), q.SNI)
	}
	if err := checkV1Address(a, q); err != nil {
		return err
	}
	if len(a.History) > maxEntries {
		return fmt.Errorf("answer lists %d certificates; at most %d accepted", len(a.History), maxEntries)
	}
	if a.SignedAt.IsZero() || a.ObservedAt.IsZero() {
		return errors.New("answer lacks signed_at or observed_at")
	}
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"signed_at", a.SignedAt}, {"observed_at", a.ObservedAt}} {
		if age := now.Sub(t.at); age > maxAge {
			return fmt.Errorf("stale answer: %s %s is %s old (max %s)", t.name, t.at.UTC().Format(time.RFC3339), age.Round(time.Second), maxAge)
		} else if age < -MaxClockSkew {
			return fmt.Errorf("answer from the future: %s %s is %s ahead of this clock (max skew %s)", t.name, t.at.UTC().Format(time.RFC3339), (-age).Round(time.Second), MaxClockSkew)
		}
	}
	if a.ObservedAt.After(a.SignedAt) {
		return fmt.Errorf("answer observed_at %s is after its signed_at %s", a.ObservedAt.UTC().Format(time.RFC3339), a.SignedAt.UTC().Format(time.RFC3339))
	}
	if err := checkHex(a.Current, 32); err != nil {
		return fmt.Errorf("answer current_sha256: %w", err)
	}
	for i, r := range a.History {
		if err := checkHex(r.SHA256, 32); err != nil {
			return fmt.Errorf("answer history %d sha256: %w", i, err)
		}
		if err := checkHex(r.SHA1, 20); err != nil {
			return fmt.Errorf("answer history %d sha1: %w", i, err)
		}
		if r.LastSeen.Before(r.FirstSeen) {
			return fmt.Errorf("answer history %d: last_seen is before first_seen", i)
		}
	}
	if _, ok := a.Find(a.Current); !ok {
		return errors.New("answer's history does not list its current certificate")
	}
	if q.SHA256 == nil {
		return nil
	}
	if a.Match == nil {
		return errors.New("answer has no match although a fingerprint was asked about")
	}
	// The notary's match must agree with what it signed as current: a
	// bare boolean is not enough to vote on.
	mine := hex.EncodeToString(q.SHA256[:])
	if *a.Match != (a.Current == mine) {
		return fmt.Errorf("answer says match=%v but its current certificate is %s", *a.Match, a.Current)
	}
	return nil
}

// checkV1Address checks that an answer is about the address q pinned, if
// any: its ip echoes q.IP and the address it connected to is q.IP at
// q.Port. An answer to an unpinned question must not carry an ip, since
// what was seen at an address someone chose is not evidence about the
// name.
func checkV1Address(a *V1Answer, q V1Question) error {
	if a.Addr != "" {
		ap, err := netip.ParseAddrPort(a.Addr)
		if err != nil {
			return fmt.Errorf("answer addr %q is not an address and port", truncate(a.Addr, 80))
		}
		if q.IP.IsValid() && (ap.Addr().Unmap() != q.IP.Unmap() || int(ap.Port()) != q.Port) {
			return fmt.Errorf("answer was probed at %s, not at the pinned %s", ap, netip.AddrPortFrom(q.IP.Unmap(), uint16(q.Port)))
		}
	}
	if !q.IP.IsValid() {
		if a.IP != "" {
			return fmt.Errorf("answer is about the pinned address %s, not about the name", truncate(a.IP, 80))
		}
		return nil
	}
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return fmt.Errorf("answer to a question pinning %s names no pinned address (ip %q)", q.IP, truncate(a.IP, 80))
	}
	if ip.Unmap() != q.IP.Unmap() {
		return fmt.Errorf("answer is about the address %s, not the pinned %s", ip, q.IP)
	}
	if a.Probed && a.Addr == "" {
		return fmt.Errorf("answer probed the pinned %s but does not say at which address", q.IP)
	}
	return nil
}

// checkHex checks that s is n bytes in lower-case hex, as notaries write.
func checkHex(s string, n int) error {
	if len(s) != 2*n {
		return fmt.Errorf("%q is not %d hex digits", truncate(s, 80), 2*n)
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%q is not %d lower-case hex digits", truncate(s, 80), 2*n)
		}
	}
	return nil
}

// v1Entries turns a v1 history into the Convergence-shaped Entries an
// Answer carries (SHA-1 and the span seen).
func v1Entries(a *V1Answer) []Entry {
	out := make([]Entry, 0, len(a.History))
	for _, r := range a.History {
		var e Entry
		hex.Decode(e.Fingerprint[:], []byte(r.SHA1)) // checked by VerifyV1
		e.Start, e.Finish = r.FirstSeen.UTC(), r.LastSeen.UTC()
		out = append(out, e)
	}
	return out
}
