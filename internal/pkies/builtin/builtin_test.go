package builtin_test

import (
	"testing"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
)

// TestRegistry: the built-ins, each with its client half only (a client
// links no prover), and a fresh registry at each call.
func TestRegistry(t *testing.T) {
	r := builtin.Registry()
	for _, want := range []struct {
		id   pkie.ID
		name string
	}{{pkie.CT, "ct"}, {pkie.Revocation, "revocation"}, {pkie.Notary, "notary"}} {
		k, ok := r.Lookup(want.id)
		if !ok || k.Name != want.name {
			t.Errorf("Lookup(%s) = %q, %v; want %q", want.id, k.Name, ok, want.name)
			continue
		}
		if k.NewVerifier == nil || k.NewProver != nil {
			t.Errorf("%s: a client's built-in has its verifier and no prover", want.name)
		}
		if k2, ok := r.ByName(want.name); !ok || k2.ID != want.id {
			t.Errorf("ByName(%q) = %s, %v", want.name, k2.ID, ok)
		}
	}
	// Each call is a fresh registry: registering in one leaves the other alone.
	extra := pkie.Kind{ID: 0xFF01, Name: "extra", NewVerifier: builtin.Kinds()[0].NewVerifier}
	if err := r.Register(extra); err != nil {
		t.Fatal(err)
	}
	if _, ok := builtin.Registry().Lookup(0xFF01); ok {
		t.Error("a registration leaked into another Registry()")
	}
}
