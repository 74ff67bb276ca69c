package treeproof

import (
	"strings"
	"testing"

	"github.com/pkie/pkie/checkpoint"
)

// TestCheckLogSize: a CT tree may hold up to two keys an entry (a final
// certificate with embedded SCTs logged as itself is also found by its
// precertificate's key); a revocation tree holds exactly one key an entry.
func TestCheckLogSize(t *testing.T) {
	for _, tc := range []struct {
		pkie       string
		keys, logs uint64
		want       string // "": accepted
	}{
		{CT, 5, 5, ""},
		{CT, 6, 5, ""},
		{CT, 10, 5, ""},
		{CT, 11, 5, "head of 11 keys bound to a log of only 5 entries"},
		{CT, 1, 0, "head of 1 keys bound to a log of only 0 entries"},
		{CT, 0, 0, ""},
		{Revocation, 3, 3, ""},
		{Revocation, 4, 3, "head of 4 revocations bound to a key log of 3"},
		{Revocation, 2, 3, "head of 2 revocations bound to a key log of 3"},
	} {
		h := &checkpoint.Head{Size: tc.keys}
		h.Log.Size = tc.logs
		err := CheckLogSize(tc.pkie, h)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %d keys, %d entries: %v", tc.pkie, tc.keys, tc.logs, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %d keys, %d entries: %v, want %q", tc.pkie, tc.keys, tc.logs, err, tc.want)
		}
	}
}
