// Package notarywire is the notary's v1 wire format (docs/formats/api.md): the
// request a client sends to POST /v1/check, the answer a notary signs, and
// the envelope that carries the answer's exact bytes with the signature.
// The notary and its clients both use these types, so the two cannot
// drift apart; what either side checks about them lives with that side.
package notarywire

import (
	"encoding/json"
	"time"
)

// SignaturePrefix is prepended to an answer's exact bytes before Ed25519
// signing, so that a v1 signature can never be taken for one over other
// data.
const SignaturePrefix = "pkie notary v1 answer\n"

// Request asks a notary about a target. SHA256 is optional: without it the
// notary reports what it sees.
type Request struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	SNI    string `json:"sni,omitempty"`
	IP     string `json:"ip,omitempty"`
	SHA256 string `json:"sha256,omitempty"` // hex of the leaf certificate DER's SHA-256
}

// Answer is what a notary signs.
type Answer struct {
	Notary string `json:"notary"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	SNI    string `json:"sni,omitempty"`
	// IP is the address the request pinned, echoed: the answer, history
	// included, is about what was seen at that address, kept apart from
	// the name's own history. Absent for a request that pinned none.
	IP string `json:"ip,omitempty"`
	// Addr is the address and port the notary connected to for this
	// answer ("192.0.2.1:443", "[2001:db8::1]:443"); present when Probed.
	Addr       string    `json:"addr,omitempty"`
	SignedAt   time.Time `json:"signed_at"`
	ObservedAt time.Time `json:"observed_at"` // when the current certificate was last seen
	Probed     bool      `json:"probed"`      // observed for this request rather than from history
	// Current is the certificate the answer is about: the one asked
	// about when the notary vouches for it (it is in CurrentSet), else
	// the one it saw most recently. ObservedAt is when it was last seen.
	Current string `json:"current_sha256"`
	// CurrentSet lists, in hex, the SHA-256 of every certificate the
	// notary vouches for at the target now: those it has seen there
	// within its freshness window, several when the target serves
	// several at once (CDN edges, balancers, a rotation under way).
	CurrentSet []string `json:"current_set,omitempty"`
	Match      *bool    `json:"match,omitempty"` // present when the request carried a fingerprint
	History    []Record `json:"history"`
}

// Record is one certificate in a target's history.
type Record struct {
	SHA256    string    `json:"sha256"`
	SHA1      string    `json:"sha1"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// Find returns the history record for the certificate whose SHA-256 is
// hex s, if the answer lists it.
func (a *Answer) Find(s string) (Record, bool) {
	for _, r := range a.History {
		if r.SHA256 == s {
			return r, true
		}
	}
	return Record{}, false
}

// Response carries the answer's exact signed bytes and the signature.
type Response struct {
	Answer    json.RawMessage `json:"answer"`
	Signature string          `json:"signature"` // base64 Ed25519 over SignaturePrefix + Answer
}

// SignedMessage returns what the signature covers for answer bytes ab.
func SignedMessage(ab []byte) []byte {
	msg := make([]byte, 0, len(SignaturePrefix)+len(ab))
	return append(append(msg, SignaturePrefix...), ab...)
}
