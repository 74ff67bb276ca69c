package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

var demoSites = []string{"bank.test", "mail.test", "news.test", "shop.test", "revoked.test", "unlogged.test", "unlisted-log.test"}

// TestDemoText holds the default output to what a newcomer can read: the
// story before any result, one line per site and visit, no line over 120
// characters, no progress chatter, and the details left to -v and --json.
func TestDemoText(t *testing.T) {
	code, out, errs := runCLI(t, "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if errs != "" {
		t.Errorf("stderr without -v: %q", errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		if len(l) > 120 {
			t.Errorf("line %d is %d characters: %q", i+1, len(l), l)
		}
	}
	if !strings.HasPrefix(out, "pkie demo:") || !strings.Contains(out, "Watch for:") ||
		strings.Index(out, "Watch for:") > strings.Index(out, "First visit:") {
		t.Errorf("the story does not lead:\n%s", out)
	}
	// Each site: exactly one line per visit, naming the verdict.
	want := map[string]string{"bank.test": "UNTRUSTED", "mail.test": "TRUSTED", "news.test": "TRUSTED",
		"shop.test": "TRUSTED", "revoked.test": "UNTRUSTED", "unlogged.test": "UNTRUSTED", "unlisted-log.test": "UNTRUSTED"}
	sections := strings.SplitN(out, "\nReturn visit", 2)
	if len(sections) != 2 {
		t.Fatalf("no return visit section:\n%s", out)
	}
	first := sections[0][strings.Index(sections[0], "First visit:"):]
	for i, sec := range []string{first, sections[1]} {
		for _, site := range demoSites {
			var hits []string
			for _, l := range strings.Split(sec, "\n") {
				if f := strings.Fields(strings.TrimPrefix(l, "!!")); len(f) > 1 && f[0] == site {
					hits = append(hits, l)
				}
			}
			if len(hits) != 1 {
				t.Errorf("visit %d: %s on %d lines, want 1: %q", i+1, site, len(hits), hits)
				continue
			}
			if f := strings.Fields(strings.TrimPrefix(hits[0], "!!")); f[1] != want[site] {
				t.Errorf("visit %d: %q, want %s", i+1, hits[0], want[site])
			}
		}
	}
	for _, detail := range []string{"sorted tree of", "notary-near", "(required)", "sha256"} {
		if strings.Contains(out, detail) {
			t.Errorf("default output carries detail %q meant for -v and --json", detail)
		}
	}
}

func TestDemoJSON(t *testing.T) {
	code, out, errs := runCLI(t, "demo", "--json", "--revisit=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rs []struct {
		Site     string   `json:"site"`
		Verdict  string   `json:"verdict"`
		Headline string   `json:"headline"`
		Reasons  []string `json:"reasons"`
		Timings  struct {
			Total int64 `json:"total_ns"`
		} `json:"timings"`
		Notaries []struct {
			Name   string `json:"name"`
			Vote   string `json:"vote"`
			Detail string `json:"detail"`
		} `json:"notaries"`
		Proofs []struct {
			PKIE   string `json:"pkie"`
			Status string `json:"status"`
			Detail string `json:"detail"`
		} `json:"proofs"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
	}
	want := map[string]string{"bank.test": "untrusted", "mail.test": "trusted", "news.test": "trusted", "shop.test": "trusted",
		"revoked.test": "untrusted", "unlogged.test": "untrusted", "unlisted-log.test": "untrusted"}
	if len(rs) != len(want) {
		t.Fatalf("%d sites, want %d", len(rs), len(want))
	}
	// Why, in the reasons: the cloud's proofs.
	why := map[string]string{"revoked.test": "revocation (required) failed", "unlogged.test": "ct (required) failed",
		"unlisted-log.test": "ct (required) failed: Chrome CT policy"}
	for _, r := range rs {
		if want[r.Site] != r.Verdict || len(r.Reasons) == 0 {
			t.Errorf("%s: %s %v", r.Site, r.Verdict, r.Reasons)
		}
		if w := why[r.Site]; w != "" && !strings.Contains(strings.Join(r.Reasons, "\n"), w) {
			t.Errorf("%s: reasons %q lack %q", r.Site, r.Reasons, w)
		}
		// The detail the text leaves out stays here.
		if r.Headline == "" || r.Timings.Total <= 0 || len(r.Notaries) != 3 || len(r.Proofs) != 2 {
			t.Errorf("%s: headline %q, %d notaries, %d proofs", r.Site, r.Headline, len(r.Notaries), len(r.Proofs))
		}
		for _, n := range r.Notaries {
			if n.Name == "" || n.Vote == "" || n.Detail == "" {
				t.Errorf("%s: notary answer without detail: %+v", r.Site, n)
			}
		}
		for _, p := range r.Proofs {
			// A certificate with SCTs is judged on them by the CT policy;
			// the others by a signed tree.
			want := "sorted tree of"
			switch {
			case r.Site == "unlisted-log.test" && p.PKIE == "ct":
				want = "not in the log list"
			case r.Site == "news.test" && p.PKIE == "ct":
				want = "Chrome CT policy met by 2 SCTs (pkie demo log, pkie demo log two), both included"
			}
			if !strings.Contains(p.Detail, want) {
				t.Errorf("%s: %s proof detail %q lacks %q", r.Site, p.PKIE, p.Detail, want)
			}
		}
	}
}

// TestDemoVerbose: -v brings back every notary's answer and every
// source's reason, and the progress on stderr.
func TestDemoVerbose(t *testing.T) {
	code, out, errs := runCLI(t, "demo", "-v", "--revisit=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"notary-near", "notary-global", "ct (required) failed", "revocation (required) failed", "sorted tree of",
		"under pkie.test/mirror's head signed", "built from log pkie.test/log's checkpoint of", "mirror pkie.test/mirror of log pkie.test/log: certificate is absent from the log's sorted tree"} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q", want)
		}
	}
	if !strings.Contains(errs, "checking bank.test") {
		t.Errorf("-v: no progress on stderr: %q", errs)
	}
}
