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
	"strings"
	"time"
)

// V1SignaturePrefix is what a notary prepends to the answer's bytes before
// signing them with its v1 Ed25519 key (docs/api.md). It must equal
// internal/notary.V1SignaturePrefix; a test pins the two together.
const V1SignaturePrefix = "pkie notary v1 answer\n"

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
}

// V1Answer is a notary's verified v1 answer.
type V1Answer struct {
	Notary     string     `json:"notary"`
	Host       string     `json:"host"`
	Port       int        `json:"port"`
	SNI        string     `json:"sni,omitempty"`
	SignedAt   time.Time  `json:"signed_at"`
	ObservedAt time.Time  `json:"observed_at"`
	Probed     bool       `json:"probed"`
	Current    string     `json:"current_sha256"`
	Match      *bool      `json:"match,omitempty"`
	History    []V1Record `json:"history"`
}

// V1Record is one certificate in a v1 answer's history.
type V1Record struct {
	SHA256    string    `json:"sha256"`
	SHA1      string    `json:"sha1"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// Record returns the history record for the certificate whose SHA-256 is
// hex s, if the answer lists it.
func (a *V1Answer) Record(s string) (V1Record, bool) {
	for _, r := range a.History {
		if r.SHA256 == s {
			return r, true
		}
	}
	return V1Record{}, false
}

// VerifyV1 checks a v1 response body: it verifies the Ed25519 signature
// over V1SignaturePrefix and the exact bytes of "answer" against pub, the
// key pinned in the notary's bundle, before reading anything else in it.
// Then it parses the answer strictly and checks that it is about q (host,
// port, sni, and the fingerprint asked about) and fresh: signed_at and
// observed_at no older than maxAge before now and no more than
// MaxClockSkew after it.
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
	msg := make([]byte, 0, len(V1SignaturePrefix)+len(resp.Answer))
	msg = append(append(msg, V1SignaturePrefix...), resp.Answer...)
	if !ed25519.Verify(pub, msg, sig) {
		return nil, errors.New("v1 signature does not verify against the notary's pinned bundle key")
	}

	// Signed; now the content. Unknown fields are allowed so that a newer
	// notary can add some; missing or wrong ones are not.
	var a V1Answer
	if err := json.Unmarshal(resp.Answer, &a); err != nil {
		return nil, fmt.Errorf("signed v1 answer does not parse: %w", err)
	}
	if err := a.check(q, now, maxAge); err != nil {
		return nil, err
	}
	return &a, nil
}

func (a *V1Answer) check(q V1Question, now time.Time, maxAge time.Duration) error {
	if !strings.EqualFold(a.Host, q.Host) || a.Port != q.Port {
		return fmt.Errorf("answer is about %s port %d, not %s port %d", truncate(a.Host, 80), a.Port, q.Host, q.Port)
	}
	if !strings.EqualFold(a.SNI, q.SNI) {
		return fmt.Errorf("answer is about SNI %q, not %q", truncate(a.SNI, 80), q.SNI)
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
	if _, ok := a.Record(a.Current); !ok {
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

// entries turns a v1 history into the Convergence-shaped Entries an Answer
// carries (SHA-1 and the span seen).
func (a *V1Answer) entries() []Entry {
	out := make([]Entry, 0, len(a.History))
	for _, r := range a.History {
		var e Entry
		hex.Decode(e.Fingerprint[:], []byte(r.SHA1)) // checked by VerifyV1
		e.Start, e.Finish = r.FirstSeen.UTC(), r.LastSeen.UTC()
		out = append(out, e)
	}
	return out
}
