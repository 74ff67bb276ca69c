package consensus

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Vote is what one notary's answer counts as.
type Vote int

// Votes.
const (
	StandAside Vote = iota // did not vote: unreachable, 503, invalid answer…
	Yes                    // Convergence 200 listing the fingerprint as current, or v1 "match": true; verified
	No                     // Convergence 409 or 200 listing it only as superseded, or v1 "match": false; verified
)

func (v Vote) String() string {
	switch v {
	case Yes:
		return "yes"
	case No:
		return "no"
	}
	return "stand-aside"
}

// MarshalJSON renders the vote as its name.
func (v Vote) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

// UnmarshalJSON reads a vote's name.
func (v *Vote) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	switch s {
	case "yes":
		*v = Yes
	case "no":
		*v = No
	case "stand-aside":
		*v = StandAside
	default:
		return fmt.Errorf("unknown vote %q", s)
	}
	return nil
}

// Answer is one notary's answer to one query, after verification.
type Answer struct {
	Notary string `json:"notary"` // bundle name
	Host   string `json:"host"`   // host:port of the replica that answered last
	Vote   Vote   `json:"vote"`
	Status int    `json:"status,omitempty"` // HTTP status, 0 if none was received
	Reason string `json:"reason"`
	// Observed is, for a yes, how long the notary's signed history shows
	// the client's fingerprint (finish - start).
	Observed time.Duration `json:"observed_ns,omitempty"`
	History  []Entry       `json:"history,omitempty"`
	Bounced  bool          `json:"bounced,omitempty"` // reached through another notary's CONNECT relay
	// PinMismatch marks a stand-aside whose notary host was reached but
	// presented another TLS certificate than its bundle pins.
	PinMismatch bool `json:"pin_mismatch,omitempty"`
	// API is the wire API the answer came over: "convergence" or "v1"
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

// Result is a policy's conclusion.
type Result string

// Results.
const (
	Trusted      Result = "trusted"
	Untrusted    Result = "untrusted"
	Inconclusive Result = "inconclusive"
)

// Kind names a policy rule.
type Kind string

// Policy kinds.
const (
	Majority  Kind = "majority"
	Consensus Kind = "consensus"
	Minority  Kind = "minority"
	Quorum    Kind = "quorum"
)

// Policy turns notary answers into a Result. The zero value is majority
// with no minimum duration and unreachable notaries standing aside.
type Policy struct {
	Kind   Kind
	Quorum float64 // for Kind Quorum: the fraction of configured notaries, in (0, 1]
	// MinDuration is the Perspectives quorum duration: a yes counts only if
	// the notary has observed the fingerprint for at least this long.
	MinDuration time.Duration
	// UnreachableIsFailure makes every notary that stands aside count as a no.
	UnreachableIsFailure bool
}

// ParsePolicy parses "majority", "consensus", "minority" or "quorum:Q" with
// 0 < Q <= 1 (e.g. "quorum:0.75").
func ParsePolicy(s string) (Policy, error) {
	name, arg, hasArg := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	switch Kind(name) {
	case Majority, Consensus, Minority:
		if hasArg {
			return Policy{}, fmt.Errorf("policy %q takes no argument", name)
		}
		return Policy{Kind: Kind(name)}, nil
	case Quorum:
		if !hasArg {
			return Policy{}, fmt.Errorf("policy quorum needs a fraction, e.g. quorum:0.75")
		}
		q, err := strconv.ParseFloat(arg, 64)
		if err != nil || math.IsNaN(q) || q <= 0 || q > 1 {
			return Policy{}, fmt.Errorf("quorum fraction %q is not a number in (0, 1]", arg)
		}
		return Policy{Kind: Quorum, Quorum: q}, nil
	}
	return Policy{}, fmt.Errorf("unknown policy %q (want majority, consensus, minority or quorum:Q)", s)
}

// String renders the policy as ParsePolicy reads it.
func (p Policy) String() string {
	k := p.Kind
	if k == "" {
		k = Majority
	}
	if k == Quorum {
		return "quorum:" + strconv.FormatFloat(p.Quorum, 'g', -1, 64)
	}
	return string(k)
}

// Decision is a policy's result with the tally that produced it.
type Decision struct {
	Result Result `json:"result"`
	Reason string `json:"reason"`
	Policy string `json:"policy"`
	// Yes counts mature yes votes; Young yes votes observed for less than
	// MinDuration; No includes stand-asides when UnreachableIsFailure.
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
	Configured  int `json:"configured"`
	Needed      int `json:"needed,omitempty"` // quorum only: yes votes required
}

// Decide applies the policy to one answer per configured notary.
//
// Notaries that voted are those that said yes or no (after
// UnreachableIsFailure turned stand-asides into noes). With nobody voting
// the result is inconclusive. Otherwise the rule is applied three ways:
// if it fails even counting young yes votes as yes, and (quorum only) even
// counting every stand-aside as yes, the result is untrusted; if it fails
// only because of stand-asides (quorum) or young votes, inconclusive;
// otherwise trusted.
func (p Policy) Decide(answers []Answer) Decision {
	d := Decision{Policy: p.String(), Configured: len(answers)}
	for _, a := range answers {
		switch {
		case a.Vote == Yes && p.MinDuration > 0 && a.Observed < p.MinDuration:
			d.Young++
		case a.Vote == Yes:
			d.Yes++
		case a.Vote == No:
			d.No++
		case p.UnreachableIsFailure:
			d.No++
			d.Unreachable++
		default:
			d.StandAside++
			if a.PinMismatch {
				d.PinMismatch++
			}
		}
	}
	voters := d.Yes + d.Young + d.No
	if p.Kind == Quorum {
		d.Needed = int(math.Ceil(p.Quorum*float64(d.Configured) - 1e-9))
		if d.Needed < 1 {
			d.Needed = 1
		}
	}
	pass := func(yes int) bool {
		switch p.Kind {
		case Consensus:
			return yes == voters
		case Minority:
			return yes >= 1
		case Quorum:
			return yes >= d.Needed
		}
		return 2*yes > voters
	}
	switch {
	case voters == 0:
		d.Result, d.Reason = Inconclusive, fmt.Sprintf("no notary voted (%d configured, %d stood aside)", d.Configured, d.StandAside)
		if d.PinMismatch > 0 {
			d.Reason = fmt.Sprintf("no notary voted (%d configured, %d stood aside, %d of them on a pin mismatch: reached, but not with the certificate its bundle pins)", d.Configured, d.StandAside, d.PinMismatch)
		}
	case !pass(d.Yes+d.Young) && !(p.Kind == Quorum && pass(d.Yes+d.Young+d.StandAside)):
		d.Result, d.Reason = Untrusted, p.failure(d, voters)
	case !pass(d.Yes + d.Young):
		d.Result = Inconclusive
		d.Reason = fmt.Sprintf("%s needs %d yes of %d configured notaries; %d said yes and %d stood aside", d.Policy, d.Needed, d.Configured, d.Yes+d.Young, d.StandAside)
	case !pass(d.Yes):
		d.Result = Inconclusive
		d.Reason = fmt.Sprintf("%s holds only counting %d notaries that have seen this certificate for less than %s", d.Policy, d.Young, p.MinDuration)
	default:
		d.Result = Trusted
		d.Reason = fmt.Sprintf("%s: %d of %d voting notaries said yes", d.Policy, d.Yes, voters)
		if p.Kind == Quorum {
			d.Reason = fmt.Sprintf("%s: %d yes of %d configured notaries (needed %d)", d.Policy, d.Yes, d.Configured, d.Needed)
		}
	}
	return d
}

func (p Policy) failure(d Decision, voters int) string {
	var s string
	switch p.Kind {
	case Consensus:
		s = fmt.Sprintf("consensus: %d of %d voting notaries said no", d.No, voters)
	case Minority:
		s = fmt.Sprintf("minority: none of %d voting notaries saw this certificate", voters)
	case Quorum:
		s = fmt.Sprintf("%s: %d yes of %d configured notaries, %d needed", d.Policy, d.Yes+d.Young, d.Configured, d.Needed)
	default:
		s = fmt.Sprintf("majority: only %d of %d voting notaries said yes", d.Yes+d.Young, voters)
	}
	return s + "; " + d.Noes()
}

// Noes says what the no votes were: notaries that saw a different
// certificate, and notaries that could not answer, counted as no by
// UnreachableIsFailure.
func (d Decision) Noes() string {
	var parts []string
	if n := d.No - d.Unreachable; n > 0 || d.Unreachable == 0 {
		parts = append(parts, fmt.Sprintf("%d saw a different certificate", n))
	}
	if d.Unreachable > 0 {
		parts = append(parts, fmt.Sprintf("%d could not be reached or could not vouch, each counted as a no (unreachable-is-failure)", d.Unreachable))
	}
	return strings.Join(parts, " and ")
}
