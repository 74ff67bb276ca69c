package ct

import (
	"encoding/json"
	"fmt"

	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
)

// CheckProverConfig checks a prover configuration as NewProver reads it,
// without contacting the log.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("ct prover configuration: %w", err)
	}
	return treeproof.CheckMirrorConfig(treeproof.MirrorConfig{
		PKIE: prover.CT, URL: c.LogURL, Key: c.LogKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
	})
}
