package cloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/cloud"
)

// mine is an operator's enhancement: a prover and a verifier of its own.
var mine = pkie.Kind{ID: 0xFF20, Name: "my-pkie",
	NewProver: func(context.Context, pkie.ProverEnv, json.RawMessage) (pkie.Prover, error) {
		return nil, errors.New("not built in this test")
	},
	NewVerifier: func(json.RawMessage) (pkie.Verifier, error) { return nil, errors.New("not built in this test") }}

// TestRegistryDecides: what a cloud binary can host is its registry's,
// with no edit of pkie's built-ins: init refuses an enhancement the
// registry lacks, naming those it has, and records one registered beside
// the built-ins.
func TestRegistryDecides(t *testing.T) {
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(cfg, []byte(`{"url":"https://mine.example"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	initCloud := func(reg *pkie.Registry) (int, string, string) {
		data := filepath.Join(t.TempDir(), "cloud")
		var out, errs strings.Builder
		code := cloud.Run(ctx, []string{"init", "--data", data, "--name", "test-cloud", "--pkie", "my-pkie=" + cfg, "--pkie", "notary"}, &out, &errs, reg)
		return code, data, errs.String()
	}
	if code, _, errs := initCloud(nil); code != 2 || !strings.Contains(errs, "--pkie my-pkie: unknown enhancement; this pkie hosts ct, revocation, notary") {
		t.Errorf("the built-ins alone: exit %d, %q", code, errs)
	}
	reg := cloud.BuiltinRegistry()
	if err := reg.Register(mine); err != nil {
		t.Fatal(err)
	}
	code, data, errs := initCloud(reg)
	if code != 0 {
		t.Fatalf("with my-pkie registered: exit %d, %q", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(data, "cloud.json"))
	if err != nil || !strings.Contains(string(b), `"my-pkie"`) || !strings.Contains(string(b), `"notary"`) {
		t.Errorf("cloud.json %s, %v: want my-pkie beside the notary", b, err)
	}
	if _, ok := cloud.BuiltinRegistry().ByName("my-pkie"); ok {
		t.Error("a registration leaked into another BuiltinRegistry()")
	}
}
