package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"proof from cloud a (3 ms)", "proof from cloud a (3 ms)"},
		{"héllo — ✓", "héllo — ✓"},
		{"\x1b[2K\rgood.test  TRUSTED", `\x1b[2K\rgood.test  TRUSTED`},
		{"a\nb\tc\x00d\x7fe", `a\nb\tc\x00d\x7fe`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"\u2066x\u2069\u200e\u200f\u061c\u2028\u2029", `\u2066x\u2069\u200e\u200f\u061c\u2028\u2029`},
		{"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if err := Check(tc.in); (err == nil) != (tc.in == tc.want) {
			t.Errorf("Check(%q) = %v", tc.in, err)
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[31mred\u202e\n")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if err := Check(e); err != nil {
			t.Fatalf("Escape(%q) = %q: %v", s, e, err)
		}
		if Check(s) == nil && e != s {
			t.Fatalf("Escape changed safe %q to %q", s, e)
		}
		if !utf8.ValidString(e) || strings.ContainsAny(e, "\n\r\x1b") {
			t.Fatalf("Escape(%q) = %q", s, e)
		}
	})
}
