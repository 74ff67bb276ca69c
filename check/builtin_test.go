package check

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/pkies/ct"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
)

// TestPublicVerifierConfigs: the exported configurations encode exactly
// as the enhancements' own, so that what an embedder writes with public
// packages configures the same verifiers as pkie check.
func TestPublicVerifierConfigs(t *testing.T) {
	mirrorKey, logKey := testCTKeys(t)
	_, revKey, _ := checkpoint.GenerateKey("pkie.test/revocation")
	for _, tc := range []struct {
		got, want json.RawMessage
	}{
		{CTVerifierConfig{Key: mirrorKey, LogKey: logKey}.JSON(), ct.VerifierConfig{Key: mirrorKey, LogKey: logKey}.JSON()},
		{CTVerifierConfig{Key: mirrorKey, LogKey: logKey, MaxAge: 2 * time.Hour}.JSON(),
			ct.VerifierConfig{Key: mirrorKey, LogKey: logKey, MaxAge: ct.Duration(2 * time.Hour)}.JSON()},
		{RevocationVerifierConfig{Key: revKey}.JSON(), pkierev.VerifierConfig{Key: revKey}.JSON()},
		{RevocationVerifierConfig{Key: revKey, MaxAge: 10 * time.Minute}.JSON(),
			pkierev.VerifierConfig{Key: revKey, MaxAge: pkierev.Duration(10 * time.Minute)}.JSON()},
	} {
		if string(tc.got) != string(tc.want) {
			t.Errorf("public configuration %s, want %s", tc.got, tc.want)
		}
	}
	vs, err := NewVerifiers(BuiltinRegistry(), map[string]json.RawMessage{
		"ct":         CTVerifierConfig{Key: mirrorKey, LogKey: logKey}.JSON(),
		"revocation": RevocationVerifierConfig{Key: revKey}.JSON(),
	})
	if err != nil || len(vs) != 2 || vs[0].ID() != pkie.CT || vs[1].ID() != pkie.Revocation {
		t.Fatalf("NewVerifiers: %v, %v", vs, err)
	}
	if _, err := NewVerifiers(nil, map[string]json.RawMessage{"ct": CTVerifierConfig{Key: "not a key", LogKey: logKey}.JSON()}); err == nil {
		t.Error("a ct configuration with a malformed key was accepted")
	}
}

// TestBuiltinRegistry: the built-ins, in a registry of the caller's own.
func TestBuiltinRegistry(t *testing.T) {
	a, b := BuiltinRegistry(), BuiltinRegistry()
	for _, name := range []string{"ct", "revocation", "notary"} {
		if k, ok := a.ByName(name); !ok || k.NewVerifier == nil {
			t.Errorf("no %s verifier in the built-in registry", name)
		}
	}
	private := func(json.RawMessage) (pkie.Verifier, error) { return &privateVerifier{}, nil }
	if err := a.Register(pkie.Kind{ID: 0xFF01, Name: "private", NewVerifier: private}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(0xFF01); ok {
		t.Error("what one caller registers is seen by another")
	}
}
