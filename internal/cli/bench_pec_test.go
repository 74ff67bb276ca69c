package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchPECClientJSON(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(context.Background(), env, []string{"bench", "pec", "--rows", "client", "--ct-leaves", "64", "--revoked", "16",
		"--log-fill", "10", "--revoked-fill", "10", "--dir", t.TempDir(), "--json"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m struct {
		Machine    map[string]any `json:"machine"`
		ClientCost map[string]any `json:"client_cost"`
		Throughput any            `json:"throughput"`
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	c := m.ClientCost
	if c == nil || c["ct_leaves"] != 64.0 || c["revoked_leaves"] != 16.0 || c["ct_depth"] != 6.0 || c["revoked_depth"] != 4.0 {
		t.Fatalf("client_cost = %v", c)
	}
	warm, cold, ceil := c["warm_us_p50"].(float64), c["cold_us_p50"].(float64), c["ceiling_sha256_us_p50"].(float64)
	// Opening two signed heads is four Ed25519 verifications: whatever the
	// machine, far more than checking two paths.
	if !(ceil > 0 && warm >= ceil && cold > warm) {
		t.Errorf("warm %v, cold %v, ceiling %v", warm, cold, ceil)
	}
	if c["paper_ct_presence_us"] != 189.0 || c["paper_revocation_absence_us"] != 207.0 || c["paper_connection_us"] != 396.0 {
		t.Errorf("paper figures %v %v %v", c["paper_ct_presence_us"], c["paper_revocation_absence_us"], c["paper_connection_us"])
	}
	if m.Throughput != nil {
		t.Errorf("throughput row present though not asked for")
	}
	if !strings.Contains(errb.String(), "bench pec: client cost:") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestBenchPECUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "pec", "--rows", "nope"}, "unknown row"},
		{[]string{"bench", "pec", "--keys", "10"}, "at least 1000"},
		{[]string{"bench", "pec", "--transport", "sctp"}, "transport"},
		{[]string{"bench", "pec", "--sessions", "0"}, "--sessions"},
		{[]string{"bench", "pec", "extra"}, "unexpected argument"},
		{[]string{"bench", "pec", "--log-fill", "-1"}, "--log-fill"},
		{[]string{"bench", "pec", "--server-rtts", "10ms,x"}, "--server-rtts"},
		{[]string{"bench", "pec", "--loss", "1"}, "--loss"},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != ExitUsage || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), ExitUsage, tc.msg)
		}
	}
}
