package corpus

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

func knownCases(t *testing.T) []Case {
	t.Helper()
	k, err := Known(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k.Cases
}

func goBackends() []verify.Backend { return []verify.Backend{verify.NewGo(false), verify.NewGo(true)} }

func TestRunReportOnKnown(t *testing.T) {
	cases := knownCases(t)
	var calls []int
	rep := Run(context.Background(), goBackends(), cases, func(done, total int) {
		if total != len(cases) {
			t.Errorf("progress total %d, want %d", total, len(cases))
		}
		calls = append(calls, done)
	})
	if len(calls) != len(cases) || calls[len(calls)-1] != len(cases) {
		t.Errorf("progress calls %v, want 1..%d", calls, len(cases))
	}
	if rep.Cases != len(cases) || rep.Sources[KnownSource] != len(cases) {
		t.Fatalf("report counts %d cases, sources %v", rep.Cases, rep.Sources)
	}
	valid := 0
	for _, c := range cases {
		if c.Expect == Accept {
			valid++
		}
	}
	for _, br := range rep.Backends {
		tt := br.Total
		if tt.Cases != len(cases) || tt.Agree+tt.CodeDiffers != len(cases) || tt.Disagree != 0 || tt.Errors != 0 || tt.Accepted != valid {
			t.Errorf("%s: %+v, want %d cases all with the right verdict, %d accepted", br.Name, tt, len(cases), valid)
		}
		if br.BySource[KnownSource] != tt {
			t.Errorf("%s: by source %+v, total %+v", br.Name, br.BySource[KnownSource], tt)
		}
		if br.Library == "" {
			t.Errorf("%s: no library", br.Name)
		}
	}
	if len(rep.Pairs) != 1 || rep.Pairs[0].Compared != len(cases) || rep.Pairs[0].SameVerdict != len(cases) {
		t.Errorf("pairs %+v", rep.Pairs)
	}
	if len(rep.Disagreements) != 0 || rep.Unexplained != 0 {
		t.Errorf("disagreements %+v", rep.Disagreements)
	}
}

// TestExceptionsAreExplicit: a back end may give another code than the
// case's only where the case names it, with the reason.
func TestExceptionsAreExplicit(t *testing.T) {
	cases := knownCases(t)
	for i := range cases {
		if cases[i].ID == "missing-intermediate" {
			cases[i].ExpectCode = verify.Other
			cases[i].Exceptions = []Exception{{Backend: "go", Code: verify.UnknownIssuer, Why: "test"}}
			cases = cases[i : i+1]
			break
		}
	}
	rep := Run(context.Background(), goBackends(), cases, nil)
	if len(rep.Disagreements) != 1 || rep.Disagreements[0].Kind != KindCode ||
		len(rep.Disagreements[0].Backends) != 1 || rep.Disagreements[0].Backends[0] != "go-parallel" {
		t.Fatalf("%+v", rep.Disagreements)
	}
	if rep.Backends[0].Total.Agree != 1 || rep.Backends[1].Total.CodeDiffers != 1 {
		t.Errorf("go %+v, go-parallel %+v", rep.Backends[0].Total, rep.Backends[1].Total)
	}
}

// TestRunReportsABrokenExpectation shows the report (and so the agreement
// test's reasoning) catches a wrong answer: a case whose expectation is
// turned around is a verdict disagreement for every back end, unexplained.
func TestRunReportsABrokenExpectation(t *testing.T) {
	cases := knownCases(t)
	var broken string
	for i := range cases {
		if cases[i].ID == "expired-leaf" {
			cases[i].Expect, cases[i].ExpectCode = Accept, verify.OK
			broken = cases[i].ID
		}
		if cases[i].ID == "wrong-name" {
			cases[i].ExpectCode = verify.Expired // right verdict, wrong code
		}
	}
	if broken == "" {
		t.Fatal("no expired-leaf case")
	}
	rep := Run(context.Background(), goBackends(), cases, nil)
	if len(rep.Disagreements) != 2 {
		t.Fatalf("%d disagreements, want 2: %+v", len(rep.Disagreements), rep.Disagreements)
	}
	byID := map[string]Disagreement{}
	for _, d := range rep.Disagreements {
		byID[d.ID] = d
	}
	d := byID["expired-leaf"]
	if d.Kind != KindVerdict || d.Class != Unexplained || d.Explained || len(d.Backends) != 2 {
		t.Errorf("expired-leaf: %+v", d)
	}
	for _, a := range d.Answers {
		if a.Valid || a.Code != verify.Expired {
			t.Errorf("expired-leaf %s: %+v", a.Backend, a)
		}
	}
	if d := byID["wrong-name"]; d.Kind != KindCode {
		t.Errorf("wrong-name: kind %q, want %q", d.Kind, KindCode)
	}
	if rep.Unexplained != 2 {
		t.Errorf("unexplained %d, want 2", rep.Unexplained)
	}
	for _, br := range rep.Backends {
		if br.Total.Disagree != 1 || br.Total.CodeDiffers < 1 {
			t.Errorf("%s: %+v", br.Name, br.Total)
		}
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out, -1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"expired-leaf", "unexplained (not soft): 2", "go-parallel", "expect=accept/ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunSetsDealsTheCases(t *testing.T) {
	cases := knownCases(t)
	one := Run(context.Background(), goBackends(), cases, nil)
	two := RunSets(context.Background(), [][]verify.Backend{goBackends(), goBackends()}, cases, nil)
	for i := range one.Backends {
		if one.Backends[i].Total != two.Backends[i].Total {
			t.Errorf("%s: one set %+v, two sets %+v", one.Backends[i].Name, one.Backends[i].Total, two.Backends[i].Total)
		}
	}
}

func TestRunCancelledGivesErrorsNotVerdicts(t *testing.T) {
	cases := knownCases(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := Run(ctx, goBackends(), cases, nil)
	for _, br := range rep.Backends {
		if br.Total.Errors != len(cases) || br.Total.Agree != 0 {
			t.Errorf("%s: %+v", br.Name, br.Total)
		}
	}
	if len(rep.Disagreements) != len(cases) || rep.Disagreements[0].Kind != KindError {
		t.Errorf("%d disagreements", len(rep.Disagreements))
	}
}
