package check

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pkie/pkie/internal/consensus"
)

// The types in this file are what an embedder hands the Checker about
// notaries and reads back from it. The notary client (internal/consensus)
// has its own, which the Checker converts at the boundary, so that these
// are documented where an embedder looks; TestNotaryTypesMatch keeps the
// two field for field.

// Bundle is a Convergence notary bundle (a .notary file): one logical
// notary, served by one or more replica hosts that share its key. However
// many hosts it lists, a bundle is one vote. Read one with ReadBundle,
// LoadNotaries or ParseBundle; New checks every bundle again, so one built
// field by field works as well.
type Bundle struct {
	// Version is the bundle format the file used: 1, or 0 for the
	// original single-host layout, which ParseBundle turns into one host
	// named after itself.
	Version int `json:"version"`
	// Name names the notary in verdicts.
	Name string `json:"name"`
	// BundleLocation is where the notary publishes its bundle.
	BundleLocation string `json:"bundle_location"`
	// Region is where the notary probes from, for people.
	Region string `json:"region,omitempty"`
	// Hosts are the notary's replicas, tried in order.
	Hosts []Host `json:"hosts"`
}

// Host is one replica host of a notary bundle.
type Host struct {
	// Host is the replica's host name or IP address.
	Host string `json:"host"`
	// SSLPort is the port of its TLS listener, which answers queries.
	SSLPort int `json:"ssl_port"`
	// HTTPPort is its bouncing (CONNECT) listener; 0 if none.
	HTTPPort int `json:"http_port"`
	// Certificate is the PEM certificate the host presents and signs
	// Convergence answers with (RSA, at least 2048 bits): the pin.
	Certificate string `json:"certificate"`
	// V1Key is pkie's extension to the Convergence format: the base64
	// Ed25519 public key that signs the notary's v1 answers. Without it
	// the host is asked over the Convergence API only.
	V1Key string `json:"pkie_v1_ed25519,omitempty"`
}

// ParseBundle parses a Convergence bundle (versions 1 and 0, as the
// Convergence client reads them) and checks every field.
func ParseBundle(data []byte) (*Bundle, error) {
	b, err := consensus.ParseBundle(data)
	if err != nil {
		return nil, err
	}
	return bundleOf(b), nil
}

// ReadBundle reads one .notary bundle file.
func ReadBundle(path string) (*Bundle, error) {
	b, err := consensus.ReadBundle(path)
	if err != nil {
		return nil, err
	}
	return bundleOf(b), nil
}

// LoadNotaries reads every .notary bundle in dir, in name order, or the
// bundle file dir names. A malformed file is an error naming it, and so
// are two bundles pinning the same certificate (one notary voting twice).
func LoadNotaries(dir string) ([]*Bundle, error) {
	bs, err := consensus.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]*Bundle, len(bs))
	for i, b := range bs {
		out[i] = bundleOf(b)
	}
	return out, nil
}

func bundleOf(b *consensus.Bundle) *Bundle {
	out := &Bundle{Version: b.Version, Name: b.Name, BundleLocation: b.BundleLocation, Region: b.Region,
		Hosts: make([]Host, len(b.Hosts))}
	for i, h := range b.Hosts {
		out.Hosts[i] = Host{Host: h.Host, SSLPort: h.SSLPort, HTTPPort: h.HTTPPort, Certificate: h.Certificate, V1Key: h.V1Key}
	}
	return out
}

// internal returns the notary client's checked copy of b.
func (b *Bundle) internal() (*consensus.Bundle, error) {
	out := &consensus.Bundle{Version: b.Version, Name: b.Name, BundleLocation: b.BundleLocation, Region: b.Region,
		Hosts: make([]consensus.Host, len(b.Hosts))}
	for i, h := range b.Hosts {
		out.Hosts[i] = consensus.Host{Host: h.Host, SSLPort: h.SSLPort, HTTPPort: h.HTTPPort, Certificate: h.Certificate, V1Key: h.V1Key}
	}
	if err := out.Check(); err != nil {
		return nil, err
	}
	return out, nil
}

// API is the notary wire API a Checker speaks.
type API string

// Notary APIs.
const (
	// APIAuto asks a notary host over v1 when its bundle pins a v1 key and
	// the certificate's SHA-256 is known, and over Convergence otherwise.
	APIAuto API = "auto"
	// APIConvergence is the Convergence API: SHA-1, RSA-signed histories.
	APIConvergence API = "convergence"
	// APIV1 is pkie's v1 API: SHA-256, SNI, Ed25519-signed, dated answers.
	APIV1 API = "v1"
)

// ParseAPI parses "auto", "convergence" or "v1"; "" is auto.
func ParseAPI(s string) (API, error) {
	a, err := consensus.ParseAPI(s)
	return API(a), err
}

// Result is a verdict's, or a policy's, conclusion.
type Result string

// Results.
const (
	Trusted      Result = "trusted"
	Untrusted    Result = "untrusted"
	Inconclusive Result = "inconclusive"
)

// PolicyKind names a policy's rule.
type PolicyKind string

// Policy kinds.
const (
	// Majority: more than half of the notaries that voted said yes.
	Majority PolicyKind = "majority"
	// Consensus: every notary that voted said yes.
	Consensus PolicyKind = "consensus"
	// Minority: at least one notary said yes.
	Minority PolicyKind = "minority"
	// Quorum: at least a fraction of the configured notaries said yes.
	Quorum PolicyKind = "quorum"
)

// Policy turns notary answers into a Result. The zero value is majority
// with no minimum duration and unreachable notaries standing aside.
// docs/guides/client.md gives each rule with examples.
type Policy struct {
	// Kind is the rule; "" is Majority.
	Kind PolicyKind
	// Quorum is, for Kind Quorum, the fraction of configured notaries
	// that must say yes, in (0, 1].
	Quorum float64
	// MinDuration is the Perspectives quorum duration: a yes counts only
	// if the notary has observed the fingerprint for at least this long;
	// a younger yes makes the verdict inconclusive at best.
	MinDuration time.Duration
	// UnreachableIsFailure makes every notary that stands aside count as
	// a no.
	UnreachableIsFailure bool
}

// ParsePolicy parses "majority", "consensus", "minority" or "quorum:Q" with
// 0 < Q <= 1 (e.g. "quorum:0.75").
func ParsePolicy(s string) (Policy, error) {
	p, err := consensus.ParsePolicy(s)
	return policyOf(p), err
}

// String renders the policy as ParsePolicy reads it.
func (p Policy) String() string { return p.internal().String() }

func (p Policy) internal() consensus.Policy {
	return consensus.Policy{Kind: consensus.Kind(p.Kind), Quorum: p.Quorum, MinDuration: p.MinDuration,
		UnreachableIsFailure: p.UnreachableIsFailure}
}

func policyOf(p consensus.Policy) Policy {
	return Policy{Kind: PolicyKind(p.Kind), Quorum: p.Quorum, MinDuration: p.MinDuration,
		UnreachableIsFailure: p.UnreachableIsFailure}
}

// Decision is the policy's result with the tally that produced it.
type Decision struct {
	// Result is the policy's conclusion on the notaries' answers alone.
	Result Result `json:"result"`
	// Reason says in one sentence how the tally gave the result.
	Reason string `json:"reason"`
	// Policy is the policy decided under, as ParsePolicy reads it.
	Policy string `json:"policy"`
	// Yes counts mature yes votes; Young yes votes observed for less than
	// MinDuration; No includes stand-asides when UnreachableIsFailure;
	// StandAside counts the notaries that did not vote.
	Yes        int `json:"yes"`
	Young      int `json:"young,omitempty"`
	No         int `json:"no"`
	StandAside int `json:"stand_aside"`
	// PinMismatch counts the stand-asides whose notary presented another
	// TLS certificate than its bundle pins.
	PinMismatch int `json:"pin_mismatch,omitempty"`
	// Unreachable counts the notaries that stood aside and, under
	// UnreachableIsFailure, were counted in No.
	Unreachable int `json:"unreachable_counted_as_no,omitempty"`
	// Configured counts the notaries asked.
	Configured int `json:"configured"`
	// Needed is, for a quorum, how many yes votes it required.
	Needed int `json:"needed,omitempty"`
}

// Noes says what the no votes were: notaries that saw a different
// certificate, and notaries that could not answer, counted as no by
// UnreachableIsFailure.
func (d Decision) Noes() string {
	return consensus.Decision{No: d.No, Unreachable: d.Unreachable}.Noes()
}

func decisionOf(d consensus.Decision) Decision {
	return Decision{Result: Result(d.Result), Reason: d.Reason, Policy: d.Policy, Yes: d.Yes, Young: d.Young, No: d.No,
		StandAside: d.StandAside, PinMismatch: d.PinMismatch, Unreachable: d.Unreachable,
		Configured: d.Configured, Needed: d.Needed}
}

// Vote is what one notary's answer counts as.
type Vote int

// Votes.
const (
	// StandAside: the notary did not vote (unreachable, busy, an answer
	// that failed verification or was too old…).
	StandAside Vote = iota
	// Yes: the notary's verified answer shows the client's certificate as
	// the one it currently sees.
	Yes
	// No: the notary's verified answer shows another certificate, or the
	// client's only as superseded.
	No
)

// String returns "yes", "no" or "stand-aside".
func (v Vote) String() string { return consensus.Vote(v).String() }

// MarshalJSON renders the vote as its name.
func (v Vote) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

// UnmarshalJSON reads a vote's name.
func (v *Vote) UnmarshalJSON(b []byte) error {
	var c consensus.Vote
	if err := c.UnmarshalJSON(b); err != nil {
		return err
	}
	*v = Vote(c)
	return nil
}

// HistoryEntry is one line of a notary's signed history for a target: a
// certificate and the span over which the notary saw it.
type HistoryEntry struct {
	// Fingerprint is the certificate's SHA-1, as Convergence names it.
	Fingerprint [20]byte `json:"-"`
	// Start and Finish are the first and the last time the notary saw it.
	Start  time.Time `json:"start"`
	Finish time.Time `json:"finish"`
}

// MarshalJSON renders the fingerprint the Convergence way (colon hex).
func (e HistoryEntry) MarshalJSON() ([]byte, error) { return consensus.Entry(e).MarshalJSON() }

// UnmarshalJSON reads what MarshalJSON writes.
func (e *HistoryEntry) UnmarshalJSON(b []byte) error { return (*consensus.Entry)(e).UnmarshalJSON(b) }

// Observed returns how long the notary saw the certificate.
func (e HistoryEntry) Observed() time.Duration { return e.Finish.Sub(e.Start) }

// NotaryAnswer is one notary's answer to one query, after its signature
// was verified against the key its bundle pins.
type NotaryAnswer struct {
	// Notary is the bundle's name, Host the host:port of the replica that
	// answered last, and Vote what the answer counts as.
	Notary string `json:"notary"`
	Host   string `json:"host"`
	Vote   Vote   `json:"vote"`
	// Status is the HTTP status, 0 if none was received.
	Status int `json:"status,omitempty"`
	// Reason says why the notary voted as it did, in a few words.
	Reason string `json:"reason"`
	// Observed is, for a yes, how long the notary's signed history shows
	// the client's certificate.
	Observed time.Duration `json:"observed_ns,omitempty"`
	// History is the notary's signed history for the target.
	History []HistoryEntry `json:"history,omitempty"`
	// Bounced says the answer was reached through another notary's
	// CONNECT relay (Config.BounceVia).
	Bounced bool `json:"bounced,omitempty"`
	// PinMismatch marks a stand-aside whose notary host was reached but
	// presented another TLS certificate than its bundle pins.
	PinMismatch bool `json:"pin_mismatch,omitempty"`
	// API is the wire API the answer came over: APIConvergence or APIV1
	// ("" if no request was made).
	API API `json:"api,omitempty"`
	// ObservedAt is, for a verified v1 answer, when the notary last saw
	// the target's current certificate, as it signed.
	ObservedAt time.Time `json:"observed_at,omitzero"`
	// RoundTrip is the wall time of the query, replicas included;
	// SigCheck the part of it spent verifying signatures.
	RoundTrip time.Duration `json:"round_trip_ns"`
	SigCheck  time.Duration `json:"sig_check_ns"`
}

func answerOf(a consensus.Answer) NotaryAnswer {
	out := NotaryAnswer{Notary: a.Notary, Host: a.Host, Vote: Vote(a.Vote), Status: a.Status, Reason: a.Reason,
		Observed: a.Observed, Bounced: a.Bounced, PinMismatch: a.PinMismatch, API: API(a.API),
		ObservedAt: a.ObservedAt, RoundTrip: a.RoundTrip, SigCheck: a.SigCheck}
	if a.History != nil {
		out.History = make([]HistoryEntry, len(a.History))
		for i, e := range a.History {
			out.History[i] = HistoryEntry(e)
		}
	}
	return out
}

func notaryError(i int, b *Bundle, err error) error {
	if b != nil && b.Name != "" {
		return fmt.Errorf("check: notary %d (%s): %w", i, b.Name, err)
	}
	return fmt.Errorf("check: notary %d: %w", i, err)
}
