// Package builtin assembles the client halves of pkie's built-in
// enhancements: ct (0x0001), revocation (0x0002) and notary (0x0003), each
// with its verifier only. Clients (check, pec) start from Registry and may
// register their own enhancements beside them; the cloud's registry, which
// adds the provers, is internal/provers.Registry. Nothing here links a
// prover, a TTP, a store or a database driver.
package builtin

import (
	"fmt"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/pkies/revocation"
)

// Kinds returns the built-in enhancements' client halves in identifier
// order.
func Kinds() []pkie.Kind {
	return []pkie.Kind{ct.Kind(), revocation.Kind(), notary.Kind()}
}

// Registry returns a new registry holding the built-in enhancements. Each
// call returns a registry of its own, so that what one caller registers
// beside them is seen by no other.
func Registry() *pkie.Registry {
	r := &pkie.Registry{}
	for _, k := range Kinds() {
		if err := r.Register(k); err != nil {
			// The built-ins have distinct, valid identifiers and names.
			panic(fmt.Sprintf("builtin: %v", err))
		}
	}
	return r
}
