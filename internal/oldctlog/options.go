package oldctlog

import (
	"time"

	"github.com/pkie/pkie/internal/option"
)

// ServeOptions are what a serving command (pkie log serve) gives a log:
// its handler's bounds and how often it builds the sorted tree.
type ServeOptions struct {
	HandlerOptions
	// BuildInterval is how often Run builds, signs and appends the
	// sorted tree; keep it well under clients' maximum proof age.
	BuildInterval time.Duration
}

// Validate reports the first option of o that is out of range, as an
// *option.Error naming its fields. Unlike HandlerOptions, where zero
// takes the default, BodyTimeout must be given: a serving command's
// flag defaults to httplimit.DefaultBodyTimeout, and a zero typed there
// would otherwise silently mean it.
func (o *ServeOptions) Validate() error {
	switch {
	case o.BuildInterval <= 0 || o.BodyTimeout <= 0:
		return option.Errorf("ctlog", []string{"BuildInterval", "BodyTimeout"}, "BuildInterval and BodyTimeout must be positive")
	case o.MaxInFlight < 0 || o.MaxAddChain < 0 || o.MaxPerClient < 0:
		// Negative bounds once meant the defaults, silently.
		return option.Errorf("ctlog", []string{"MaxInFlight", "MaxAddChain", "MaxPerClient"}, "MaxInFlight, MaxAddChain and MaxPerClient must not be negative")
	}
	return nil
}
