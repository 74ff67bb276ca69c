package revocation

import (
	"encoding/json"
	"fmt"

	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
)

// CheckProverConfig checks a prover configuration as NewProver reads it,
// without contacting the authority.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("revocation prover configuration: %w", err)
	}
	return treeproof.CheckMirrorConfig(treeproof.MirrorConfig{
		PKIE: prover.Revocation, URL: c.AuthorityURL, Key: c.AuthorityKey, Interval: c.SyncInterval.D(), MaxAge: c.MaxAge.D(),
	})
}
