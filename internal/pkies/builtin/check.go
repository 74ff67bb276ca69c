package builtin

import (
	"encoding/json"

	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/pkies/revocation"
)

// CheckProverConfig checks the prover configuration of the built-in
// enhancement named name with its strict decoder and the checks its
// NewProver makes before any I/O: no TTP is contacted and nothing is
// created. It reports false when name is not a built-in.
func CheckProverConfig(name string, config json.RawMessage) (bool, error) {
	check := map[string]func(json.RawMessage) error{
		ct.Name: ct.CheckProverConfig, revocation.Name: revocation.CheckProverConfig, notary.Name: notary.CheckProverConfig,
	}[name]
	if check == nil {
		return false, nil
	}
	return true, check(config)
}
