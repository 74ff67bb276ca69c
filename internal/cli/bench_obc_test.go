package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchOBCJSON runs pkie bench obc at a tiny scale with the terminator
// in a child process (the test binary acting as pkie, see TestMain) and
// checks the report's shape and that the child terminator saw each case's
// client key.
func TestBenchOBCJSON(t *testing.T) {
	// The child inherits the environment and so runs as pkie.
	t.Setenv("PKIE_CLI_CHILD", "1")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	plot := filepath.Join(t.TempDir(), "obc")
	code := Main(context.Background(), env, []string{"bench", "obc", "--rows", "gen,terminator", "--algs", "ed25519", "--gen-samples", "2",
		"--cases", "none,ecdsa-p256", "--rate", "30", "--duration", "700ms", "--warmup", "300ms", "--clients", "2", "--ceiling", "300ms",
		"--plot", plot, "--json"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Machine    map[string]any `json:"machine"`
		Gen        []map[string]any
		Terminator struct {
			Separate bool `json:"separate_process"`
			Ceiling  struct {
				PerSecond float64 `json:"handshakes_per_second"`
			}
			Cases []struct {
				Case     string
				Seen     map[string]int `json:"seen_keys"`
				CPUCores float64        `json:"cpu_cores"`
				RSSMB    float64        `json:"rss_mb"`
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if len(r.Gen) != 1 || r.Gen[0]["alg"] != "ed25519" {
		t.Errorf("gen %v", r.Gen)
	}
	tr := r.Terminator
	if !tr.Separate || tr.Ceiling.PerSecond <= 0 || len(tr.Cases) != 2 {
		t.Fatalf("terminator %+v", tr)
	}
	for _, c := range tr.Cases {
		if len(c.Seen) != 1 || c.Seen[c.Case] == 0 || c.RSSMB <= 0 || c.CPUCores <= 0 {
			t.Errorf("%s: saw %v, RSS %v MB, CPU %v", c.Case, c.Seen, c.RSSMB, c.CPUCores)
		}
	}
	for _, f := range []string{"-gen.svg", "-memory.png", "-latency-ecdsa-p256.svg"} {
		if st, err := os.Stat(plot + f); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	if !strings.Contains(errb.String(), "bench obc: terminator: ecdsa-p256") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestBenchOBCUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "obc", "--rows", "nope"}, "unknown row"},
		{[]string{"bench", "obc", "--algs", "sect163k1"}, "unknown algorithm"},
		{[]string{"bench", "obc", "--cases", "dsa"}, "unknown case"},
		{[]string{"bench", "obc", "--rate", "0"}, "--rate"},
		{[]string{"bench", "obc", "--resumed", "1"}, "--resumed"},
		{[]string{"bench", "obc", "extra"}, "unexpected argument"},
		{[]string{"bench", "obc", "--terminator-only", "--client-auth", "require"}, "--client-auth"},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != ExitUsage || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), ExitUsage, tc.msg)
		}
	}
}
