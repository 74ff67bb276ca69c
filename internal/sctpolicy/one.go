package sctpolicy

import (
	"crypto/x509"
	"fmt"
	"time"
)

// One returns the policy "one": at least one valid SCT, delivered any
// way, from a listed log that is Qualified, Usable or ReadOnly at the time
// of check. It suits a pkie deployment whose certificates go to the one
// log it runs; it is not a browser's policy, and a single log operator
// can hide a certificate from everyone else.
func One() Policy { return one{} }

type one struct{}

func (one) Name() string { return "one" }

func (one) Evaluate(leaf *x509.Certificate, scts []Checked, now time.Time) Result {
	const name = "one"
	if leaf == nil {
		return Result{Policy: name, Reason: "one-SCT policy: no certificate"}
	}
	if len(scts) == 0 {
		return Result{Policy: name, Reason: "one-SCT policy: no SCT (embedded, TLS or OCSP)"}
	}
	js := make([]judged, len(scts))
	for i, c := range scts {
		js[i] = judge(i, c, leaf, now, time.Time{}, false)
	}
	t := count(js, anySource)
	if t.logs >= 1 {
		return Result{Policy: name, Compliant: true, Counted: t.counted,
			Reason: fmt.Sprintf("one-SCT policy: %s (needs 1 from a log Qualified, Usable or ReadOnly now)", t.have(""))}
	}
	return Result{Policy: name, Reason: "one-SCT policy: no valid SCT from a log Qualified, Usable or ReadOnly now" + rejected(js, anySource)}
}
