package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchProofsJSON(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(context.Background(), env, []string{"bench", "proofs", "--leaves", "2000", "--revoked", "500", "--keys", "1000", "--dir", t.TempDir(), "--json"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	for _, k := range []string{"leaves", "build_seconds", "peak_rss_bytes", "file_bytes", "gen_presence_us_p50",
		"gen_absence_us_p50", "verify_presence_us_p50", "verify_absence_us_p50", "presence_bytes_avg", "absence_bytes_avg",
		"verify_presence_sig_us_p50", "ceiling_sha256_path_us_p50", "ceiling_ed25519_verify_us_p50"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m["leaves"] != 2000.0 {
		t.Errorf("leaves = %v", m["leaves"])
	}
	rev, ok := m["revocation"].(map[string]any)
	if !ok || rev["leaves"] != 500.0 {
		t.Errorf("revocation = %v", m["revocation"])
	}
	// The paper's figures beside the measured ones: Table 1 for the log's
	// tree, Table 2 for the revocation tree.
	for _, tc := range []struct {
		name   string
		res    map[string]any
		source string
		leaves float64
		gen    float64
	}{{"log", m, "Table 1", 2129920, 60}, {"revocation", rev, "Table 2", 53164, 39}} {
		p, ok := tc.res["paper"].(map[string]any)
		if !ok {
			t.Errorf("%s: no paper figures: %v", tc.name, tc.res["paper"])
			continue
		}
		src, _ := p["source"].(string)
		gen, _ := p["gen_presence_us"].(map[string]any)
		if !strings.Contains(src, "PEC, ASIA CCS 2018, "+tc.source) || p["leaves"] != tc.leaves || gen["avg"] != tc.gen {
			t.Errorf("%s: paper %v", tc.name, p)
		}
		for _, k := range []string{"gen_absence_us", "verify_presence_us", "verify_absence_us", "presence_bytes", "absence_bytes"} {
			if f, ok := p[k].(map[string]any); !ok || f["avg"] == nil || f["min"] == nil || f["max"] == nil {
				t.Errorf("%s: paper %s = %v", tc.name, k, p[k])
			}
		}
	}
	if !strings.Contains(errb.String(), "bench proofs: building") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestBenchUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench"}, ExitUsage, "name a benchmark"},
		{[]string{"bench", "nope"}, ExitUsage, "unknown benchmark"},
		{[]string{"bench", "proofs", "--keys", "10"}, ExitUsage, "at least 1000"},
		{[]string{"bench", "proofs", "--leaves", "0"}, ExitUsage, "--leaves"},
		{[]string{"bench", "proofs", "extra"}, ExitUsage, "unexpected argument"},
		{[]string{"bench", "--help"}, ExitOK, "proofs"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}
