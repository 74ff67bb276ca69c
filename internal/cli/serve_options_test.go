package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLogServeOptions: log serve's flags are checked by
// ctlog.ServeOptions.Validate before the port is bound or the log opened
// (here its directory does not exist), in the flags' names.
func TestLogServeOptions(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--body-timeout", "0s"}, "--body-timeout must be positive"},
		// Negative bounds were taken as the defaults, silently.
		{[]string{"--max-in-flight", "-1"}, "--max-in-flight, --max-add-chain, --max-in-flight-per-ip and --checkpoint-interval must not be negative"},
		{[]string{"--not-after-start", "tomorrow"}, "--not-after-start: want an RFC 3339 time"},
		{[]string{"--not-after-start", "2027-01-01T00:00:00Z", "--not-after-limit", "2026-01-01T00:00:00Z"}, "--not-after-start must be before --not-after-limit"},
		{[]string{"--eku", "codeSigning"}, "--eku: want any or serverAuth"},
		{[]string{"--max-in-flight-per-ip", "-4"}, "must not be negative"},
	} {
		code, out, errs := runCLI(t, append([]string{"log", "serve", "--data", none, "--listen", "127.0.0.1:0"}, tt.args...)...)
		if code != ExitUsage || out != "" || !strings.HasPrefix(errs, "pkie log: ") || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tt.args, code, errs, tt.want)
		}
	}
}
