package check

import (
	"reflect"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/pkies/ct"
)

// TestNotaryTypesMatch keeps the types embedders see (notaries.go) field
// for field with the notary client's, which the Checker converts: a field
// added to one and not the other would be dropped silently at the
// boundary. It also holds the defaults check documents to the values the
// code that applies them uses.
func TestNotaryTypesMatch(t *testing.T) {
	for _, tt := range []struct{ public, internal any }{
		{Bundle{}, consensus.Bundle{}},
		{Host{}, consensus.Host{}},
		{Policy{}, consensus.Policy{}},
		{Decision{}, consensus.Decision{}},
		{NotaryAnswer{}, consensus.Answer{}},
		{HistoryEntry{}, consensus.Entry{}},
	} {
		pub, in := reflect.TypeOf(tt.public), reflect.TypeOf(tt.internal)
		var want, got []string
		for i := range in.NumField() {
			if f := in.Field(i); f.IsExported() {
				want = append(want, f.Name+" "+string(f.Tag))
			}
		}
		for i := range pub.NumField() {
			f := pub.Field(i)
			got = append(got, f.Name+" "+string(f.Tag))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("check.%s has fields\n\t%q\nconsensus.%s has\n\t%q", pub.Name(), got, in.Name(), want)
		}
	}
	for _, v := range []struct {
		public   Vote
		internal consensus.Vote
	}{{StandAside, consensus.StandAside}, {Yes, consensus.Yes}, {No, consensus.No}} {
		if int(v.public) != int(v.internal) || v.public.String() != v.internal.String() {
			t.Errorf("vote %s is %d here, %s %d in consensus", v.public, v.public, v.internal, v.internal)
		}
	}
	for _, r := range []Result{Trusted, Untrusted, Inconclusive} {
		if string(r) != string(map[Result]consensus.Result{Trusted: consensus.Trusted, Untrusted: consensus.Untrusted, Inconclusive: consensus.Inconclusive}[r]) {
			t.Errorf("result %s differs from consensus", r)
		}
	}
	for _, a := range []API{APIAuto, APIConvergence, APIV1} {
		if got, err := consensus.ParseAPI(string(a)); err != nil || string(got) != string(a) {
			t.Errorf("API %s is %q in consensus (%v)", a, got, err)
		}
	}
	for _, d := range []struct {
		name           string
		public, client time.Duration
	}{
		{"DefaultAnswerMaxAge", DefaultAnswerMaxAge, consensus.DefaultAnswerMaxAge},
		{"DefaultProofMaxAge", DefaultProofMaxAge, ct.DefaultMaxAge},
	} {
		if d.public != d.client {
			t.Errorf("%s is %v here, %v in the verifier that applies it", d.name, d.public, d.client)
		}
	}
	for _, k := range []PolicyKind{Majority, Consensus, Minority, Quorum} {
		p := Policy{Kind: k, Quorum: 0.5}
		if _, err := ParsePolicy(p.String()); err != nil {
			t.Errorf("policy kind %s: %v", k, err)
		}
	}
}
