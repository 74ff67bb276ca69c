package demo

import (
	"context"
	"strings"
	"testing"
)

// TestMitMCaught is the end-to-end test of pkie's main job: a MitM whose
// forged chain passes CA validation is caught by the notaries and by the
// log that never saw it, a revoked and an unlogged certificate are caught
// by the cloud's proofs, a certificate whose one SCT is from a log the
// client's list does not name is caught by the CT policy, every other
// site is trusted, and return visits come from the local cache except for
// the sites never accepted.
func TestMitMCaught(t *testing.T) {
	rs, err := Run(context.Background(), Options{Revisit: true})
	if err != nil {
		t.Fatal(err)
	}
	if !Caught(rs) {
		t.Fatalf("not caught: %+v", rs)
	}
	if len(rs) != 14 {
		t.Fatalf("%d results, want 14 (7 sites × 2 visits)", len(rs))
	}
	for _, r := range rs {
		if r.CA != "pass" {
			t.Errorf("%s: CA validation %q; the demo's forged chain must pass it", r.Site, r.CA)
		}
		// What the cloud's proofs must show, and the reason that says so.
		want := map[string]string{"ct": "pass", "revocation": "pass"}
		reason := ""
		switch {
		case r.Intercepted:
			want["ct"] = "fail" // the forged certificate was never logged
			reason = "ct (required) failed"
		case r.Revoked:
			want["revocation"] = "fail"
			reason = "revocation (required) failed"
		case r.Unlogged:
			want["ct"] = "fail"
			reason = "ct (required) failed"
		case r.UnlistedLog:
			want["ct"] = "fail"
			reason = "ct (required) failed: Chrome CT policy"
		}
		if len(r.Proofs) != 2 {
			t.Errorf("%s: proofs %+v", r.Site, r.Proofs)
		}
		for _, p := range r.Proofs {
			if p.Status != want[p.PKIE] {
				t.Errorf("%s visit %d: %s %s (%s), want %s", r.Site, r.Visit, p.PKIE, p.Status, p.Detail, want[p.PKIE])
			}
		}
		if reason != "" && !strings.Contains(strings.Join(r.Reasons, "\n"), reason) {
			t.Errorf("%s: reasons %q lack %q", r.Site, r.Reasons, reason)
		}
		// The site with SCTs passes on them, its inclusion proven by the
		// cloud's evidence, not by the mirror's tree.
		for _, p := range r.Proofs {
			if r.Site == SCTSite && p.PKIE == "ct" && !strings.Contains(p.Detail, "Chrome CT policy met by 2 SCTs") {
				t.Errorf("%s: ct %q, want it judged on its two SCTs", r.Site, p.Detail)
			}
		}
		wantCache := r.Visit == 2 && !r.Intercepted && !r.Revoked && !r.Unlogged && !r.UnlistedLog
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
		{"revoked caught", []SiteResult{{Verdict: "untrusted", Revoked: true}, {Verdict: "untrusted", Unlogged: true}}, true},
		{"revoked missed", []SiteResult{{Verdict: "trusted", Revoked: true}}, false},
		{"unlogged missed", []SiteResult{{Verdict: "inconclusive", Unlogged: true}}, false},
		{"unlisted log caught", []SiteResult{{Verdict: "untrusted", UnlistedLog: true}}, true},
		{"unlisted log missed", []SiteResult{{Verdict: "trusted", UnlistedLog: true}}, false},
	}
	for _, tc := range tests {
		if got := Caught(tc.rs); got != tc.want {
			t.Errorf("%s: Caught = %v, want %v", tc.name, got, tc.want)
		}
	}
}
