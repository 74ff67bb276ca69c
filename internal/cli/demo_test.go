package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDemoJSON(t *testing.T) {
	code, out, errs := runCLI(t, "demo", "--json", "--revisit=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rs []struct {
		Site    string   `json:"site"`
		Verdict string   `json:"verdict"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
	}
	want := map[string]string{"bank.test": "untrusted", "mail.test": "trusted", "news.test": "trusted", "shop.test": "trusted",
		"revoked.test": "untrusted", "unlogged.test": "untrusted"}
	if len(rs) != len(want) {
		t.Fatalf("%d sites, want %d", len(rs), len(want))
	}
	// Why, in the reasons: the cloud's proofs.
	why := map[string]string{"revoked.test": "revocation (required) failed", "unlogged.test": "ct (required) failed"}
	for _, r := range rs {
		if want[r.Site] != r.Verdict || len(r.Reasons) == 0 {
			t.Errorf("%s: %s %v", r.Site, r.Verdict, r.Reasons)
		}
		if w := why[r.Site]; w != "" && !strings.Contains(strings.Join(r.Reasons, "\n"), w) {
			t.Errorf("%s: reasons %q lack %q", r.Site, r.Reasons, w)
		}
	}
}
