// Package verify runs one certificate chain through several path-validation
// libraries behind one contract, so their verdicts can be compared case by
// case and the time each spends can be split into the same phases.
//
// A back end is given trust anchors, the chain a peer presented, a hostname,
// a verification time and a purpose, and answers valid or invalid with a
// reason in its own words, a [Code] in pkie's common words, and the time it
// spent building its trust store (Roots), turning the chain into its own
// types (Chain), building and checking a path (Verify) and matching the
// hostname (Hostname). The phases follow the Servo certificate-verification
// experiment (OpenSSL against rustls/webpki), which timed the same steps
// inside a browser.
//
// Go's crypto/x509 runs in process ([NewGo]). Libraries in other languages
// run as helper programs that speak a JSON-lines protocol on their standard
// input and output ([StartHelper]; docs/formats/notary-and-tools.md, "Verifier helper
// protocol"): OpenSSL's libcrypto (C) and rustls-webpki (Rust). Phases are
// measured inside each back end, so process and pipe costs are not in them.
package verify

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Purpose is what the leaf must be fit for.
type Purpose string

// Purposes.
const (
	Server Purpose = "server" // TLS server authentication
	Client Purpose = "client" // TLS client authentication
)

// Request is one verification.
type Request struct {
	// Roots are the trust anchors, DER. One that does not parse is
	// skipped and counted in Result.RootsSkipped.
	Roots [][]byte
	// Chain is what the peer presented, DER, leaf first; the rest are
	// untrusted candidates for path building in any order.
	Chain [][]byte
	// Host is a DNS name or an IP literal the leaf must be valid for;
	// empty skips the hostname check.
	Host string
	// Time is the verification time.
	Time time.Time
	// Purpose defaults to Server.
	Purpose Purpose
}

// Limits on a request, the same for every back end and enforced before
// one is asked (the helpers enforce them too).
const (
	MaxRoots     = 4096
	MaxChain     = 64
	MaxCertBytes = 64 << 10
)

// Check reports what is wrong with r before any back end sees it.
func (r *Request) Check() error {
	switch {
	case len(r.Roots) == 0:
		return errors.New("verify: no trust anchors")
	case len(r.Roots) > MaxRoots:
		return fmt.Errorf("verify: %d trust anchors (at most %d)", len(r.Roots), MaxRoots)
	case len(r.Chain) == 0:
		return errors.New("verify: no certificate to verify")
	case len(r.Chain) > MaxChain:
		return fmt.Errorf("verify: chain of %d certificates (at most %d)", len(r.Chain), MaxChain)
	case r.Time.IsZero():
		return errors.New("verify: no verification time")
	case r.Time.Unix() < 0:
		return fmt.Errorf("verify: verification time %v is before 1970", r.Time.UTC())
	}
	switch r.Purpose {
	case "", Server, Client:
	default:
		return fmt.Errorf("verify: unknown purpose %q (want server or client)", r.Purpose)
	}
	for i, c := range r.Roots {
		if len(c) == 0 || len(c) > MaxCertBytes {
			return fmt.Errorf("verify: root %d is %d bytes (1 to %d)", i, len(c), MaxCertBytes)
		}
	}
	for i, c := range r.Chain {
		if len(c) == 0 || len(c) > MaxCertBytes {
			return fmt.Errorf("verify: chain[%d] is %d bytes (1 to %d)", i, len(c), MaxCertBytes)
		}
	}
	return nil
}

// Code is an outcome in words every back end shares; docs/formats/notary-and-tools.md
// defines each.
type Code string

// Codes.
const (
	OK             Code = "ok"
	Expired        Code = "expired"
	NotYetValid    Code = "not_yet_valid"
	UnknownIssuer  Code = "unknown_issuer"
	BadSignature   Code = "bad_signature"
	NameMismatch   Code = "name_mismatch"
	NameConstraint Code = "name_constraints"
	PathLength     Code = "path_length"
	NotCA          Code = "not_ca"
	BadUsage       Code = "bad_usage"
	Malformed      Code = "malformed"
	Unsupported    Code = "unsupported"
	Limits         Code = "limits"
	Other          Code = "other"
)

// Codes lists every Code in a stable order, OK first.
var Codes = []Code{OK, Expired, NotYetValid, UnknownIssuer, BadSignature, NameMismatch,
	NameConstraint, PathLength, NotCA, BadUsage, Malformed, Unsupported, Limits, Other}

// Known reports whether c is one of Codes.
func (c Code) Known() bool {
	for _, k := range Codes {
		if c == k {
			return true
		}
	}
	return false
}

// Phases is the time a back end spent in each step of one verification.
type Phases struct {
	Roots    time.Duration `json:"roots_ns"`    // building the trust store
	Chain    time.Duration `json:"chain_ns"`    // parsing the presented chain
	Parallel time.Duration `json:"parallel_ns"` // go-parallel only: the path's signatures, checked concurrently
	Verify   time.Duration `json:"verify_ns"`   // path building, signatures, policy
	Hostname time.Duration `json:"hostname_ns"` // matching Host; 0 when not checked
}

// Total is the sum of the phases.
func (p Phases) Total() time.Duration {
	return p.Roots + p.Chain + p.Parallel + p.Verify + p.Hostname
}

// Result is one back end's answer.
type Result struct {
	Backend string `json:"backend"`
	Valid   bool   `json:"valid"`
	Code    Code   `json:"code"`
	// Reason is the library's own words.
	Reason string `json:"reason"`
	// Depth is the number of certificates on the path built, root
	// included, when Valid.
	Depth        int    `json:"depth"`
	RootsSkipped int    `json:"roots_skipped"`
	Phases       Phases `json:"phases"`
	// RoundTrip is pkie's wall time for the whole call, for helpers the
	// exchange over the pipe included.
	RoundTrip time.Duration `json:"round_trip_ns"`
}

// Backend is one path-validation library.
type Backend interface {
	// Name is the back end's short name: go, go-parallel, openssl, webpki.
	Name() string
	// Library names the library and its version as it reports them.
	Library() string
	// Verify answers one request. An error means no verdict: the
	// request was refused, or the back end failed.
	Verify(ctx context.Context, r *Request) (Result, error)
	// Close releases the back end (ends a helper process).
	Close() error
}
