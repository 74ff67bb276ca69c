package consensus

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pkie/pkie/probe"
)

// signatureSep is where a Convergence answer is cut: the notary signs the
// bytes of the object before it, closed with "}".
var signatureSep = []byte(`, "signature":`)

// maxEntries bounds the history a client accepts from one answer.
const maxEntries = 4096

// Entry is one line of a notary's signed history for a target: a
// certificate fingerprint and the span over which the notary saw it.
type Entry struct {
	Fingerprint [20]byte  `json:"-"`
	Start       time.Time `json:"start"`
	Finish      time.Time `json:"finish"`
}

// MarshalJSON renders the fingerprint the Convergence way.
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Fingerprint string    `json:"fingerprint"`
		Start       time.Time `json:"start"`
		Finish      time.Time `json:"finish"`
	}{probe.ColonHex(e.Fingerprint[:]), e.Start, e.Finish})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w struct {
		Fingerprint string    `json:"fingerprint"`
		Start       time.Time `json:"start"`
		Finish      time.Time `json:"finish"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	fp, err := probe.ParseColonHex(w.Fingerprint, 20)
	if err != nil {
		return err
	}
	copy(e.Fingerprint[:], fp)
	e.Start, e.Finish = w.Start, w.Finish
	return nil
}

// Observed returns how long the notary saw the fingerprint.
func (e Entry) Observed() time.Duration { return e.Finish.Sub(e.Start) }

type wireEntry struct {
	Timestamp struct {
		Start  string `json:"start"`
		Finish string `json:"finish"`
	} `json:"timestamp"`
	Fingerprint string `json:"fingerprint"`
}

// VerifyResponse checks a Convergence answer body the way existing clients
// do: it cuts the body before `, "signature":`, appends "}", and verifies
// the PKCS#1 v1.5 SHA1withRSA signature over those bytes with key. Only
// then does it parse the history. It returns the entries in the order sent.
func VerifyResponse(body []byte, key *rsa.PublicKey) ([]Entry, error) {
	if key == nil {
		return nil, errors.New("no notary key to verify with")
	}
	i := bytes.LastIndex(body, signatureSep)
	if i < 0 {
		return nil, errors.New(`answer has no signature (no ", \"signature\":" in body)`)
	}
	signed := make([]byte, 0, i+1)
	signed = append(append(signed, body[:i]...), '}')

	// What follows the separator must be the signature string and the
	// closing brace, nothing else: unsigned data has no place in an answer.
	tail := bytes.TrimSpace(body[i+len(signatureSep):])
	tail, ok := bytes.CutSuffix(tail, []byte("}"))
	tail = bytes.TrimSpace(tail)
	if !ok || len(tail) < 2 || tail[0] != '"' || tail[len(tail)-1] != '"' || bytes.IndexByte(tail[1:len(tail)-1], '"') >= 0 {
		return nil, errors.New(`answer does not end with "signature":"<base64>"}`)
	}
	if len(tail) == 2 {
		return nil, errors.New("answer has an empty signature")
	}
	sig, err := base64.StdEncoding.DecodeString(string(tail[1 : len(tail)-1]))
	if err != nil {
		return nil, fmt.Errorf("answer signature is not base64: %w", err)
	}
	sum := sha1.Sum(signed)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA1, sum[:], sig); err != nil {
		return nil, fmt.Errorf("answer signature does not verify against the notary's bundle certificate: %w", err)
	}
	return parseSigned(signed)
}

// parseSigned parses the verified {"fingerprintList": …} object.
func parseSigned(signed []byte) ([]Entry, error) {
	var obj struct {
		List *[]wireEntry `json:"fingerprintList"`
	}
	if err := json.Unmarshal(signed, &obj); err != nil {
		return nil, fmt.Errorf("signed part of the answer is not valid JSON: %w", err)
	}
	if obj.List == nil {
		return nil, errors.New("answer has no fingerprintList")
	}
	if len(*obj.List) > maxEntries {
		return nil, fmt.Errorf("answer lists %d fingerprints; at most %d accepted", len(*obj.List), maxEntries)
	}
	out := make([]Entry, 0, len(*obj.List))
	for i, w := range *obj.List {
		fp, err := probe.ParseColonHex(w.Fingerprint, 20)
		if err != nil {
			return nil, fmt.Errorf("answer entry %d: %w", i, err)
		}
		start, err := parseUnix(w.Timestamp.Start)
		if err != nil {
			return nil, fmt.Errorf("answer entry %d start: %w", i, err)
		}
		finish, err := parseUnix(w.Timestamp.Finish)
		if err != nil {
			return nil, fmt.Errorf("answer entry %d finish: %w", i, err)
		}
		if finish.Before(start) {
			return nil, fmt.Errorf("answer entry %d: finish %d is before start %d", i, finish.Unix(), start.Unix())
		}
		e := Entry{Start: start, Finish: finish}
		copy(e.Fingerprint[:], fp)
		out = append(out, e)
	}
	return out, nil
}

func parseUnix(s string) (time.Time, error) {
	if s == "" || len(s) > 12 {
		return time.Time{}, fmt.Errorf("timestamp %q is not unix seconds", truncate(s, 20))
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("timestamp %q is not unix seconds", truncate(s, 20))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
