package replay

import "testing"

func TestTargetKey(t *testing.T) {
	for _, tc := range []struct {
		h1   string
		p1   uint16
		h2   string
		p2   uint16
		same bool
	}{
		{"Dead.Test", 443, "dead.test", 443, true},
		{"EXAMPLE.com", 8443, "example.COM", 8443, true},
		{"dead.test", 443, "dead.test", 8443, false},
		{"a.test", 443, "b.test", 443, false},
		// A host ending in digits must not collide with another port.
		{"a.test:1", 443, "a.test", 1443, false},
	} {
		got := TargetKey(tc.h1, tc.p1) == TargetKey(tc.h2, tc.p2)
		if got != tc.same {
			t.Errorf("TargetKey(%q,%d) == TargetKey(%q,%d): %v, want %v (%q vs %q)",
				tc.h1, tc.p1, tc.h2, tc.p2, got, tc.same, TargetKey(tc.h1, tc.p1), TargetKey(tc.h2, tc.p2))
		}
	}
	if k := TargetKey("Dead.Test", 443); k != "dead.test:443" {
		t.Errorf("TargetKey = %q, want dead.test:443", k)
	}
}
