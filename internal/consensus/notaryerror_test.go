package consensus

import (
	"strconv"
	"strings"
	"testing"
)

// TestNotaryError: what a verdict repeats of a notary's error body is its
// message, printable and bounded, whichever notary wrote it.
func TestNotaryError(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error":"resolving site.test: no such host"}`, "resolving site.test: no such host"},
		{"{\"error\":\"a\\u0007b\\nc\\u001b[31m\"}", "a b c [31m"},
		{"<html><body>Error retrieving records.</body></html>", "Error retrieving records."},
		{"", ""},
	} {
		if got := notaryError([]byte(tc.body)); got != tc.want {
			t.Errorf("notaryError(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
	long := notaryError([]byte(strings.Repeat("x", 5000)))
	if len(long) > maxNotaryError+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("a 5,000-byte body is shown as %d bytes", len(long))
	}
}

func FuzzNotaryError(f *testing.F) {
	f.Add([]byte(`{"error":"x"}`))
	f.Add([]byte("<html>x</html>"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := notaryError(body)
		if len(s) > maxNotaryError+len("…") {
			t.Fatalf("%d bytes", len(s))
		}
		for _, r := range s {
			if !strconv.IsPrint(r) {
				t.Fatalf("unprintable %q in %q", r, s)
			}
		}
	})
}
