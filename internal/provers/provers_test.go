package provers_test

import (
	"encoding/json"
	"testing"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/provers"
)

// TestRegistry: the cloud's built-ins have both halves; an operator's
// enhancement is registered beside them without any change here, and
// stays in the registry it was registered in.
func TestRegistry(t *testing.T) {
	r := provers.Registry()
	for _, name := range []string{"ct", "revocation", "notary"} {
		k, ok := r.ByName(name)
		if !ok || k.NewProver == nil || k.NewVerifier == nil {
			t.Errorf("%s: registered %v, prover %v, verifier %v; want both halves", name, ok, k.NewProver != nil, k.NewVerifier != nil)
		}
	}
	mine := pkie.Kind{ID: 0xFF10, Name: "my-pkie", NewVerifier: func(json.RawMessage) (pkie.Verifier, error) { return nil, nil }}
	if err := r.Register(mine); err != nil {
		t.Fatal(err)
	}
	if _, ok := provers.Registry().ByName("my-pkie"); ok {
		t.Error("a registration leaked into another Registry()")
	}
	for _, tc := range []struct {
		name    string
		config  string
		checked bool
		ok      bool
	}{
		{"ct", `{"log_url":"http://127.0.0.1:1","log_key":"nope"}`, true, false},
		{"notary", `{"max_age":"24h"}`, true, true},
		{"notary", `{"max_age":3600}`, true, false},
		{"revocation", `{}`, true, false},
		{"0x0001", `{}`, false, true}, // only names, as cloud.json holds them
		{"my-pkie", `{}`, false, true},
	} {
		checked, err := provers.CheckProverConfig(tc.name, json.RawMessage(tc.config))
		if checked != tc.checked || (err == nil) != tc.ok {
			t.Errorf("CheckProverConfig(%s, %s) = %v, %v; want checked %v, ok %v", tc.name, tc.config, checked, err, tc.checked, tc.ok)
		}
	}
}
