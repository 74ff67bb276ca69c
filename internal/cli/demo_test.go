package cli

import (
	"encoding/json"
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
	want := map[string]string{"bank.test": "untrusted", "mail.test": "trusted", "news.test": "trusted", "shop.test": "trusted"}
	if len(rs) != len(want) {
		t.Fatalf("%d sites, want %d", len(rs), len(want))
	}
	for _, r := range rs {
		if want[r.Site] != r.Verdict || len(r.Reasons) == 0 {
			t.Errorf("%s: %s %v", r.Site, r.Verdict, r.Reasons)
		}
	}
}
