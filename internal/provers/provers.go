// Package provers assembles the server halves of pkie's built-in
// enhancements: Registry is the client halves (internal/pkies/builtin)
// with each one's prover added, what a cloud builds its provers from.
// Server code only: a client imports internal/pkies/builtin instead.
package provers

import (
	"encoding/json"
	"fmt"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/provers/notary"
	"github.com/pkie/pkie/internal/provers/revocation"
)

// half is what the server adds to a built-in's client half.
type half struct {
	prove func(k *pkie.Kind)
	check func(json.RawMessage) error
}

func halves() map[pkie.ID]half {
	return map[pkie.ID]half{
		pkie.CT:         {func(k *pkie.Kind) { k.NewProver = ct.NewProver }, ct.CheckProverConfig},
		pkie.Revocation: {func(k *pkie.Kind) { k.NewProver = revocation.NewProver }, revocation.CheckProverConfig},
		pkie.Notary:     {func(k *pkie.Kind) { k.NewProver = notary.NewProver }, notary.CheckProverConfig},
	}
}

// Kinds returns the built-in enhancements with both halves, in identifier
// order.
func Kinds() []pkie.Kind {
	hs := halves()
	ks := builtin.Kinds()
	for i := range ks {
		hs[ks[i].ID].prove(&ks[i])
	}
	return ks
}

// Registry returns a new registry holding the built-in enhancements with
// both halves. Each call returns a registry of its own, so that what one
// caller registers beside them (an operator's own enhancement) is seen by
// no other and needs no change here.
func Registry() *pkie.Registry {
	r := &pkie.Registry{}
	for _, k := range Kinds() {
		if err := r.Register(k); err != nil {
			// The built-ins have distinct, valid identifiers and names.
			panic(fmt.Sprintf("provers: %v", err))
		}
	}
	return r
}

// CheckProverConfig checks the prover configuration of the built-in
// enhancement named name with its strict decoder and the checks its
// NewProver makes before any I/O: no TTP is contacted and nothing is
// created. It reports false when name is not a built-in.
func CheckProverConfig(name string, config json.RawMessage) (bool, error) {
	k, ok := builtin.Registry().ByName(name)
	if !ok || k.Name != name {
		return false, nil
	}
	return true, halves()[k.ID].check(config)
}
