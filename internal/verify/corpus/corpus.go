// Package corpus runs every verification back end over the same chains and
// reports where they disagree, with the expected verdict and with each
// other.
//
// Differential testing needs no oracle of its own: a chain that crypto/x509,
// OpenSSL and webpki judge differently shows that at least one of them is
// wrong, or that they follow different rules. Where a corpus states the
// right answer (the testbed's known cases, Netflix BetterTLS, x509-limbo),
// each back end is also scored against it; where it does not (a pkie scan
// file of real sites), only the back ends' agreement is measured.
//
// A disagreement is either a documented difference between the libraries —
// OpenSSL falls back to the subject common name for the hostname, for
// example — which [Classify] recognises from the case and the answers, or
// it is listed as unexplained: a possible bug in a back end or in pkie's
// adapter for it.
package corpus

import (
	"fmt"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// Expect is a case's expected verdict.
type Expect string

// Expectations. Unknown cases (real sites from a scan) are compared only
// between back ends.
const (
	Accept  Expect = "accept"
	Reject  Expect = "reject"
	Unknown Expect = ""
)

// Case is one chain to verify and what is expected of it.
type Case struct {
	// ID is unique within the corpus: the source's own identifier where
	// it has one (BetterTLS's test number, limbo's id).
	ID string `json:"id"`
	// Source names the corpus: known, bettertls/pathbuilding,
	// bettertls/nameconstraints, limbo, scan.
	Source  string         `json:"source"`
	Roots   [][]byte       `json:"-"`
	Chain   [][]byte       `json:"-"`
	Host    string         `json:"host,omitempty"`
	Time    time.Time      `json:"time"`
	Purpose verify.Purpose `json:"purpose"`
	Expect  Expect         `json:"expect,omitempty"`
	// ExpectCode, when set, is the code every back end should give,
	// except those named in Exceptions.
	ExpectCode verify.Code `json:"expect_code,omitempty"`
	// Exceptions are back ends that legitimately give another code for
	// this case, each with the reason.
	Exceptions []Exception `json:"exceptions,omitempty"`
	// Soft marks a case whose expectation the source itself does not
	// insist on (BetterTLS's "failure is a warning"): a back end that
	// differs is counted as soft, not as disagreeing.
	Soft bool   `json:"soft,omitempty"`
	Note string `json:"note,omitempty"`
}

// Exception is a back end's legitimate departure from a case's ExpectCode.
type Exception struct {
	Backend string      `json:"backend"`
	Code    verify.Code `json:"code"`
	Why     string      `json:"why"`
}

// WantCode is the code back end name should give for c, or "" when c
// names none.
func (c *Case) WantCode(name string) verify.Code {
	for _, e := range c.Exceptions {
		if e.Backend == name {
			return e.Code
		}
	}
	return c.ExpectCode
}

// Request is c as a back end is asked it. The time is truncated to the
// second, the resolution of the helper protocol, so every back end is
// asked about the same instant.
func (c *Case) Request() *verify.Request {
	p := c.Purpose
	if p == "" {
		p = verify.Server
	}
	return &verify.Request{Roots: c.Roots, Chain: c.Chain, Host: c.Host, Time: c.Time.Truncate(time.Second), Purpose: p}
}

// Skip is a case a corpus holds but pkie cannot put to the back ends, and
// why; skipped cases are counted, never silently dropped.
type Skip struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Corpus is a set of cases and those skipped while loading it.
type Corpus struct {
	Cases   []Case `json:"cases"`
	Skipped []Skip `json:"skipped,omitempty"`
}

// Add appends o's cases and skips to c.
func (c *Corpus) Add(o *Corpus) {
	c.Cases = append(c.Cases, o.Cases...)
	c.Skipped = append(c.Skipped, o.Skipped...)
}

// Sample keeps every nth case (n <= 1 keeps all), the first included:
// a deterministic subset the same on every run.
func (c *Corpus) Sample(n int) {
	if n <= 1 {
		return
	}
	var out []Case
	for i := 0; i < len(c.Cases); i += n {
		out = append(out, c.Cases[i])
	}
	c.Cases = out
}

func caseID(source string, n any) string { return fmt.Sprintf("%s#%v", source, n) }
