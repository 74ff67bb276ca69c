package option

import (
	"errors"
	"fmt"
	"testing"
)

func TestRename(t *testing.T) {
	flags := map[string]string{"Until": "--until", "From": "--from", "API": "--api"}
	for _, tc := range []struct {
		err        *Error
		text, flag string
	}{
		{Errorf("driver", []string{"Until", "From"}, "Until %v is not after From %v", "2s", "5s"),
			"driver: Until 2s is not after From 5s", "--until 2s is not after --from 5s"},
		{Errorf("driver", []string{"API"}, "API %q: want convergence or v1", "APIs"),
			`driver: API "APIs": want convergence or v1`, `--api "APIs": want convergence or v1`},
		{Errorf("driver", []string{"Hosts"}, "Hosts must be 1 to 254"),
			"driver: Hosts must be 1 to 254", "Hosts must be 1 to 254"}, // no flag given: the Go name stays
	} {
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
		if got := tc.err.Rename(flags); got != tc.flag {
			t.Errorf("Rename = %q, want %q", got, tc.flag)
		}
		var oe *Error
		if !errors.As(fmt.Errorf("wrapped: %w", tc.err), &oe) {
			t.Error("errors.As does not find the Error through a wrap")
		}
	}
}
