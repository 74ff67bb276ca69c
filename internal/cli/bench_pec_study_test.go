package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/pecbench"
)

// TestBenchPECCostFrom costs a throughput row saved by an earlier run.
func TestBenchPECCostFrom(t *testing.T) {
	rep := pecbench.Report{Throughput: &pecbench.ThroughputRow{ChainBytes: 4569,
		Cloud: &pecbench.Throughput{Name: "cloud", Transport: "quic", PerSecond: 3000, CPUCores: 0.7, PerCPUSecond: 4000, SubmitBytes: 4621, ProofBytes: 1053}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(from, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := Main(context.Background(), env, []string{"bench", "pec", "--cost", "--from", from, "--vcpus", "2", "--json"}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var c pecbench.CostReport
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if len(c.Bases) != 2 || c.Bases[1].MachinePerSecond != 8000 || c.Bases[1].OutBytes != 1053 {
		t.Fatalf("bases %+v: want the measured one at 2 × 4000/s", c.Bases)
	}
	regions := map[string]bool{}
	for _, l := range c.Lines {
		regions[l.Region] = true
	}
	for _, r := range []string{"Iceland", "Spain", "U.S.", "Global"} {
		if !regions[r] {
			t.Errorf("no line for %s", r)
		}
	}

	out.Reset()
	if code := Main(context.Background(), env, []string{"bench", "pec", "--cost", "--from", from}); code != ExitOK || !strings.Contains(out.String(), "Spain        Table 3") {
		t.Fatalf("exit %d, text:\n%s", code, out.String())
	}
}

func TestBenchPECStudyUsage(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(empty, []byte(`{"machine":{}}`), 0o644)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "pec", "--placements", "--tls", "1.1"}, "--tls"},
		{[]string{"bench", "pec", "--placements", "--nearest", "500"}, "client–server pairs"},
		{[]string{"bench", "pec", "--placements", "--scale", "0.5"}, "scale"},
		{[]string{"bench", "pec", "--placements", "--random", "0", "--nearest", "0", "--footprint", "0"}, "not all zero"},
		{[]string{"bench", "pec", "--placements", "--fibre-factor", "0.5"}, "fibre-path factor"},
		{[]string{"bench", "pec", "--cost", "--vcpus", "0"}, "--vcpus"},
		{[]string{"bench", "pec", "--cost", "--from", empty}, "no throughput row"},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != ExitUsage || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), ExitUsage, tc.msg)
		}
	}
}
