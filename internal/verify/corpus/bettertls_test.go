package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// betterTLSSample is a deterministic sample of both suites: all 81
// path-building cases and every 20th name-constraints case (475 of 9491),
// so the tests stay fast; "pkie verify --corpus bettertls" runs them all.
func betterTLSSample(t testing.TB, now time.Time) *Corpus {
	t.Helper()
	pb, err := BetterTLS(now, BetterTLSOptions{Suites: []string{"pathbuilding"}})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := BetterTLS(now, BetterTLSOptions{Suites: []string{"nameconstraints"}, Every: 20})
	if err != nil {
		t.Fatal(err)
	}
	pb.Add(nc)
	return pb
}

type suiteCounts struct{ cases, accept, soft int }

func countBySource(cases []Case) map[string]suiteCounts {
	m := map[string]suiteCounts{}
	for _, c := range cases {
		s := m[c.Source]
		s.cases++
		if c.Expect == Accept {
			s.accept++
		}
		if c.Soft {
			s.soft++
		}
		m[c.Source] = s
	}
	return m
}

func TestBetterTLSLoader(t *testing.T) {
	now := time.Now()
	c := betterTLSSample(t, now)
	want := map[string]suiteCounts{
		"bettertls/pathbuilding":    {cases: 81, accept: 45, soft: 0},
		"bettertls/nameconstraints": {cases: 475, accept: 45, soft: 46},
	}
	got := countBySource(c.Cases)
	for s, w := range want {
		if got[s] != w {
			t.Errorf("%s: %+v, want %+v", s, got[s], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("sources %v", got)
	}
	first := c.Cases[0]
	if first.ID != "bettertls/pathbuilding#0" || first.Host != "localhost" || first.Expect != Accept ||
		len(first.Roots) != 1 || len(first.Chain) < 2 || !first.Time.Equal(now) || !strings.Contains(first.Note, "LINEAR_TRUST_GRAPH") {
		t.Errorf("first case %+v", first)
	}
	if _, err := BetterTLS(now, BetterTLSOptions{Suites: []string{"nosuch"}}); err == nil {
		t.Error("unknown suite accepted")
	}
}

// TestBetterTLSGoAgrees checks the loader against the suite's own verdicts
// with the back end the suite is known to pass: crypto/x509 runs BetterTLS
// in its own tests (bettertls_test.go), so any disagreement here is the
// loader's fault.
func TestBetterTLSGoAgrees(t *testing.T) {
	c := betterTLSSample(t, time.Now())
	rep := Run(context.Background(), []verify.Backend{verify.NewGo(false)}, c.Cases, nil)
	tt := rep.Backends[0].Total
	if tt.Disagree != 0 || tt.Errors != 0 || tt.Agree+tt.Soft != len(c.Cases) {
		var b bytes.Buffer
		rep.WriteText(&b, 10)
		t.Errorf("go: %+v\n%s", tt, b.String())
	}
}

// exportOf writes c in "bettertls export-tests" form.
func exportOf(t *testing.T, c *Corpus) []byte {
	t.Helper()
	ex := betterTLSExport{Revision: "test", TrustRoot: c.Cases[0].Roots[0], Suites: map[string]*betterTLSSuiteExport{}}
	for i, k := range c.Cases {
		name := strings.TrimPrefix(k.Source, "bettertls/")
		s := ex.Suites[name]
		if s == nil {
			s = &betterTLSSuiteExport{}
			ex.Suites[name] = s
		}
		exp := "ACCEPT"
		if k.Expect == Reject {
			exp = "REJECT"
		}
		s.TestCases = append(s.TestCases, &betterTLSCaseExport{ID: uint(i), Suite: name, Certificates: k.Chain,
			Hostname: k.Host, Expected: exp, FailureIsWarning: k.Soft, RequiredFeatures: []string{}})
	}
	b, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadBetterTLSExport(t *testing.T) {
	now := time.Now()
	gen, err := BetterTLS(now, BetterTLSOptions{Suites: []string{"pathbuilding"}, Every: 10})
	if err != nil {
		t.Fatal(err)
	}
	data := exportOf(t, gen)
	got, err := ReadBetterTLS(bytes.NewReader(data), now, BetterTLSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cases) != len(gen.Cases) || len(got.Skipped) != 0 {
		t.Fatalf("%d cases, %d skipped; want %d, 0", len(got.Cases), len(got.Skipped), len(gen.Cases))
	}
	for i, c := range got.Cases {
		g := gen.Cases[i]
		if c.Expect != g.Expect || c.Soft != g.Soft || c.Host != g.Host || len(c.Chain) != len(g.Chain) ||
			!bytes.Equal(c.Chain[0], g.Chain[0]) || !bytes.Equal(c.Roots[0], g.Roots[0]) || c.Source != "bettertls/pathbuilding" {
			t.Errorf("case %d: %+v, generated %+v", i, c, g)
		}
	}
	rep := Run(context.Background(), []verify.Backend{verify.NewGo(false)}, got.Cases, nil)
	if tt := rep.Backends[0].Total; tt.Agree != len(got.Cases) {
		t.Errorf("go on the export: %+v", tt)
	}

	// A suite filter, a case with an unknown expectation and one with no
	// certificate are skipped with the reason, not dropped.
	var ex betterTLSExport
	if err := json.Unmarshal(data, &ex); err != nil {
		t.Fatal(err)
	}
	ex.Suites["pathbuilding"].TestCases[0].Expected = "MAYBE"
	ex.Suites["pathbuilding"].TestCases[1].Certificates = nil
	data, _ = json.Marshal(ex)
	got, err = ReadBetterTLS(bytes.NewReader(data), now, BetterTLSOptions{Suites: []string{"pathbuilding"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cases) != len(gen.Cases)-2 || len(got.Skipped) != 2 ||
		!strings.Contains(got.Skipped[0].Reason, "MAYBE") || !strings.Contains(got.Skipped[1].Reason, "no certificate") {
		t.Errorf("%d cases, skipped %+v", len(got.Cases), got.Skipped)
	}
	got, _ = ReadBetterTLS(bytes.NewReader(data), now, BetterTLSOptions{Suites: []string{"nameconstraints"}})
	if len(got.Cases) != 0 {
		t.Errorf("suite filter kept %d cases", len(got.Cases))
	}
	for _, bad := range []string{"", "{}", `{"trustRoot":"AAAA"}`, `{"trustRoot":"AAAA","suites":{}}`, "[1,2]"} {
		if _, err := ReadBetterTLS(strings.NewReader(bad), now, BetterTLSOptions{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzReadBetterTLS: an export file is untrusted input; whatever it holds,
// the reader returns cases every back end accepts as requests, or an
// error.
func FuzzReadBetterTLS(f *testing.F) {
	f.Add([]byte(`{"betterTlsRevision":"x","trustRoot":"AAAA","suites":{"pathbuilding":{"testCases":[{"id":1,"certificates":["AAAA"],"hostname":"localhost","expected":"ACCEPT"}]}}}`))
	f.Add([]byte(`{"trustRoot":"AAAA","suites":{"a":{"testCases":[null,{"expected":"REJECT","failureIsWarning":true}]}}}`))
	f.Add([]byte(`{"trustRoot":"","suites":{"a":null}}`))
	now := time.Unix(1763856000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadBetterTLS(bytes.NewReader(data), now, BetterTLSOptions{})
		if err != nil {
			return
		}
		for _, k := range c.Cases {
			if err := k.Request().Check(); err != nil {
				t.Fatalf("case %s is not a valid request: %v", k.ID, err)
			}
			if k.Expect != Accept && k.Expect != Reject {
				t.Fatalf("case %s expects %q", k.ID, k.Expect)
			}
		}
	})
}
