package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Protocol is the helper protocol's name and version, sent in the hello.
const Protocol = "pkie-verify/1"

// Bounds on the protocol's lines (docs/formats/notary-and-tools.md).
const (
	MaxRequestLine = 16 << 20
	MaxAnswerLine  = 64 << 10
	maxReason      = 4 << 10
	maxPhase       = time.Hour
)

// Hello is a helper's first line.
type Hello struct {
	Protocol string `json:"protocol"`
	Backend  string `json:"backend"`
	Library  string `json:"library"`
}

// DecodeHello reads a helper's first line.
func DecodeHello(line []byte) (Hello, error) {
	var h Hello
	if len(line) > MaxAnswerLine {
		return h, fmt.Errorf("hello of %d bytes (at most %d)", len(line), MaxAnswerLine)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("hello is not JSON: %w", err)
	}
	if h.Protocol != Protocol {
		return h, fmt.Errorf("helper speaks %q, want %q", h.Protocol, Protocol)
	}
	if h.Backend == "" || len(h.Backend) > 64 || len(h.Library) > 256 {
		return h, errors.New("hello names no back end, or names too long")
	}
	return h, nil
}

// wireRequest is a request line.
type wireRequest struct {
	ID      uint64   `json:"id"`
	Roots   [][]byte `json:"roots"`
	Chain   [][]byte `json:"chain"`
	Host    string   `json:"host"`
	Time    int64    `json:"time"`
	Purpose Purpose  `json:"purpose"`
}

// EncodeRequest writes r as request line id, newline included.
func EncodeRequest(id uint64, r *Request) ([]byte, error) {
	p := r.Purpose
	if p == "" {
		p = Server
	}
	b, err := json.Marshal(wireRequest{ID: id, Roots: r.Roots, Chain: r.Chain, Host: WireHost(r.Host), Time: r.Time.Unix(), Purpose: p})
	if err != nil {
		return nil, err
	}
	if len(b) >= MaxRequestLine {
		return nil, fmt.Errorf("verify: request of %d bytes (at most %d)", len(b), MaxRequestLine)
	}
	return append(b, '\n'), nil
}

// WireHost is host as every back end is given it: an IP literal in
// brackets ("[::1]", as URLs write one) loses them, since not every library
// reads that form.
func WireHost(host string) string {
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		if _, err := netip.ParseAddr(host[1 : len(host)-1]); err == nil {
			return host[1 : len(host)-1]
		}
	}
	return host
}

// wireAnswer is an answer line. Pointers tell a missing field from a zero.
type wireAnswer struct {
	ID           *uint64 `json:"id"`
	Error        *string `json:"error"`
	Valid        *bool   `json:"valid"`
	Code         *Code   `json:"code"`
	Reason       string  `json:"reason"`
	Depth        int     `json:"depth"`
	RootsSkipped int     `json:"roots_skipped"`
	Phases       *struct {
		Roots    *int64 `json:"roots_ns"`
		Chain    *int64 `json:"chain_ns"`
		Verify   *int64 `json:"verify_ns"`
		Hostname *int64 `json:"hostname_ns"`
	} `json:"phases"`
}

// HelperError is an answer that refused the request: no verdict.
type HelperError struct{ Msg string }

func (e *HelperError) Error() string { return "helper refused the request: " + e.Msg }

// DecodeAnswer reads one answer line to request id. It returns a verdict
// only from a well-formed answer to that request whose code agrees with
// its validity; anything else is an error, a refusal a *HelperError.
func DecodeAnswer(line []byte, id uint64) (Result, error) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > MaxAnswerLine {
		return Result{}, fmt.Errorf("answer of %d bytes (at most %d)", len(line), MaxAnswerLine)
	}
	fields, err := strictObject(line, answerKeys)
	if err != nil {
		return Result{}, err
	}
	if raw, ok := fields["phases"]; ok {
		if _, err := strictObject(raw, phaseKeys); err != nil {
			return Result{}, fmt.Errorf("phases: %w", err)
		}
	}
	var a wireAnswer
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&a); err != nil {
		return Result{}, fmt.Errorf("answer is not JSON: %w", err)
	}
	if dec.More() {
		return Result{}, errors.New("answer has data after its JSON object")
	}
	if a.ID == nil {
		return Result{}, errors.New("answer has no id")
	}
	_, hasErr := fields["error"]
	if hasErr {
		if _, v := fields["valid"]; v || a.Code != nil || a.Error == nil {
			return Result{}, errors.New("answer has both an error and a verdict")
		}
		// id 0: the helper could not read the request's own id.
		if *a.ID != id && *a.ID != 0 {
			return Result{}, fmt.Errorf("answer is for request %d, want %d", *a.ID, id)
		}
		return Result{}, &HelperError{Msg: clip(*a.Error)}
	}
	if *a.ID != id {
		return Result{}, fmt.Errorf("answer is for request %d, want %d", *a.ID, id)
	}
	if a.Valid == nil || a.Code == nil || a.Phases == nil {
		return Result{}, errors.New("answer lacks valid, code or phases")
	}
	if !a.Code.Known() {
		return Result{}, fmt.Errorf("answer has unknown code %q", clip(string(*a.Code)))
	}
	if *a.Valid != (*a.Code == OK) {
		return Result{}, fmt.Errorf("answer says valid=%v with code %q", *a.Valid, *a.Code)
	}
	ph := a.Phases
	if ph.Roots == nil || ph.Chain == nil || ph.Verify == nil || ph.Hostname == nil {
		return Result{}, errors.New("answer lacks a phase")
	}
	var p Phases
	for _, f := range []struct {
		name string
		v    int64
		d    *time.Duration
	}{{"roots_ns", *ph.Roots, &p.Roots}, {"chain_ns", *ph.Chain, &p.Chain}, {"verify_ns", *ph.Verify, &p.Verify}, {"hostname_ns", *ph.Hostname, &p.Hostname}} {
		if f.v < 0 || time.Duration(f.v) > maxPhase {
			return Result{}, fmt.Errorf("answer's %s is %d", f.name, f.v)
		}
		*f.d = time.Duration(f.v)
	}
	if a.Depth < 0 || a.Depth > MaxChain+MaxRoots || a.RootsSkipped < 0 || a.RootsSkipped > MaxRoots {
		return Result{}, errors.New("answer's depth or roots_skipped is out of range")
	}
	if *a.Valid && a.Depth < 1 {
		return Result{}, errors.New("answer is valid with no path")
	}
	if !*a.Valid && a.Depth != 0 {
		return Result{}, errors.New("answer is invalid but gives a path depth")
	}
	return Result{Valid: *a.Valid, Code: *a.Code, Reason: clip(a.Reason), Depth: a.Depth, RootsSkipped: a.RootsSkipped, Phases: p}, nil
}

var (
	answerKeys = map[string]bool{"id": true, "error": true, "valid": true, "code": true, "reason": true, "depth": true, "roots_skipped": true, "phases": true}
	phaseKeys  = map[string]bool{"roots_ns": true, "chain_ns": true, "verify_ns": true, "hostname_ns": true}
)

// strictObject splits a JSON object into its members, refusing keys it
// does not know (encoding/json alone would match them case-insensitively)
// and keys given twice (where it would keep the last).
func strictObject(b []byte, allowed map[string]bool) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("answer is not JSON: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("answer is not a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("answer is not JSON: %w", err)
		}
		k, _ := t.(string)
		if !allowed[k] {
			return nil, fmt.Errorf("answer has unknown field %q", clip(k))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("answer gives %q twice", k)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("answer is not JSON: %w", err)
		}
		out[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %w", err)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > maxReason {
		return s[:maxReason] + "…"
	}
	return s
}
