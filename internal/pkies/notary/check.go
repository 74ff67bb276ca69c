package notary

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pkie/pkie/internal/pkies/conf"
)

// CheckProverConfig checks a prover configuration as NewProver reads it,
// creating nothing.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("notary prover configuration: %w", err)
	}
	if c.MaxAge < 0 || c.ProbeTimeout < 0 || c.MaxProbes < 0 {
		return errors.New("notary prover configuration: max_age, probe_timeout and max_probes must not be negative")
	}
	return nil
}
