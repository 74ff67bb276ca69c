package sctpolicy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/ctpolicy"
	"github.com/google/certificate-transparency-go/loglist3"
	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
)

var (
	now       = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	notBefore = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	oneDay    = 24 * time.Hour
)

// A world of logs, written with loglist.Write and read back with
// loglist.Parse (our side) and loglist3 (ctpolicy's side): the same list
// for both.
type world struct {
	list *loglist.List
	ll3  *loglist3.LogList
	byD  map[string]*loglist.Log
}

type logSpec struct {
	desc, op string
	kind     loglist.Kind
	state    loglist.State
	since    time.Time
}

func newWorld(t testing.TB, specs []logSpec) *world {
	t.Helper()
	var logs []*loglist.Log
	for _, s := range specs {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		l := &loglist.Log{Key: &k.PublicKey, Description: s.desc, Operator: s.op, Kind: s.kind,
			URL: "https://" + s.desc + ".ct.example/", MMD: time.Minute, State: s.state, StateSince: s.since}
		if s.kind == loglist.Static {
			l.MonitoringURL = "https://mon." + s.desc + ".ct.example/"
		}
		if s.kind == "" {
			l.Kind = loglist.RFC6962
		}
		logs = append(logs, l)
	}
	data, err := loglist.Write(logs, now.Add(-oneDay))
	if err != nil {
		t.Fatal(err)
	}
	// ctpolicy's ChromeCTPolicy tells a Google operator by its email.
	var raw map[string]any
	json.Unmarshal(data, &raw)
	for _, op := range raw["operators"].([]any) {
		m := op.(map[string]any)
		if m["name"] == "Google" {
			m["email"] = []string{"google-ct-logs@googlegroups.com"}
		} else {
			m["email"] = []string{"ct@" + strings.ToLower(m["name"].(string)) + ".example"}
		}
	}
	data, _ = json.Marshal(raw)
	w := &world{byD: map[string]*loglist.Log{}}
	if w.list, err = loglist.Parse(data); err != nil {
		t.Fatal(err)
	}
	if w.ll3, err = loglist3.NewFromJSON(data); err != nil {
		t.Fatal(err)
	}
	for _, l := range w.list.Logs {
		w.byD[l.Description] = l
	}
	return w
}

// sctSpec names an SCT: "G1" is an embedded SCT from log G1 issued at
// notBefore; options change its source, time, signature or log.
type sctSpec struct {
	log     string
	src     sct.Source
	at      time.Time
	badSig  bool
	unknown bool
}

func emb(logs ...string) []sctSpec {
	var s []sctSpec
	for _, l := range logs {
		s = append(s, sctSpec{log: l})
	}
	return s
}

func (w *world) checked(t testing.TB, specs []sctSpec) []Checked {
	t.Helper()
	var out []Checked
	for _, s := range specs {
		src := s.src
		if src == 0 {
			src = sct.Embedded
		}
		at := s.at
		if at.IsZero() {
			at = notBefore
		}
		c := Checked{SCT: &sct.SCT{Timestamp: uint64(at.UnixMilli()), Source: src}}
		if s.unknown {
			c.SCT.LogID = sha256.Sum256([]byte(s.log))
		} else {
			l := w.byD[s.log]
			if l == nil {
				t.Fatalf("no log %q", s.log)
			}
			c.SCT.LogID, c.Log = l.ID, l
			if s.badSig {
				c.Err = errors.New("ECDSA signature does not verify")
			}
		}
		out = append(out, c)
	}
	return out
}

func leafFor(lifetime time.Duration) *x509.Certificate {
	return &x509.Certificate{NotBefore: notBefore, NotAfter: notBefore.Add(lifetime - time.Second)}
}

func usable(desc, op string) logSpec {
	return logSpec{desc: desc, op: op, state: loglist.Usable, since: notBefore.AddDate(-1, 0, 0)}
}

func TestPolicies(t *testing.T) {
	retiredAt := notBefore.Add(10 * oneDay)
	w := newWorld(t, []logSpec{
		usable("G1", "Google"), usable("G2", "Google"),
		usable("A1", "OpA"), usable("A2", "OpA"),
		usable("B1", "OpB"),
		{desc: "T1", op: "OpT", kind: loglist.Static, state: loglist.Usable, since: notBefore.AddDate(-1, 0, 0)},
		{desc: "Q1", op: "OpQ", state: loglist.Qualified, since: notBefore},
		{desc: "R1", op: "OpR", state: loglist.ReadOnly, since: notBefore},
		{desc: "X1", op: "OpX", state: loglist.Retired, since: retiredAt},
		{desc: "P1", op: "OpP", state: loglist.Pending, since: notBefore},
		{desc: "J1", op: "OpJ", state: loglist.Rejected, since: notBefore},
	})
	tls := func(l string) sctSpec { return sctSpec{log: l, src: sct.TLSExtension} }
	ocsp := func(l string) sctSpec { return sctSpec{log: l, src: sct.OCSP} }
	for _, c := range []struct {
		name     string
		lifetime time.Duration
		scts     []sctSpec
		policy   string
		ok       bool
		counted  []int
		reason   string // part of the reason
	}{
		// Chrome, embedded.
		{"chrome 90 days two operators", 90 * oneDay, emb("G1", "A1"), "chrome", true, []int{0, 1}, "2 valid embedded SCTs from 2 logs of 2 operators for a 90-day certificate"},
		{"chrome 90 days one operator", 90 * oneDay, emb("A1", "A2"), "chrome", false, nil, "needs 2 SCTs from distinct logs and 2 distinct operators"},
		{"chrome 90 days one SCT", 90 * oneDay, emb("A1"), "chrome", false, nil, "1 valid embedded SCT from 1 log of 1 operator for a 90-day certificate, needs 2"},
		{"chrome 180 days needs 2", 180 * oneDay, emb("G1", "A1"), "chrome", true, []int{0, 1}, "needs 2 from distinct logs"},
		{"chrome 181 days needs 3", 181 * oneDay, emb("G1", "A1"), "chrome", false, nil, "needs 3 SCTs from distinct logs"},
		{"chrome 398 days three logs two operators", 398 * oneDay, emb("G1", "A1", "A2"), "chrome", true, []int{0, 1, 2}, "3 valid embedded SCTs from 3 logs of 2 operators"},
		{"chrome same log twice counts once", 90 * oneDay, emb("G1", "G1", "A1"), "chrome", true, []int{0, 2}, ""},
		{"chrome static-ct-api logs count", 90 * oneDay, emb("T1", "A1"), "chrome", true, []int{0, 1}, ""},
		{"chrome unknown log", 90 * oneDay, []sctSpec{{log: "G1"}, {log: "Z9", unknown: true}}, "chrome", false, nil, "is from log " + loglist.ShortID(sha256.Sum256([]byte("Z9"))) + ", not in the log list"},
		{"chrome forged SCT", 90 * oneDay, []sctSpec{{log: "G1"}, {log: "A1", badSig: true}}, "chrome", false, nil, "SCT 2 (embedded) from A1 has an invalid signature"},
		{"chrome pending log", 90 * oneDay, emb("G1", "P1"), "chrome", false, nil, "the log is pending"},
		{"chrome rejected log", 90 * oneDay, emb("G1", "J1"), "chrome", false, nil, "the log is rejected"},
		{"chrome qualified and readonly count", 90 * oneDay, emb("Q1", "R1"), "chrome", true, []int{0, 1}, ""},
		{"chrome retired log before retirement", 90 * oneDay, emb("X1", "A1"), "chrome", true, []int{0, 1}, ""},
		{"chrome retired logs only", 90 * oneDay, []sctSpec{{log: "X1"}}, "chrome", false, nil, "1 valid embedded SCT"},
		{"chrome retired log, earliest SCT decides", 90 * oneDay, []sctSpec{{log: "X1", at: retiredAt.Add(oneDay)}, {log: "A1"}}, "chrome", true, []int{0, 1}, ""},
		{"chrome retired log after retirement", 90 * oneDay, []sctSpec{{log: "X1", at: retiredAt}, {log: "A1", at: retiredAt.Add(time.Hour)}}, "chrome", false, nil, "not older than the log's retirement"},
		{"chrome retired log: a backdated SCT from a rejected log does not move the date back", 90 * oneDay,
			[]sctSpec{{log: "X1", at: retiredAt}, {log: "A1", at: retiredAt.Add(time.Hour)}, {log: "J1", at: notBefore}}, "chrome", false, nil, "not older than the log's retirement"},
		{"chrome SCT from the future", 90 * oneDay, []sctSpec{{log: "G1"}, {log: "A1", at: now.Add(time.Hour)}}, "chrome", false, nil, "in the future"},
		{"chrome SCT within skew", 90 * oneDay, []sctSpec{{log: "G1"}, {log: "A1", at: now.Add(time.Minute)}}, "chrome", true, []int{0, 1}, ""},
		{"chrome no SCT", 90 * oneDay, nil, "chrome", false, nil, "Chrome CT policy: no SCT (embedded, TLS or OCSP)"},
		// Chrome, TLS and OCSP.
		{"chrome TLS two operators", 398 * oneDay, []sctSpec{tls("G1"), tls("A1")}, "chrome", true, []int{0, 1}, "delivered in TLS or OCSP"},
		{"chrome OCSP held to TLS rules", 398 * oneDay, []sctSpec{ocsp("G1"), tls("A1")}, "chrome", true, []int{0, 1}, ""},
		{"chrome TLS one operator", 398 * oneDay, []sctSpec{tls("A1"), tls("A2")}, "chrome", false, nil, "needs 2 SCTs from logs Qualified, Usable or ReadOnly now, of 2 distinct operators"},
		{"chrome TLS retired log does not count", 90 * oneDay, []sctSpec{tls("X1"), tls("A1")}, "chrome", false, nil, "the log is retired"},
		{"chrome embedded and TLS are separate criteria", 90 * oneDay, []sctSpec{{log: "G1"}, tls("A1")}, "chrome", false, nil, ""},
		// Apple.
		{"apple 90 days two operators", 90 * oneDay, emb("G1", "A1"), "apple", true, []int{0, 1}, "2 valid embedded SCTs from 2 logs of 2 operators for a 90-day certificate"},
		{"apple 90 days one operator", 90 * oneDay, emb("A1", "A2"), "apple", false, nil, "needs 2 from distinct logs with at most 1 per operator counting"},
		{"apple 200 days two of one operator count", 200 * oneDay, emb("A1", "A2", "G1"), "apple", true, []int{0, 1, 2}, "at most 2 per operator"},
		{"apple 200 days three of one operator", 200 * oneDay, emb("G1", "G2", "A1"), "apple", true, []int{0, 1, 2}, ""},
		{"apple 399 days", 399 * oneDay, emb("G1", "A1", "B1"), "apple", false, nil, "lifetime over 398 days"},
		{"apple needs an RFC 6962 log", 90 * oneDay, emb("T1", "Q1"), "apple", true, []int{0, 1}, ""},
		{"apple static-ct-api only", 90 * oneDay, []sctSpec{{log: "T1"}}, "apple", false, nil, ""},
		{"apple TLS and embedded", 398 * oneDay, []sctSpec{{log: "G1"}, tls("A1")}, "apple", true, []int{1, 0}, "1 of them in TLS or OCSP"},
		{"apple TLS retired does not count", 398 * oneDay, []sctSpec{{log: "G1"}, tls("X1")}, "apple", false, nil, ""},
		{"apple no SCT", 90 * oneDay, nil, "apple", false, nil, "Apple CT policy: no SCT"},
		// one.
		{"one usable", 90 * oneDay, emb("T1"), "one", true, []int{0}, "1 valid SCT"},
		{"one TLS", 90 * oneDay, []sctSpec{tls("A1")}, "one", true, []int{0}, ""},
		{"one retired", 90 * oneDay, emb("X1"), "one", false, nil, "the log is retired"},
		{"one unknown", 90 * oneDay, []sctSpec{{log: "Z9", unknown: true}}, "one", false, nil, "not in the log list"},
		{"one none", 90 * oneDay, nil, "one", false, nil, "no SCT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ByName(c.policy)
			if err != nil {
				t.Fatal(err)
			}
			r := p.Evaluate(leafFor(c.lifetime), w.checked(t, c.scts), now)
			if r.Compliant != c.ok || !equalInts(r.Counted, c.counted) || !strings.Contains(r.Reason, c.reason) || r.Policy != p.Name() {
				t.Errorf("got %+v\nwant compliant %v, counted %v, reason containing %q", r, c.ok, c.counted, c.reason)
			}
			if !strings.HasPrefix(r.Reason, map[string]string{"chrome": "Chrome CT policy: ", "apple": "Apple CT policy: ", "one": "one-SCT policy: "}[c.policy]) {
				t.Errorf("reason %q does not name the policy", r.Reason)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTemporalInterval(t *testing.T) {
	w := newWorld(t, []logSpec{usable("G1", "Google"), usable("A1", "OpA")})
	a := w.byD["A1"]
	a.NotAfterStart = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	a.NotAfterEnd = time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC)
	r := Chrome().Evaluate(leafFor(90*oneDay), w.checked(t, emb("G1", "A1")), now) // expires 2027-01-29
	if !r.Compliant {
		t.Errorf("a certificate expiring in the log's interval: %+v", r)
	}
	r = Chrome().Evaluate(leafFor(30*oneDay), w.checked(t, emb("G1", "A1")), now) // expires 2026-12-01
	if r.Compliant || !strings.Contains(r.Reason, "the log takes certificates expiring in [2027-01-01, 2027-07-01), this one expires 2026-11-30") {
		t.Errorf("a certificate expiring before the log's interval: %+v", r)
	}
}

// TestRFC6962RuleBeforeApril2026: until 2026-04-15, Chrome required one
// SCT from an RFC 6962 log among those counted.
func TestRFC6962RuleBeforeApril2026(t *testing.T) {
	w := newWorld(t, []logSpec{
		{desc: "T1", op: "OpT", kind: loglist.Static, state: loglist.Usable, since: notBefore.AddDate(-1, 0, 0)},
		{desc: "T2", op: "OpU", kind: loglist.Static, state: loglist.Usable, since: notBefore.AddDate(-1, 0, 0)},
	})
	before := time.Date(2026, 4, 14, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: before.Add(-oneDay), NotAfter: before.Add(60 * oneDay)}
	scts := w.checked(t, []sctSpec{{log: "T1", at: before.Add(-oneDay)}, {log: "T2", at: before.Add(-oneDay)}})
	if r := Chrome().Evaluate(leaf, scts, before); r.Compliant || !strings.Contains(r.Reason, "RFC 6962 log (before 2026-04-15)") {
		t.Errorf("checked before 2026-04-15: %+v", r)
	}
	if r := Chrome().Evaluate(leaf, scts, rfc6962Until); !r.Compliant {
		t.Errorf("checked on 2026-04-15: %+v", r)
	}
}

func TestByName(t *testing.T) {
	for _, n := range []string{"chrome", "Chrome", "apple", "one"} {
		if _, err := ByName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := ByName("firefox"); err == nil {
		t.Error("unknown policy accepted")
	}
}

// TestAgainstCTPolicy runs certificate-transparency-go's ctpolicy
// (v1.4.0, the submission side's view of the policies) and ours on the
// same log list, lifetimes and SCT sets. ctpolicy encodes the older
// rules: Chrome's one Google and one non-Google log and counts by months
// (< 15 months: 2, ≤ 27: 3, ≤ 39: 4, else 5), Apple's counts by months
// with no operator rule. Where a rule differs by design, the case names it
// and asserts the two disagree, so either side changing fails the test.
func TestAgainstCTPolicy(t *testing.T) {
	w := newWorld(t, []logSpec{
		usable("G1", "Google"), usable("G2", "Google"),
		usable("A1", "OpA"), usable("A2", "OpA"),
		usable("B1", "OpB"),
	})
	const (
		oneGoogle   = "Chrome dropped the one-Google-log rule (2022-04-15); two distinct operators suffice"
		chrome180   = "Chrome counts by days: over 180 days needs 3 SCTs (ctpolicy: under 15 months needs 2)"
		applePerOp  = "Apple counts at most 1 SCT per operator for 180 days or less (ctpolicy: no operator rule)"
		apple180    = "Apple needs 3 SCTs for 181 to 398 days (ctpolicy: under 15 months needs 2)"
		apple398    = "Apple has no count for a lifetime over 398 days (ctpolicy: 15 to 27 months needs 3)"
		appleOver27 = "Apple has no count for a lifetime over 398 days (ctpolicy: over 27 months needs 4)"
	)
	for _, c := range []struct {
		name       string
		lifetime   time.Duration
		logs       []string
		chromeDiff string // "" when ours and ctpolicy's Chrome policy agree
		appleDiff  string
	}{
		{"90d Google and another", 90 * oneDay, []string{"G1", "A1"}, "", ""},
		{"90d two non-Google operators", 90 * oneDay, []string{"A1", "B1"}, oneGoogle, ""},
		{"90d two Google logs", 90 * oneDay, []string{"G1", "G2"}, "", applePerOp},
		{"90d two logs of one non-Google operator", 90 * oneDay, []string{"A1", "A2"}, "", applePerOp},
		{"90d one log", 90 * oneDay, []string{"G1"}, "", ""},
		{"90d one log twice", 90 * oneDay, []string{"G1", "G1"}, "", ""},
		{"180d Google and another", 180 * oneDay, []string{"G1", "A1"}, "", ""},
		{"200d Google and another", 200 * oneDay, []string{"G1", "A1"}, chrome180, apple180},
		{"200d three logs two operators", 200 * oneDay, []string{"G1", "A1", "A2"}, "", ""},
		{"200d three logs, no Google", 200 * oneDay, []string{"A1", "A2", "B1"}, oneGoogle, ""},
		{"200d two Google and another", 200 * oneDay, []string{"G1", "G2", "A1"}, "", ""},
		{"398d three operators", 398 * oneDay, []string{"G1", "A1", "B1"}, "", ""},
		{"500d three operators", 500 * oneDay, []string{"G1", "A1", "B1"}, "", apple398},
		{"500d two logs", 500 * oneDay, []string{"G1", "A1"}, "", ""},
		{"1000d four logs", 1000 * oneDay, []string{"G1", "G2", "A1", "B1"}, "", appleOver27},
	} {
		t.Run(c.name, func(t *testing.T) {
			leaf := leafFor(c.lifetime)
			scts := w.checked(t, emb(c.logs...))
			ref := &ctx509.Certificate{NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter}
			for _, p := range []struct {
				ours   Policy
				theirs ctpolicy.CTPolicy
				diff   string
			}{
				{Chrome(), ctpolicy.ChromeCTPolicy{}, c.chromeDiff},
				{Apple(), ctpolicy.AppleCTPolicy{}, c.appleDiff},
			} {
				r := p.ours.Evaluate(leaf, scts, now)
				want := ctpolicyCompliant(t, p.theirs, ref, w.ll3, c.logs, w)
				switch {
				case p.diff == "" && r.Compliant != want:
					t.Errorf("%s: ours %v (%s), ctpolicy %v", p.ours.Name(), r.Compliant, r.Reason, want)
				case p.diff != "" && r.Compliant == want:
					t.Errorf("%s: ours and ctpolicy agree (%v) where they should differ: %s", p.ours.Name(), want, p.diff)
				}
			}
		})
	}
}

// ctpolicyCompliant is ctpolicy's verdict on SCTs from logs: every group
// LogsByGroup returns holds at least its MinInclusions of the SCTs' distinct
// logs (ctpolicy names logs by URL).
func ctpolicyCompliant(t *testing.T, p ctpolicy.CTPolicy, cert *ctx509.Certificate, ll *loglist3.LogList, logs []string, w *world) bool {
	t.Helper()
	groups, err := p.LogsByGroup(cert, ll)
	if err != nil {
		t.Fatalf("%s LogsByGroup: %v", p.Name(), err)
	}
	urls := map[string]bool{}
	for _, d := range logs {
		urls[w.byD[d].URL] = true
	}
	for _, g := range groups {
		n := 0
		for u := range urls {
			if g.LogURLs[u] {
				n++
			}
		}
		if n < g.MinInclusions {
			return false
		}
	}
	return true
}
