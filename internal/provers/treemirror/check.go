package treemirror

import (
	"fmt"
	"net/url"

	"github.com/pkie/pkie/checkpoint"
)

// CheckMirrorConfig checks c as NewProver would, without contacting the
// TTP: a URL that can be fetched, a key that parses, no negative
// durations. `pkie cloud init` runs it so that a bad configuration is
// refused when it is written, not at the first serve.
func CheckMirrorConfig(c MirrorConfig) error {
	if c.URL == "" || c.Key == "" {
		return fmt.Errorf("%s prover: the TTP's URL and its pinned key are both required", c.PKIE)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s prover: TTP URL %q is not an http or https URL", c.PKIE, c.URL)
	}
	if c.Interval < 0 || c.MaxAge < 0 {
		return fmt.Errorf("%s prover: sync interval and maximum age must be positive", c.PKIE)
	}
	if _, err := checkpoint.NewVerifier(c.Key); err != nil {
		return fmt.Errorf("%s prover: TTP key: %w", c.PKIE, err)
	}
	return nil
}
