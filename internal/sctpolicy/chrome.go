package sctpolicy

import (
	"crypto/x509"
	"fmt"
	"time"
)

// Chrome returns Chrome's CT policy as published in the Chrome
// Certificate Transparency Policy ("CT Compliant Certificates"):
//
// Embedded SCTs: N SCTs from distinct logs that are Qualified, Usable,
// ReadOnly or Retired at the time of check, N = 2 for a lifetime of at
// most 180 days and 3 beyond; at least one of them from a log Qualified,
// Usable or ReadOnly at the time of check; at least two distinct log
// operators among them.
//
// SCTs delivered via TLS (and, as Chrome before version 148 did, in a
// stapled OCSP response, held to the TLS criteria): two SCTs from logs
// Qualified, Usable or ReadOnly at the time of check, from two distinct
// operators.
//
// Operators are the list's operators, an SCT's being the log's operator at
// the SCT's time (previous_operators). An SCT from a Retired log counts
// only when the earliest SCT presented predates the retirement ("Important
// Notes": Chrome compares the earliest SCT, which covers a log retired
// while a certificate was being logged). Until 2026-04-15 the policy also
// required one SCT from an RFC 6962 log among those counted; a time of
// check before then applies that rule too.
func Chrome() Policy { return chrome{} }

type chrome struct{}

func (chrome) Name() string { return "Chrome" }

// rfc6962Until is when Chrome dropped the requirement of one SCT from an
// RFC 6962 log (Chrome CT policy, "Before April 15, 2026").
var rfc6962Until = time.Date(2026, 4, 15, 0, 0, 0, 0, time.UTC)

func (chrome) Evaluate(leaf *x509.Certificate, scts []Checked, now time.Time) Result {
	const name = "Chrome"
	if leaf == nil {
		return Result{Policy: name, Reason: "Chrome CT policy: no certificate"}
	}
	if len(scts) == 0 {
		return noSCT(name)
	}
	// The earliest valid SCT decides for every Retired log. Only SCTs
	// whose signature verified, from a listed log in a state that counts,
	// not dated in the future, take part: neither a forged SCT nor a
	// backdated one from a rejected log (say, after a key compromise) may
	// move the date back.
	var earliest time.Time
	for _, c := range scts {
		if c.SCT != nil && c.Log != nil && c.Err == nil && countingState(c.Log.State) && !c.SCT.Time().After(now.Add(ClockSkew)) {
			if t := c.SCT.Time(); earliest.IsZero() || t.Before(earliest) {
				earliest = t
			}
		}
	}
	days := lifetimeDays(leaf)
	need := 2
	if leaf.NotAfter.Sub(leaf.NotBefore) > 180*24*time.Hour {
		need = 3
	}
	needRFC := now.Before(rfc6962Until)

	embJ := make([]judged, len(scts))
	tlsJ := make([]judged, len(scts))
	nEmb, nTLS := 0, 0
	for i, c := range scts {
		embJ[i] = judge(i, c, leaf, now, earliest, true)
		tlsJ[i] = judge(i, c, leaf, now, time.Time{}, false)
		if c.SCT != nil && embedded(embJ[i]) {
			nEmb++
		} else if c.SCT != nil {
			nTLS++
		}
	}

	emb := count(embJ, embedded)
	embOK := emb.logs >= need && emb.current >= 1 && len(emb.operators) >= 2 && (!needRFC || emb.rfc6962 >= 1)
	if embOK {
		return Result{Policy: name, Compliant: true, Counted: emb.counted,
			Reason: fmt.Sprintf("Chrome CT policy: %s for a %d-day certificate (needs %d from distinct logs and 2 operators)",
				emb.have("embedded "), days, need)}
	}
	tls := count(tlsJ, notEmbedded)
	tlsOK := tls.logs >= 2 && len(tls.operators) >= 2 && (!needRFC || tls.rfc6962 >= 1)
	if tlsOK {
		return Result{Policy: name, Compliant: true, Counted: tls.counted,
			Reason: fmt.Sprintf("Chrome CT policy: %s delivered in TLS or OCSP (needs 2 from 2 distinct operators)", tls.have(""))}
	}

	// Not compliant: explain the criterion the certificate came closer
	// to, the embedded one unless only TLS or OCSP SCTs were delivered.
	if nEmb == 0 && nTLS > 0 {
		missing := "needs 2 SCTs from logs Qualified, Usable or ReadOnly now, of 2 distinct operators"
		if needRFC && tls.rfc6962 == 0 && tls.logs >= 2 && len(tls.operators) >= 2 {
			missing = "needs one of them from an RFC 6962 log (before 2026-04-15)"
		}
		return Result{Policy: name, Reason: fmt.Sprintf("Chrome CT policy: %s delivered in TLS or OCSP, %s%s",
			tls.have(""), missing, rejected(tlsJ, notEmbedded))}
	}
	var missing string
	switch {
	case emb.logs >= need && len(emb.operators) >= 2 && emb.current == 0:
		missing = "needs one of them from a log Qualified, Usable or ReadOnly now"
	case emb.logs >= need && len(emb.operators) >= 2:
		missing = "needs one of them from an RFC 6962 log (before 2026-04-15)"
	default:
		missing = fmt.Sprintf("needs %d SCTs from distinct logs and 2 distinct operators", need)
	}
	return Result{Policy: name, Reason: fmt.Sprintf("Chrome CT policy: %s for a %d-day certificate, %s%s",
		emb.have("embedded "), days, missing, rejected(embJ, anySource))}
}
