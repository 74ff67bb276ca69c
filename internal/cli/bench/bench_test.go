package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/proofbench"
)

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
