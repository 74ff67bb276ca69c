package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOBCUsage: bad arguments to "pkie obc", whose subcommands come from
// two families (client and serve), are refused with a message naming them.
func TestOBCUsage(t *testing.T) {
	store := filepath.Join(t.TempDir(), "obc.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"obc"}, "want a subcommand"},
		{[]string{"obc", "frob"}, "unknown subcommand \"frob\"; want get, list, forget, serve"},
		{[]string{"obc", "get", "http://a.test/", "--store", store}, "carries no TLS client certificate"},
		{[]string{"obc", "get", "https://a.test/", "--store", store, "--alg", "sect163k1"}, "--alg"},
		{[]string{"obc", "get", "https://a.test/", "--store", store, "--mode", "loose"}, "--mode"},
		{[]string{"obc", "get", "https://a.test/", "--store", store, "--pool", "-1"}, "negative"},
		{[]string{"obc", "list", "--store", store}, "no store at"},
		{[]string{"obc", "forget", "--store", store}, "want exactly one ORIGIN or SCOPE"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
