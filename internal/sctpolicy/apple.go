package sctpolicy

import (
	"crypto/x509"
	"fmt"
	"time"
)

// Apple returns Apple's CT policy as published in "Apple's Certificate
// Transparency policy" (support.apple.com/103214, "Policy requirements"):
// at least two SCTs from logs once or currently approved at the time of
// check, and either
//
//   - at least two SCTs from currently approved logs, one of them
//     presented in the TLS extension or a stapled OCSP response; or
//   - at least one embedded SCT from a currently approved log, and
//     embedded SCTs from distinct once or currently approved logs in the
//     number the certificate's lifetime requires: 2 for 180 days or less
//     (at most 1 per log operator counting), 3 for 181 to 398 days (at
//     most 2 per operator counting); a longer lifetime cannot comply;
//
// and at least one SCT from a log compliant with RFC 6962.
//
// "Currently approved" is taken as Qualified, Usable or ReadOnly in the
// list; "once approved" adds Retired, for an SCT older than the
// retirement. The lifetime is counted as the policy says: notBefore
// through notAfter inclusive, in days of 86,400 seconds, a part of a day
// counting as one. The older table for certificates issued before
// 2021-04-21 is not implemented: such certificates have all expired.
func Apple() Policy { return apple{} }

type apple struct{}

func (apple) Name() string { return "Apple" }

func (apple) Evaluate(leaf *x509.Certificate, scts []Checked, now time.Time) Result {
	const name = "Apple"
	if leaf == nil {
		return Result{Policy: name, Reason: "Apple CT policy: no certificate"}
	}
	if len(scts) == 0 {
		return noSCT(name)
	}
	js := make([]judged, len(scts))
	for i, c := range scts {
		js[i] = judge(i, c, leaf, now, time.Time{}, true)
	}
	days := lifetimeDays(leaf)

	// TLS or OCSP: two SCTs from currently approved logs, one of them not
	// embedded. The non-embedded SCTs come first so that the one counted
	// for a log delivered both ways is the one delivered in the handshake.
	ordered := make([]judged, 0, len(js))
	for _, j := range js {
		if notEmbedded(j) {
			ordered = append(ordered, j)
		}
	}
	for _, j := range js {
		if !notEmbedded(j) {
			ordered = append(ordered, j)
		}
	}
	cur := count(ordered, func(j judged) bool { return j.current })
	curTLS := count(ordered, func(j judged) bool { return j.current && notEmbedded(j) })
	if cur.logs >= 2 && curTLS.logs >= 1 && cur.rfc6962 >= 1 {
		return Result{Policy: name, Compliant: true, Counted: cur.counted,
			Reason: fmt.Sprintf("Apple CT policy: %s, %d of them in TLS or OCSP (needs 2, one in TLS or OCSP, one from an RFC 6962 log)",
				cur.have(""), curTLS.logs)}
	}

	need, perOp := 2, 1
	if days > 180 {
		need, perOp = 3, 2
	}
	emb := count(js, embedded)
	if days <= 398 && emb.cappedLogs(perOp) >= need && emb.current >= 1 && emb.rfc6962 >= 1 {
		return Result{Policy: name, Compliant: true, Counted: emb.counted,
			Reason: fmt.Sprintf("Apple CT policy: %s for a %d-day certificate (needs %d from distinct logs, at most %d per operator counting, one from an RFC 6962 log)",
				emb.have("embedded "), days, need, perOp)}
	}

	if curTLS.logs >= 1 && emb.logs == 0 {
		missing := "needs 2 SCTs from currently approved logs, one in TLS or OCSP"
		if cur.logs >= 2 {
			missing = "needs one of them from an RFC 6962 log"
		}
		return Result{Policy: name, Reason: fmt.Sprintf("Apple CT policy: %s, %s%s", cur.have(""), missing, rejected(js, anySource))}
	}
	var missing string
	switch {
	case days > 398:
		missing = "no number of SCTs suffices for a lifetime over 398 days"
	case emb.cappedLogs(perOp) < need:
		missing = fmt.Sprintf("needs %d from distinct logs with at most %d per operator counting", need, perOp)
	case emb.current == 0:
		missing = "needs one of them from a currently approved log"
	default:
		missing = "needs one of them from an RFC 6962 log"
	}
	return Result{Policy: name, Reason: fmt.Sprintf("Apple CT policy: %s for a %d-day certificate, %s%s",
		emb.have("embedded "), days, missing, rejected(js, anySource))}
}
