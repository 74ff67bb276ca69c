package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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
		{[]string{"bench", "pec", "--placements", "--nearest", "500"}, "--nearest and --footprint must be at most 182: 14 regions give 182 distinct client–server pairs"},
		{[]string{"bench", "pec", "--placements", "--random", "5000"}, "--random 5000: 14 regions give 2184 distinct random placements"},
		{[]string{"bench", "pec", "--placements", "--scale", "0.5"}, "--scale 0.5: round trips are divided by it, so at least 1"},
		{[]string{"bench", "pec", "--placements", "--random", "0", "--nearest", "0", "--footprint", "0"}, "--random, --nearest and --footprint must not be negative, and not all zero"},
		{[]string{"bench", "pec", "--placements", "--fibre-factor", "0.5"}, "--fibre-factor 0.5: the fibre-path factor is below 1"},
		{[]string{"bench", "pec", "--placements", "--reps", "0"}, "--reps must be at least 1"},
		{[]string{"bench", "pec", "--placements", "--pop-rtt", "0s"}, "--pop-rtt must be positive"},
		{[]string{"bench", "pec", "--placements", "--log-fill", "-1"}, "--log-fill must be 0 to 1048576 and --revoked-fill 0 to 16777216"},
		{[]string{"bench", "pec", "--placements", "--revoked-fill", "16777217"}, "--log-fill must be 0 to 1048576 and --revoked-fill 0 to 16777216"},
		// A zero, or NaN, scale or fibre factor was taken as the default,
		// silently (NaN: used as given).
		{[]string{"bench", "pec", "--placements", "--scale", "0"}, "--scale 0: round trips are divided by it"},
		{[]string{"bench", "pec", "--placements", "--scale", "NaN"}, "--scale NaN: round trips are divided by it"},
		{[]string{"bench", "pec", "--placements", "--fibre-factor", "0"}, "--fibre-factor 0: the fibre-path factor is below 1"},
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

// TestBenchPECStudyPlacementCounts checks that a zero count leaves its
// model out (it used to stand for the default of 150) and that an unset
// one is the default.
func TestBenchPECStudyPlacementCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cloud and makes real handshakes")
	}
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"bench", "pec", "--placements", "--random", "0", "--nearest", "0", "--footprint", "1",
		"--reps", "1", "--scale", "20", "--tls", "1.3", "--log-fill", "0", "--revoked-fill", "0", "--json"}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var st struct {
		Placements []struct {
			Footprint string `json:"footprint"`
			Selection string `json:"selection"`
		} `json:"placements"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Placements) != 1 || st.Placements[0].Footprint != pecbench.FootprintPoP {
		t.Errorf("placements %+v: want the one large-footprint placement and no other", st.Placements)
	}

	out.Reset()
	errb.Reset()
	Main(context.Background(), env, []string{"bench", "pec", "--placements", "--help"})
	help := out.String() + errb.String()
	for _, f := range []string{"random", "nearest", "footprint"} {
		if !regexp.MustCompile(`(?m)^  -` + f + ` int\n.*0: none.*\(default 150\)$`).MatchString(help) {
			t.Errorf("--%s: the usage text does not say 0 is none and 150 the default:\n%s", f, help)
		}
	}
}
