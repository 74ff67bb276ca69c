package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/proofbench"
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

// TestBenchProofsText: each comparable row carries the paper's average
// (min-max) beside the run's p50 / avg / max. (TestBenchProofsJSON checks
// that a run attaches Table 1 to the log's tree and Table 2 to the
// revocation tree.)
func TestBenchProofsText(t *testing.T) {
	text := func(p *proofbench.Paper) string {
		var out bytes.Buffer
		printProofs(&Env{Stdout: &out}, "tree", &proofbench.Result{Leaves: 2000, Depth: 11, Samples: 1000, Paper: p})
		return out.String()
	}
	log, rev := text(proofbench.PaperCT()), text(proofbench.PaperRevocation())
	for _, tc := range []struct {
		name, text string
		rows       map[string]string
	}{
		{"log", log, map[string]string{"generate presence (us)": "60 (51-135)", "generate absence (us)": "92 (81-200)",
			"verify presence + sig (us)": "189 (181-396)", "verify absence + sig (us)": "237 (227-465)",
			"presence + det. sig (bytes)": "1018 (1018-1018)", "absence + det. sig (bytes)": "1146 (1070-1466)",
			"paper: PEC, ASIA CCS 2018, Table 1": "2,129,920 leaves"}},
		{"revocation", rev, map[string]string{"generate presence (us)": "39 (38-83)", "generate absence (us)": "65 (61-90)",
			"verify presence + sig (us)": "167 (165-277)", "verify absence + sig (us)": "207 (202-233)",
			"presence + det. sig (bytes)": "799 (798-800)", "absence + det. sig (bytes)": "919 (848-1282)",
			"paper: PEC, ASIA CCS 2018, Table 2": "53,164 leaves"}},
	} {
		for label, want := range tc.rows {
			found := false
			for _, l := range strings.Split(tc.text, "\n") {
				if strings.Contains(l, label) {
					found = true
					if !strings.Contains(l, want) {
						t.Errorf("%s: %q lacks the paper's %q", tc.name, l, want)
					}
				}
			}
			if !found {
				t.Errorf("%s: no row %q:\n%s", tc.name, label, tc.text)
			}
		}
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
