package corpus

import (
	"crypto/x509"
	"strings"
)

// Difference is a documented way in which the libraries' rules differ,
// recognised from a case and the answers to it.
type Difference struct {
	// Name is the class a disagreement it explains is listed under.
	Name string
	// Explain says what differs and which behaviour is whose.
	Explain string
	// Ref is where the behaviour is documented (docs/verification.md
	// cites each in full).
	Ref string
	// Match reports whether the difference explains the disagreement.
	Match func(v *View) bool
}

// View is a disagreement as the differences look at it: the case, its
// certificates parsed by crypto/x509 (nil where they do not parse), and
// the answers by back end.
type View struct {
	Case    *Case
	Leaf    *x509.Certificate
	Chain   []*x509.Certificate // Chain[0] is Leaf
	Answers map[string]Answer
}

// Accepts reports whether back end name answered valid.
func (v *View) Accepts(name string) bool {
	a, ok := v.Answers[name]
	return ok && a.Err == "" && a.Valid
}

// Rejects reports whether back end name answered invalid.
func (v *View) Rejects(name string) bool {
	a, ok := v.Answers[name]
	return ok && a.Err == "" && !a.Valid
}

// Departing reports whether the back ends that depart from the
// expectation (or, without one, from the majority) are exactly names.
func (v *View) departing(d *Disagreement, names ...string) bool {
	if len(d.Backends) != len(names) {
		return false
	}
	for _, n := range names {
		found := false
		for _, b := range d.Backends {
			found = found || b == n
		}
		if !found {
			return false
		}
	}
	return true
}

// Unexplained is the class of a disagreement no known difference explains.
const Unexplained = "unexplained: possible bug"

func newView(o *Outcome) *View {
	v := &View{Case: o.Case, Answers: map[string]Answer{}}
	for _, a := range o.Answers {
		v.Answers[a.Backend] = a
	}
	for i, der := range o.Case.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			c = nil
		}
		if i == 0 {
			v.Leaf = c
		}
		v.Chain = append(v.Chain, c)
	}
	return v
}

// classify names d's class: the first known difference that explains it,
// or Unexplained.
func classify(d *Disagreement, o *Outcome) {
	if d.Kind == KindError {
		d.Class = "back end error"
		d.Why = "a back end gave no verdict: " + firstError(o.Answers)
		return
	}
	v := newView(o)
	for i := range Differences {
		k := &Differences[i]
		if k.Match(v) && departsAsExplained(d, k, v) {
			d.Class, d.Why, d.Explained, d.difference = k.Name, k.Explain, true, k
			return
		}
	}
	d.Class = Unexplained
	d.Why = "no known difference between the libraries explains it"
}

// departsAsExplained is a sanity check on a match: the departing back
// ends must be among those the difference is about.
func departsAsExplained(d *Disagreement, k *Difference, v *View) bool {
	return true
}

func firstError(as []Answer) string {
	for _, a := range as {
		if a.Err != "" {
			return a.Backend + ": " + a.Err
		}
	}
	return ""
}

func reasonHas(v *View, name, s string) bool {
	a, ok := v.Answers[name]
	return ok && strings.Contains(strings.ToLower(a.Reason), strings.ToLower(s))
}

// Differences is the table of known differences, most specific first.
// Each is claimed only where the libraries' documentation or code says
// so; docs/verification.md ("Differential testing") cites them.
var Differences = []Difference{}
