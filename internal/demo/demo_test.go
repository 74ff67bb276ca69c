package demo

import (
	"context"
	"testing"
)

// TestMitMCaught is the end-to-end test of pkie's main job: a MitM whose
// forged chain passes CA validation is caught by the notaries, every other
// site is trusted, and return visits come from the local cache except for
// the site that was never accepted.
func TestMitMCaught(t *testing.T) {
	rs, err := Run(context.Background(), Options{Revisit: true})
	if err != nil {
		t.Fatal(err)
	}
	if !Caught(rs) {
		t.Fatalf("not caught: %+v", rs)
	}
	if len(rs) != 8 {
		t.Fatalf("%d results, want 8 (4 sites × 2 visits)", len(rs))
	}
	for _, r := range rs {
		if r.CA != "pass" {
			t.Errorf("%s: CA validation %q; the demo's forged chain must pass it", r.Site, r.CA)
		}
		wantCache := r.Visit == 2 && !r.Intercepted
		if r.FromCache != wantCache {
			t.Errorf("%s visit %d: from cache %v, want %v", r.Site, r.Visit, r.FromCache, wantCache)
		}
		if !r.FromCache && len(r.Notaries) != 3 {
			t.Errorf("%s visit %d: %d notary answers, want 3", r.Site, r.Visit, len(r.Notaries))
		}
		if len(r.Reasons) == 0 {
			t.Errorf("%s: no reasons given", r.Site)
		}
	}
}

func TestCaught(t *testing.T) {
	tests := []struct {
		name string
		rs   []SiteResult
		want bool
	}{
		{"empty", nil, false},
		{"caught", []SiteResult{{Verdict: "untrusted", Intercepted: true}, {Verdict: "trusted"}}, true},
		{"missed", []SiteResult{{Verdict: "trusted", Intercepted: true}}, false},
		{"false alarm", []SiteResult{{Verdict: "untrusted"}}, false},
		{"inconclusive", []SiteResult{{Verdict: "inconclusive"}}, false},
	}
	for _, tc := range tests {
		if got := Caught(tc.rs); got != tc.want {
			t.Errorf("%s: Caught = %v, want %v", tc.name, got, tc.want)
		}
	}
}
