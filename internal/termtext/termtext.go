// Package termtext guards a terminal against text from remote parties.
//
// A cloud, a notary or a TLS server chooses some of the text pkie prints:
// a cloud's reason for a missing proof, a notary's error body, the names
// in a server's certificate. Printed as is, control characters in it
// would drive the user's terminal (ANSI escape sequences can move the
// cursor, erase lines, set the title) and line breaks or bidirectional
// overrides could forge lines of a verdict. The wire decoders refuse such
// text (Check); printers escape whatever else reaches them (Escape).
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal: the C0 controls
// (tab and newline included: one message is one line), DEL, the C1
// controls (U+0080–U+009F; U+009B is a one-character CSI to some
// terminals), the line and paragraph separators, and the Unicode
// bidirectional formatting characters, which reorder what follows them
// on screen (Unicode Standard Annex #9: the marks U+061C, U+200E, U+200F,
// the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Check returns an error if s is not valid UTF-8 or holds an Unsafe
// character.
func Check(s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
		}
		if Unsafe(r) {
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	return nil
}

// Escape returns s with each Unsafe character and each byte of invalid
// UTF-8 replaced by its Go escape (\n, \x1b, \u202e, \xff), so the reader
// sees that it was there and the terminal does not act on it. It returns
// s itself when there is nothing to escape.
func Escape(s string) string {
	if Check(s) == nil {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case Unsafe(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}
