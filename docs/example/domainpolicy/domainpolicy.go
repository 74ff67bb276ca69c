// Package domainpolicy is an example PKI enhancement, written as a third
// party would write one: it uses only the public pkie package and
// golang.org/x/mod/sumdb/note, and plugs into pkie's cloud and client by
// registering a pkie.Kind. docs/guides/pkie-howto.md walks through it.
//
// A policy authority (the TTP) states, for each domain that asked for one,
// which public keys its certificates may carry, in the spirit of PoliCert's
// domain policies ("Towards Sustainable Evolution for the TLS PKI",
// Appendix C): a CA that mis-issues a certificate for the domain, under a
// key the domain never chose, is caught even though the certificate
// chains to a trusted root. The authority signs each domain's entry as a
// C2SP signed note:
//
//	policy.example.test
//	pkie example domain-policy v1
//	name www.example.test
//	spki <standard base64 of the SHA-256 of an allowed SubjectPublicKeyInfo>
//	spki …
//	timestamp <milliseconds since the Unix epoch>
//
// The first line is the authority's key name; one to MaxKeys spki lines
// follow the name. The prover (run by the PEC cloud) fetches the signed
// entry of the server name from the authority and returns it as the proof;
// the verifier (run by the client) checks the authority's signature, the
// entry's freshness, that it is about the server the client connected to,
// and that the leaf's key is among those allowed. Trust rests on the
// authority's key alone: the cloud only relays.
package domainpolicy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
)

// ID is the example's identifier, in the private-use range: an enhancement
// outside pkie picks one there until one is assigned to it.
const ID pkie.ID = 0xFF10

// Name is the enhancement's name, as --require and bundles spell it.
const Name = "domain-policy"

// Version is the proof version: the body is the signed note.
const Version = 1

// bodyType is the note's second line; no other statement parses as a
// policy.
const bodyType = "pkie example domain-policy v1"

// Limits of an entry.
const (
	MaxKeys  = 16
	MaxEntry = 4 << 10 // a signed entry, in bytes
)

// Kind returns the enhancement's registration.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          ID,
		Name:        Name,
		Summary:     "the policy authority's fresh signed policy for the domain allows the leaf's public key",
		NewProver:   NewProver,
		NewVerifier: NewVerifier,
	}
}

// Policy is one domain's signed entry.
type Policy struct {
	Origin string     // the authority's key name
	Name   string     // the domain, lower case
	SPKI   [][32]byte // SHA-256 of each allowed SubjectPublicKeyInfo
	Time   time.Time  // when it was signed, to the millisecond
}

// Body renders p as the note text the authority signs.
func (p *Policy) Body() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%s\nname %s\n", p.Origin, bodyType, p.Name)
	for _, k := range p.SPKI {
		fmt.Fprintf(&b, "spki %s\n", base64.StdEncoding.EncodeToString(k[:]))
	}
	fmt.Fprintf(&b, "timestamp %d\n", p.Time.UnixMilli())
	return b.Bytes()
}

// ParsePolicy parses note text rendered by Body, strictly: every line in
// its place, nothing after the timestamp.
func ParsePolicy(text []byte) (*Policy, error) {
	if len(text) > MaxEntry {
		return nil, fmt.Errorf("domainpolicy: entry of %d bytes, at most %d", len(text), MaxEntry)
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return nil, errors.New("domainpolicy: entry does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 5 {
		return nil, errors.New("domainpolicy: entry too short")
	}
	p := &Policy{Origin: lines[0]}
	if p.Origin == "" || lines[1] != bodyType {
		return nil, fmt.Errorf("domainpolicy: not a domain policy (second line %q)", clip(lines[1]))
	}
	name, ok := strings.CutPrefix(lines[2], "name ")
	if !ok || !validName(name) {
		return nil, fmt.Errorf("domainpolicy: bad name line %q", clip(lines[2]))
	}
	p.Name = name
	for _, l := range lines[3 : len(lines)-1] {
		v, ok := strings.CutPrefix(l, "spki ")
		if !ok {
			return nil, fmt.Errorf("domainpolicy: want an spki line, got %q", clip(l))
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(v)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("domainpolicy: spki %q is not a base64 SHA-256", clip(v))
		}
		p.SPKI = append(p.SPKI, [32]byte(raw))
	}
	if len(p.SPKI) > MaxKeys {
		return nil, fmt.Errorf("domainpolicy: %d keys, at most %d", len(p.SPKI), MaxKeys)
	}
	ts, ok := strings.CutPrefix(lines[len(lines)-1], "timestamp ")
	if !ok || len(p.SPKI) == 0 {
		return nil, errors.New("domainpolicy: want one or more spki lines, then the timestamp")
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ms <= 0 || strconv.FormatInt(ms, 10) != ts {
		return nil, fmt.Errorf("domainpolicy: bad timestamp %q", clip(ts))
	}
	p.Time = time.UnixMilli(ms)
	return p, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 253 || s != strings.ToLower(s) {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// SPKIHash returns the SHA-256 of a certificate's SubjectPublicKeyInfo, as
// policies list keys.
func SPKIHash(c *x509.Certificate) [32]byte { return sha256.Sum256(c.RawSubjectPublicKeyInfo) }

// Authority is a policy authority: it keeps each domain's allowed keys and
// serves the signed entry, freshly timestamped, at GET /v1/policy/<name>.
type Authority struct {
	signer note.Signer
	now    func() time.Time

	mu       sync.RWMutex
	policies map[string][][32]byte
}

// NewAuthority returns an authority signing with skey (from
// note.GenerateKey); now nil means time.Now.
func NewAuthority(skey string, now func() time.Time) (*Authority, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Authority{signer: s, now: now, policies: map[string][][32]byte{}}, nil
}

// Set records name's allowed keys.
func (a *Authority) Set(name string, spki ...[32]byte) error {
	if !validName(name) || len(spki) == 0 || len(spki) > MaxKeys {
		return fmt.Errorf("domainpolicy: want a lower-case name and 1 to %d keys", MaxKeys)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policies[name] = slices.Clone(spki)
	return nil
}

// Entry returns name's signed entry, or false if it has no policy.
func (a *Authority) Entry(name string) ([]byte, bool, error) {
	a.mu.RLock()
	keys, ok := a.policies[name]
	a.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	p := Policy{Origin: a.signer.Name(), Name: name, SPKI: keys, Time: a.now().Truncate(time.Millisecond)}
	msg, err := note.Sign(&note.Note{Text: string(p.Body())}, a.signer)
	return msg, true, err
}

// Handler serves GET /v1/policy/<name>.
func (a *Authority) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/policy/{name}", func(w http.ResponseWriter, r *http.Request) {
		msg, ok, err := a.Entry(r.PathValue("name"))
		switch {
		case err != nil:
			http.Error(w, "signing failed", http.StatusInternalServerError)
		case !ok:
			http.Error(w, "no policy for this name", http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write(msg)
		}
	})
	return mux
}

// Duration is a time.Duration written in JSON as "24h".
type Duration time.Duration

// MarshalJSON renders d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON parses a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`duration must be a string such as "24h"`)
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// ProverConfig configures the prover.
type ProverConfig struct {
	// URL is the authority's base URL.
	URL string `json:"url"`
	// Key is the authority's note verifier key: the prover relays only
	// entries it signed, so that a broken authority link shows up at the
	// cloud rather than as failures at every client.
	Key string `json:"key"`
}

// VerifierConfig configures the verifier.
type VerifierConfig struct {
	Key    string   `json:"key"`               // the authority's note verifier key
	MaxAge Duration `json:"max_age,omitempty"` // oldest entry accepted; zero means 24h
}

func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("domainpolicy: configuration: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("domainpolicy: configuration: data after the object")
	}
	return nil
}

// Prover fetches signed entries from the authority.
type Prover struct {
	base *url.URL
	v    note.Verifier
	hc   *http.Client
}

// NewProver builds the prover from a ProverConfig in JSON.
func NewProver(_ context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := decode(config, &c); err != nil {
		return nil, err
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("domainpolicy: url %q is not an http(s) URL", c.URL)
	}
	v, err := note.NewVerifier(c.Key)
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: key: %w", err)
	}
	hc := env.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	return &Prover{base: u, v: v, hc: hc}, nil
}

// ID returns the example's identifier.
func (p *Prover) ID() pkie.ID { return ID }

// Prove returns the authority's signed entry for the server name.
func (p *Prover) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	if !validName(req.ServerName) {
		return nil, fmt.Errorf("%w: server name %q", pkie.ErrUnsupported, clip(req.ServerName))
	}
	u := p.base.JoinPath("v1", "policy", req.ServerName)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: authority: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxEntry+1))
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: authority: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: the authority has no policy for %s", pkie.ErrUnsupported, req.ServerName)
	case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("%w: the authority is busy", pkie.ErrBusy)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("domainpolicy: authority: %s", resp.Status)
	case len(body) > MaxEntry:
		return nil, fmt.Errorf("domainpolicy: authority's entry over %d bytes", MaxEntry)
	}
	n, err := note.Open(body, note.VerifierList(p.v))
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: authority's entry does not verify: %w", err)
	}
	if pol, err := ParsePolicy([]byte(n.Text)); err != nil || pol.Name != req.ServerName {
		return nil, fmt.Errorf("domainpolicy: authority's entry is not %s's policy", req.ServerName)
	}
	return &pkie.Proof{ID: ID, Version: Version, Body: body}, nil
}

// Verifier checks entries against the authority's pinned key.
type Verifier struct {
	v      note.Verifier
	maxAge time.Duration
}

// NewVerifier builds the verifier from a VerifierConfig in JSON.
func NewVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c VerifierConfig
	if err := decode(config, &c); err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(c.Key)
	if err != nil {
		return nil, fmt.Errorf("domainpolicy: key: %w", err)
	}
	if c.MaxAge < 0 {
		return nil, errors.New("domainpolicy: max_age must be positive")
	}
	if c.MaxAge == 0 {
		c.MaxAge = Duration(24 * time.Hour)
	}
	return &Verifier{v: v, maxAge: time.Duration(c.MaxAge)}, nil
}

// ID returns the example's identifier.
func (v *Verifier) ID() pkie.ID { return ID }

// Verify checks the proof: signed by the pinned authority, a policy for the
// server name, fresh, and allowing the leaf's key.
func (v *Verifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	leaf := req.Leaf()
	if leaf == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no certificate"}
	}
	if req.Proof == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no domain policy"}
	}
	fail := func(format string, a ...any) pkie.Assertion {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("policy authority %s: ", v.v.Name()) + fmt.Sprintf(format, a...)}
	}
	if req.Proof.ID != ID || req.Proof.Version != Version {
		return fail("proof %s version %d is not a domain policy of version %d", req.Proof.ID, req.Proof.Version, Version)
	}
	if len(req.Proof.Body) > MaxEntry {
		return fail("entry of %d bytes", len(req.Proof.Body))
	}
	n, err := note.Open(req.Proof.Body, note.VerifierList(v.v))
	if err != nil {
		return fail("entry not signed by the pinned key: %v", err)
	}
	p, err := ParsePolicy([]byte(n.Text))
	if err != nil {
		return fail("%v", err)
	}
	if p.Origin != v.v.Name() {
		return fail("entry names authority %q", clip(p.Origin))
	}
	if want := strings.ToLower(req.ServerName); p.Name != want {
		return fail("entry is the policy of %s, not %s", p.Name, want)
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	signed := p.Time.UTC().Format(time.RFC3339)
	if age := now.Sub(p.Time); age > v.maxAge {
		return fail("policy of %s signed %s is %s old (max %s)", p.Name, signed, age.Round(time.Second), v.maxAge)
	} else if age < -time.Minute {
		return fail("policy of %s signed %s, in the future", p.Name, signed)
	}
	h := SPKIHash(leaf)
	if slices.Contains(p.SPKI, h) {
		return pkie.Assertion{Status: pkie.Pass, Time: p.Time, Reason: fmt.Sprintf(
			"the policy of %s signed by %s at %s allows the leaf's key (SPKI SHA-256 %x…)", p.Name, v.v.Name(), signed, h[:8])}
	}
	return pkie.Assertion{Status: pkie.Fail, Time: p.Time, Reason: fmt.Sprintf(
		"the policy of %s signed by %s at %s allows %d key(s), not the leaf's (SPKI SHA-256 %x…): a certificate the domain did not ask for",
		p.Name, v.v.Name(), signed, len(p.SPKI), h[:8])}
}
