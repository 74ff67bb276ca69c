package corpus

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pkie/pkie/internal/termtext"
)

// Tally counts one back end's answers against the expectations.
type Tally struct {
	// Cases answered or not.
	Cases int `json:"cases"`
	// Agree: the verdict is the expected one and, where a code is
	// expected, so is the code.
	Agree int `json:"agree"`
	// Disagree: the verdict is not the expected one, on a case that
	// insists on it.
	Disagree int `json:"disagree"`
	// CodeDiffers: the right verdict with another code than expected.
	CodeDiffers int `json:"code_differs"`
	// Soft: the verdict is not the expected one on a case whose source
	// accepts either (BetterTLS's warnings).
	Soft int `json:"soft"`
	// Errors: no verdict at all.
	Errors int `json:"errors"`
	// Unexpected: cases without an expectation (a scan), answered.
	Unexpected int `json:"no_expectation"`
	// Accepted counts valid verdicts, whatever was expected.
	Accepted int `json:"accepted"`
	// WithMajority counts verdicts the same as the majority of the back
	// ends' (a tie has no majority): agreement where nothing is expected.
	WithMajority int `json:"with_majority"`
}

// MajorityRate is the share of cases on which the back end's verdict was
// the majority's.
func (t Tally) MajorityRate() float64 {
	if t.Cases == 0 {
		return 0
	}
	return float64(t.WithMajority) / float64(t.Cases)
}

// Rate is the share of the cases with an expectation on which the back
// end agreed with it, soft cases counted as agreeing.
func (t Tally) Rate() float64 {
	n := t.Cases - t.Unexpected
	if n == 0 {
		return 0
	}
	return float64(t.Agree+t.Soft) / float64(n)
}

// BackendReport is one back end's figures.
type BackendReport struct {
	Name     string           `json:"name"`
	Library  string           `json:"library,omitempty"`
	Total    Tally            `json:"total"`
	BySource map[string]Tally `json:"by_source"`
}

// Pair is how often two back ends gave the same answer.
type Pair struct {
	A string `json:"a"`
	B string `json:"b"`
	// Compared: cases both answered.
	Compared    int `json:"compared"`
	SameVerdict int `json:"same_verdict"`
	// SameCode: same verdict and same code.
	SameCode int `json:"same_code"`
}

// Disagreement is a case on which some back end departed from the
// expectation or from another back end.
type Disagreement struct {
	ID         string   `json:"id"`
	Source     string   `json:"source"`
	Host       string   `json:"host,omitempty"`
	Purpose    string   `json:"purpose"`
	Expect     Expect   `json:"expect,omitempty"`
	ExpectCode string   `json:"expect_code,omitempty"`
	Soft       bool     `json:"soft,omitempty"`
	Note       string   `json:"note,omitempty"`
	Answers    []Answer `json:"answers"`
	Kind       string   `json:"kind"`
	Class      string   `json:"class"`
	Explained  bool     `json:"explained"`
	Why        string   `json:"why"`
	Backends   []string `json:"departing"`
}

// Kinds of disagreement.
const (
	KindVerdict = "verdict" // a back end's verdict is not the expected one
	KindSoft    = "soft"    // the same, on a case that allows it
	KindCode    = "code"    // right verdict, unexpected code
	KindBetween = "between" // no expectation; the back ends' verdicts differ
	KindError   = "error"   // a back end gave no verdict
)

// Report is the outcome of a run.
type Report struct {
	Cases    int             `json:"cases"`
	Sources  map[string]int  `json:"sources"`
	Backends []BackendReport `json:"backends"`
	Pairs    []Pair          `json:"pairs"`
	// Disagreements in case order.
	Disagreements []Disagreement `json:"disagreements"`
	// Classes counts disagreements per class.
	Classes map[string]int `json:"classes"`
	// Unexplained counts disagreements no known difference explains
	// (soft ones excepted).
	Unexplained int    `json:"unexplained"`
	Skipped     []Skip `json:"skipped,omitempty"`
	// SkippedBy counts skipped cases per reason.
	SkippedBy map[string]int `json:"skipped_by,omitempty"`
}

// NewReport computes the figures of a run from its outcomes; names are
// the back ends in the order of each outcome's answers.
func NewReport(names []string, outs []Outcome) *Report {
	r := &Report{Cases: len(outs), Sources: map[string]int{}, Classes: map[string]int{}}
	r.Backends = make([]BackendReport, len(names))
	for i, n := range names {
		r.Backends[i] = BackendReport{Name: n, BySource: map[string]Tally{}}
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			r.Pairs = append(r.Pairs, Pair{A: names[i], B: names[j]})
		}
	}
	for oi := range outs {
		o := &outs[oi]
		c := o.Case
		r.Sources[c.Source]++
		maj, hasMaj := majority(o.Answers)
		for b, a := range o.Answers {
			br := &r.Backends[b]
			t := br.BySource[c.Source]
			count(&t, c, a)
			if hasMaj && a.Err == "" && a.Valid == maj {
				t.WithMajority++
				br.Total.WithMajority++
			}
			br.BySource[c.Source] = t
			count(&br.Total, c, a)
		}
		p := 0
		for i := range o.Answers {
			for j := i + 1; j < len(o.Answers); j++ {
				ai, aj := o.Answers[i], o.Answers[j]
				if ai.Err == "" && aj.Err == "" {
					r.Pairs[p].Compared++
					if ai.Valid == aj.Valid {
						r.Pairs[p].SameVerdict++
						if ai.Code == aj.Code {
							r.Pairs[p].SameCode++
						}
					}
				}
				p++
			}
		}
		if d, ok := disagreement(o); ok {
			classify(&d, o)
			r.Classes[d.Class]++
			if !d.Explained && d.Kind != KindSoft {
				r.Unexplained++
			}
			r.Disagreements = append(r.Disagreements, d)
		}
	}
	return r
}

// majority is the verdict most back ends gave, if there is one.
func majority(as []Answer) (valid, ok bool) {
	accept, reject := 0, 0
	for _, a := range as {
		switch {
		case a.Err != "":
		case a.Valid:
			accept++
		default:
			reject++
		}
	}
	return accept > reject, accept != reject
}

// AddSkipped records the cases the corpora held but could not be run.
func (r *Report) AddSkipped(s []Skip) {
	r.Skipped = append(r.Skipped, s...)
	if len(s) > 0 && r.SkippedBy == nil {
		r.SkippedBy = map[string]int{}
	}
	for _, k := range s {
		r.SkippedBy[k.Source+": "+k.Reason]++
	}
}

// verdictOf is what a back end's answer means for case c.
func verdictOf(c *Case, a Answer) string {
	switch {
	case a.Err != "":
		return KindError
	case c.Expect == Unknown:
		return ""
	case (c.Expect == Accept) != a.Valid:
		if c.Soft {
			return KindSoft
		}
		return KindVerdict
	case c.ExpectCode != "" && a.Code != c.WantCode(a.Backend):
		return KindCode
	}
	return "agree"
}

func count(t *Tally, c *Case, a Answer) {
	t.Cases++
	if a.Err == "" && a.Valid {
		t.Accepted++
	}
	switch verdictOf(c, a) {
	case KindError:
		t.Errors++
	case "":
		t.Unexpected++
	case KindSoft:
		t.Soft++
	case KindVerdict:
		t.Disagree++
	case KindCode:
		t.CodeDiffers++
	default:
		t.Agree++
	}
}

// disagreement reports whether o is one, and of which kind: the worst of
// its answers (error, verdict, code, soft), or between back ends.
func disagreement(o *Outcome) (Disagreement, bool) {
	c := o.Case
	rank := map[string]int{KindError: 4, KindVerdict: 3, KindCode: 2, KindSoft: 1}
	kind := ""
	var departing []string
	for _, a := range o.Answers {
		v := verdictOf(c, a)
		if rank[v] == 0 {
			continue
		}
		departing = append(departing, a.Backend)
		if rank[v] > rank[kind] {
			kind = v
		}
	}
	if kind == "" && c.Expect == Unknown {
		accept, reject := 0, 0
		for _, a := range o.Answers {
			if a.Err != "" {
				continue
			}
			if a.Valid {
				accept++
			} else {
				reject++
			}
		}
		if accept > 0 && reject > 0 {
			kind = KindBetween
			// The minority departs; on a tie, those that accept.
			for _, a := range o.Answers {
				if a.Err == "" && a.Valid == (accept <= reject) {
					departing = append(departing, a.Backend)
				}
			}
		}
	}
	if kind == "" {
		return Disagreement{}, false
	}
	return Disagreement{
		ID: c.ID, Source: c.Source, Host: c.Host, Purpose: string(c.Purpose), Expect: c.Expect,
		ExpectCode: string(c.ExpectCode), Soft: c.Soft, Note: c.Note,
		Answers: o.Answers, Kind: kind, Backends: departing,
	}, true
}

// WriteText writes r for people: the agreement table, the pairwise
// agreement, the classes of disagreement, and the first show
// disagreements in full (all when show < 0).
func (r *Report) WriteText(w io.Writer, show int) error {
	var b strings.Builder
	var srcs []string
	for s := range r.Sources {
		srcs = append(srcs, s)
	}
	sort.Strings(srcs)
	fmt.Fprintf(&b, "%d cases", r.Cases)
	for _, s := range srcs {
		fmt.Fprintf(&b, ", %s %d", s, r.Sources[s])
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "; %d skipped", len(r.Skipped))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "%-12s %-26s %7s %7s %7s %6s %6s %6s %7s %8s\n", "back end", "source", "cases", "agree", "differ", "code", "soft", "errors", "rate", "majority")
	for _, br := range r.Backends {
		for _, s := range srcs {
			t := br.BySource[s]
			fmt.Fprintf(&b, "%-12s %-26s %7d %7d %7d %6d %6d %6d %7s %7.1f%%\n", br.Name, s, t.Cases, t.Agree, t.Disagree, t.CodeDiffers, t.Soft, t.Errors, rate(t), 100*t.MajorityRate())
		}
	}
	if len(r.Pairs) > 0 {
		b.WriteString("\npairwise      compared  same verdict  same code\n")
		for _, p := range r.Pairs {
			fmt.Fprintf(&b, "%-12s %-12s %7d %7d (%5.1f%%) %7d\n", p.A, p.B, p.Compared, p.SameVerdict, pct(p.SameVerdict, p.Compared), p.SameCode)
		}
	}
	if len(r.Classes) > 0 {
		b.WriteString("\ndisagreements by class\n")
		var cls []string
		for c := range r.Classes {
			cls = append(cls, c)
		}
		sort.Slice(cls, func(i, j int) bool {
			if r.Classes[cls[i]] != r.Classes[cls[j]] {
				return r.Classes[cls[i]] > r.Classes[cls[j]]
			}
			return cls[i] < cls[j]
		})
		for _, c := range cls {
			fmt.Fprintf(&b, "%6d  %s\n", r.Classes[c], c)
		}
		fmt.Fprintf(&b, "unexplained (not soft): %d\n", r.Unexplained)
	}
	if len(r.SkippedBy) > 0 {
		b.WriteString("\nskipped by reason\n")
		var rs []string
		for k := range r.SkippedBy {
			rs = append(rs, k)
		}
		sort.Strings(rs)
		for _, k := range rs {
			fmt.Fprintf(&b, "%6d  %s\n", r.SkippedBy[k], termtext.Escape(k))
		}
	}
	n := len(r.Disagreements)
	if show >= 0 && show < n {
		n = show
	}
	if n > 0 {
		fmt.Fprintf(&b, "\ndisagreements (%d of %d)\n", n, len(r.Disagreements))
	}
	for _, d := range r.Disagreements[:n] {
		exp := string(d.Expect)
		if exp == "" {
			exp = "unknown"
		}
		if d.ExpectCode != "" {
			exp += "/" + d.ExpectCode
		}
		if d.Soft {
			exp += " (soft)"
		}
		fmt.Fprintf(&b, "\n%s host=%q purpose=%s expect=%s: %s [%s]\n", termtext.Escape(d.ID), d.Host, d.Purpose, exp, d.Kind, d.Class)
		if d.Note != "" {
			fmt.Fprintf(&b, "  case: %s\n", termtext.Escape(d.Note))
		}
		fmt.Fprintf(&b, "  why: %s\n", d.Why)
		for _, a := range d.Answers {
			if a.Err != "" {
				fmt.Fprintf(&b, "  %-12s error: %s\n", a.Backend, termtext.Escape(a.Err))
				continue
			}
			v := "reject"
			if a.Valid {
				v = "accept"
			}
			fmt.Fprintf(&b, "  %-12s %s %-16s %s\n", a.Backend, v, a.Code, termtext.Escape(trim(a.Reason, 160)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func rate(t Tally) string {
	if t.Cases == t.Unexpected {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*t.Rate())
}

func pct(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

func trim(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
