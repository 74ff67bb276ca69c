// Package sctpolicy decides whether a certificate's SCTs satisfy a
// browser's Certificate Transparency policy: Chrome's, Apple's, or "one"
// (a single valid SCT, for pkie deployments that run one log).
//
// A policy sees each SCT already checked against a log list (Checked: the
// log the SCT names, if the list has it, and whether its signature
// verified) and judges the rest: the log's state at the time of check,
// its temporal interval, the SCT's time against the log's retirement and
// the clock, how the SCT was delivered, how many distinct logs and
// operators stand behind the SCTs, and how many the certificate's
// lifetime requires. The Result says which SCTs it counted and, in one
// sentence, what satisfied the policy or what was missing.
package sctpolicy

import (
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
)

// Checked is one SCT as checked against a log list.
type Checked struct {
	SCT *sct.SCT
	Log *loglist.Log // nil: the SCT's log is not in the list
	Err error        // nil: the signature is valid; else why not
}

// Result is a policy's decision.
type Result struct {
	Policy    string // "Chrome", "Apple", "one"
	Compliant bool
	// Counted are indices into the Checked slice of the SCTs that satisfy
	// the policy: every SCT that counts toward the criterion met, one per
	// log (the first SCT of each log). Empty when not compliant.
	Counted []int
	Reason  string // what satisfied the policy, or what was missing, in one sentence
}

// Policy is a CT policy.
type Policy interface {
	Name() string
	// Evaluate judges scts for leaf at time now (the time of check).
	Evaluate(leaf *x509.Certificate, scts []Checked, now time.Time) Result
}

// ClockSkew is how far in the future an SCT's timestamp may be and still
// count: a log's clock and the client's differ a little.
const ClockSkew = 5 * time.Minute

// ByName returns the policy called name: "chrome", "apple" or "one".
func ByName(name string) (Policy, error) {
	switch strings.ToLower(name) {
	case "chrome":
		return Chrome(), nil
	case "apple":
		return Apple(), nil
	case "one":
		return One(), nil
	}
	return nil, fmt.Errorf("sctpolicy: unknown policy %q; want chrome, apple or one", name)
}

// An SCT the policy looked at: what it is worth, and why not if nothing.
type judged struct {
	i        int
	c        Checked
	valid    bool   // signature valid, log listed and in an acceptable state, in time
	why      string // why not valid
	current  bool   // the log is Qualified, Usable or ReadOnly at the time of check
	operator string // the log's operator at the SCT's time
}

// judge checks what every policy asks of one SCT, in the order that
// names the most fundamental fault: the log is unknown, the signature is
// bad, the log's state does not count, the SCT is from the future, the
// log does not take certificates expiring when leaf does, the SCT
// postdates the log's retirement. retiredBy is the time compared with a
// Retired log's retirement (Chrome compares the earliest SCT's time, not
// each SCT's own); zero means the SCT's own time.
func judge(i int, c Checked, leaf *x509.Certificate, now, retiredBy time.Time, allowRetired bool) judged {
	j := judged{i: i, c: c}
	s, l := c.SCT, c.Log
	switch {
	case s == nil:
		j.why = fmt.Sprintf("SCT %d is empty", i+1)
		return j
	case l == nil:
		j.why = fmt.Sprintf("SCT %d (%s) is from log %s, not in the log list", i+1, s.Source, loglist.ShortID(s.LogID))
		return j
	case c.Err != nil:
		j.why = fmt.Sprintf("SCT %d (%s) from %s has an invalid signature: %v", i+1, s.Source, l.Name(), c.Err)
		return j
	}
	name := fmt.Sprintf("SCT %d (%s) from %s", i+1, s.Source, l.Name())
	switch l.State {
	case loglist.Qualified, loglist.Usable, loglist.ReadOnly:
		j.current = true
	case loglist.Retired:
		if !allowRetired {
			j.why = fmt.Sprintf("%s does not count: the log is retired", name)
			return j
		}
	case "":
		j.why = fmt.Sprintf("%s does not count: the log has no state in the list", name)
		return j
	default:
		j.why = fmt.Sprintf("%s does not count: the log is %s", name, l.State)
		return j
	}
	t := s.Time()
	if t.After(now.Add(ClockSkew)) {
		j.why = fmt.Sprintf("%s is dated %s, in the future", name, t.UTC().Format(time.RFC3339))
		return j
	}
	if !l.Covers(leaf.NotAfter) {
		j.why = fmt.Sprintf("%s does not count: the log takes certificates expiring in [%s, %s), this one expires %s",
			name, day(l.NotAfterStart), day(l.NotAfterEnd), day(leaf.NotAfter))
		return j
	}
	if l.State == loglist.Retired {
		by := retiredBy
		if by.IsZero() {
			by = t
		}
		if !by.Before(l.StateSince) {
			j.why = fmt.Sprintf("%s does not count: it is not older than the log's retirement on %s", name, day(l.StateSince))
			return j
		}
	}
	j.valid = true
	j.operator = l.OperatorAt(t)
	return j
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// tally counts a set of valid SCTs: distinct logs (the first SCT of each
// is the one counted), distinct operators, and which of them are from a
// log current at the time of check or an RFC 6962 log.
type tally struct {
	counted   []int
	logs      int
	operators map[string]int // SCTs counted per operator
	current   int
	rfc6962   int
}

func count(js []judged, keep func(judged) bool) tally {
	t := tally{operators: map[string]int{}}
	seen := map[[32]byte]bool{}
	for _, j := range js {
		if !j.valid || !keep(j) || seen[j.c.Log.ID] {
			continue
		}
		seen[j.c.Log.ID] = true
		t.counted = append(t.counted, j.i)
		t.logs++
		t.operators[j.operator]++
		if j.current {
			t.current++
		}
		if j.c.Log.Kind == loglist.RFC6962 {
			t.rfc6962++
		}
	}
	return t
}

// cappedLogs is the number of logs that count when at most perOperator
// SCTs of one operator count (Apple's table).
func (t tally) cappedLogs(perOperator int) int {
	n := 0
	for _, k := range t.operators {
		n += min(k, perOperator)
	}
	return n
}

// rejected is the reason of the first SCT among js that keep selects and
// that did not count, with how many others did not count either.
func rejected(js []judged, keep func(judged) bool) string {
	first, others := "", 0
	for _, j := range js {
		if j.valid || (j.c.SCT != nil && !keep(j)) {
			continue
		}
		if first == "" {
			first = j.why
		} else {
			others++
		}
	}
	switch {
	case first == "":
		return ""
	case others == 0:
		return " (" + first + ")"
	case others == 1:
		return fmt.Sprintf(" (%s; 1 other SCT did not count)", first)
	}
	return fmt.Sprintf(" (%s; %d other SCTs did not count)", first, others)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// have describes a tally: "2 valid SCTs from 2 logs of 1 operator".
func (t tally) have(kind string) string {
	if t.logs == 0 {
		return "no valid " + kind + "SCT"
	}
	return fmt.Sprintf("%s from %s of %s", plural(t.logs, "valid "+kind+"SCT", "valid "+kind+"SCTs"),
		plural(t.logs, "log", "logs"), plural(len(t.operators), "operator", "operators"))
}

func embedded(j judged) bool    { return j.c.SCT != nil && j.c.SCT.Source == sct.Embedded }
func notEmbedded(j judged) bool { return j.c.SCT != nil && j.c.SCT.Source != sct.Embedded }
func anySource(judged) bool     { return true }

func noSCT(policy string) Result {
	return Result{Policy: policy, Reason: policy + " CT policy: no SCT (embedded, TLS or OCSP)"}
}

// lifetimeDays is a certificate's validity period in days as RFC 5280
// §4.1.2.5 defines it (notBefore through notAfter inclusive) and Apple's
// policy counts it: a day is 86,400 seconds and any part of one more is
// one more day.
func lifetimeDays(leaf *x509.Certificate) int {
	d := leaf.NotAfter.Sub(leaf.NotBefore) + time.Second
	days := int(d / (24 * time.Hour))
	if d%(24*time.Hour) != 0 {
		days++
	}
	return days
}

// countingState reports whether an SCT from a log in state st can count
// under some policy: Qualified, Usable, ReadOnly or Retired.
func countingState(st loglist.State) bool {
	switch st {
	case loglist.Qualified, loglist.Usable, loglist.ReadOnly, loglist.Retired:
		return true
	}
	return false
}
