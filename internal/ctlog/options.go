package ctlog

import (
	"time"

	"github.com/pkie/pkie/internal/option"
)

// ServeOptions are what a serving command (pkie log serve) gives a log
// beyond its storage: its handler's bounds, its acceptance policy and how
// often it signs a grown tree.
type ServeOptions struct {
	HandlerOptions
	Policy Policy
	// CheckpointInterval is Options.CheckpointInterval.
	CheckpointInterval time.Duration
}

// Validate reports the first option of o that is out of range, as an
// *option.Error naming its fields. Unlike HandlerOptions, where zero takes
// the default, BodyTimeout must be given: a serving command's flag
// defaults to httplimit.DefaultBodyTimeout, and a zero typed there would
// otherwise silently mean it.
func (o *ServeOptions) Validate() error {
	switch {
	case o.BodyTimeout <= 0:
		return option.Errorf("ctlog", []string{"BodyTimeout"}, "BodyTimeout must be positive")
	case o.MaxInFlight < 0 || o.MaxAddChain < 0 || o.MaxPerClient < 0 || o.CheckpointInterval < 0:
		// Negative bounds once meant the defaults, silently.
		return option.Errorf("ctlog", []string{"MaxInFlight", "MaxAddChain", "MaxPerClient", "CheckpointInterval"},
			"MaxInFlight, MaxAddChain, MaxPerClient and CheckpointInterval must not be negative")
	case !o.Policy.NotAfterStart.IsZero() && !o.Policy.NotAfterLimit.IsZero() && !o.Policy.NotAfterStart.Before(o.Policy.NotAfterLimit):
		return option.Errorf("ctlog", []string{"NotAfterStart", "NotAfterLimit"}, "NotAfterStart must be before NotAfterLimit")
	}
	return nil
}
