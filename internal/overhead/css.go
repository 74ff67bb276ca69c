package overhead

import (
	"bytes"
	"net/url"
	"strings"
	"unicode/utf8"
)

// KindCSSURL is the kind of an object a stylesheet references with url():
// a background image, a font, a cursor. (A stylesheet it @imports has
// KindStylesheet.)
const KindCSSURL = "css-url"

// DefaultMaxImportDepth is how deep @import chains are followed: a
// stylesheet the HTML references is at depth 0, one it imports at depth 1,
// and imports deeper than this are not fetched.
const DefaultMaxImportDepth = 4

// ExtractCSSRefs returns the objects a stylesheet references — its @import
// rules (KindStylesheet) and its url() values (KindCSSURL) — resolved
// against base (the stylesheet's own URL after redirects), in source order,
// without duplicates, at most max of them (0 means no limit). Every
// returned Ref has CSS set.
//
// The stylesheet is tokenized as CSS Syntax Level 3 describes, so comments,
// strings, escapes (u\72l(…), url(a\)b.png)) and case (URL(…), @IMPORT) are
// read as a browser reads them and url( counts only where it begins a
// token. @import is honoured only where a browser honours it: at the top
// level, before any rule other than @charset and @layer statements, with a
// string or url() and ending in ";" (or the end of the sheet). url()s in
// @namespace rules name namespaces and are not fetched; data: and other
// non-http(s) URLs and fragment-only URLs (url(#filter), a reference into
// the document) fetch nothing and are skipped. The input is untrusted:
// malformed CSS yields whatever references can be recognised, never an
// error.
func ExtractCSSRefs(base *url.URL, css []byte, max int) []Ref {
	var refs []Ref
	seen := map[string]bool{}
	scanCSS(css, false, func(raw string, isImport bool) bool {
		if u := resolveCSSURL(base, raw); u != nil && !seen[u.String()] {
			seen[u.String()] = true
			kind := KindCSSURL
			if isImport {
				kind = KindStylesheet
			}
			refs = append(refs, Ref{URL: u, Kind: kind, CSS: true})
		}
		return max <= 0 || len(refs) < max
	})
	return refs
}

// resolveCSSURL resolves a url() or @import target as a browser would, or
// returns nil if it fetches nothing over the network.
func resolveCSSURL(base *url.URL, raw string) *url.URL {
	// The URL parser strips leading and trailing C0 controls and spaces.
	raw = strings.TrimFunc(raw, func(r rune) bool { return r <= ' ' })
	if raw == "" || raw[0] == '#' {
		// url() and url(#id) are not fetched: the first is invalid, the
		// second refers to an element of the document itself.
		return nil
	}
	u, err := base.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil
	}
	u.Fragment, u.RawFragment = "", ""
	return u
}

// cssTokenType is the type of a CSS token (CSS Syntax Level 3, §4), as far
// as finding references needs to tell them apart.
type cssTokenType int

const (
	cssEOF        cssTokenType = iota
	cssWhitespace              // also comments, which the tokenizer drops
	cssIdent
	cssFunction // name( — its closing ) is a separate token
	cssAtKeyword
	cssHash
	cssString
	cssBadString
	cssURL // url(…), unquoted, or url("…") with nothing but the string inside
	cssBadURL
	cssNumeric
	cssCDOCDC     // <!-- or -->
	cssOpen       // ( [ {
	cssClose      // ) ] }
	cssSemicolon  // ;
	cssDelimOther // any other single code point: , : > + …
)

type cssToken struct {
	typ cssTokenType
	val string // the name (ident, function, at-keyword) or the URL/string value, escapes decoded
	ch  byte   // the bracket of cssOpen and cssClose
}

// cssTokenizer splits a stylesheet into tokens. It works on bytes: every
// syntactically significant code point is ASCII, and other bytes (valid
// UTF-8 or not) are name code points, copied through.
type cssTokenizer struct {
	s []byte
	i int
}

func (z *cssTokenizer) at(k int) int {
	if z.i+k < len(z.s) {
		return int(z.s[z.i+k])
	}
	return -1 // EOF
}

func isNewline(c int) bool    { return c == '\n' || c == '\r' || c == '\f' }
func isWhitespace(c int) bool { return c == ' ' || c == '\t' || isNewline(c) }
func isDigit(c int) bool      { return c >= '0' && c <= '9' }
func isHex(c int) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
func isNameStart(c int) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80 || c == 0
}
func isName(c int) bool { return isNameStart(c) || isDigit(c) || c == '-' }

// Non-printable code points end an unquoted url() badly. (NUL is not one:
// the input's NULs stand for U+FFFD.)
func isNonPrintable(c int) bool {
	return (c >= 1 && c <= 8) || c == 0x0b || (c >= 0x0e && c <= 0x1f) || c == 0x7f
}

// writeByte appends one byte of the input, a NUL as the U+FFFD it stands
// for.
func writeByte(b *strings.Builder, c int) {
	if c == 0 {
		b.WriteRune(utf8.RuneError)
		return
	}
	b.WriteByte(byte(c))
}

func validEscape(c0, c1 int) bool { return c0 == '\\' && !isNewline(c1) }

func (z *cssTokenizer) startsIdent(k int) bool {
	c0, c1, c2 := z.at(k), z.at(k+1), z.at(k+2)
	switch {
	case c0 == '-':
		return isNameStart(c1) || c1 == '-' || validEscape(c1, c2)
	case isNameStart(c0):
		return true
	case c0 == '\\':
		return validEscape(c0, c1)
	}
	return false
}

func (z *cssTokenizer) startsNumber(k int) bool {
	c0, c1, c2 := z.at(k), z.at(k+1), z.at(k+2)
	switch {
	case c0 == '+' || c0 == '-':
		return isDigit(c1) || (c1 == '.' && isDigit(c2))
	case c0 == '.':
		return isDigit(c1)
	}
	return isDigit(c0)
}

// escape consumes an escape whose backslash has been consumed and appends
// the code point it stands for.
func (z *cssTokenizer) escape(b *strings.Builder) {
	c := z.at(0)
	switch {
	case c < 0:
		b.WriteRune(utf8.RuneError)
	case isHex(c):
		v := 0
		for n := 0; n < 6 && isHex(z.at(0)); n++ {
			h := z.at(0)
			switch {
			case isDigit(h):
				h -= '0'
			case h >= 'a':
				h -= 'a' - 10
			default:
				h -= 'A' - 10
			}
			v = v*16 + h
			z.i++
		}
		// One whitespace after a hex escape belongs to it (CR LF is one).
		if z.at(0) == '\r' && z.at(1) == '\n' {
			z.i += 2
		} else if isWhitespace(z.at(0)) {
			z.i++
		}
		if v == 0 || (v >= 0xd800 && v <= 0xdfff) || v > utf8.MaxRune {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteRune(rune(v))
		}
	case c == 0:
		b.WriteRune(utf8.RuneError)
		z.i++
	default:
		// The escaped code point itself, whole if it is multi-byte.
		_, n := utf8.DecodeRune(z.s[z.i:])
		b.Write(z.s[z.i : z.i+n])
		z.i += n
	}
}

// name consumes a run of name code points and escapes.
func (z *cssTokenizer) name() string {
	var b strings.Builder
	for {
		c := z.at(0)
		switch {
		case isName(c):
			writeByte(&b, c)
			z.i++
		case validEscape(c, z.at(1)):
			z.i++
			z.escape(&b)
		default:
			return b.String()
		}
	}
}

// str consumes a string whose opening quote has been consumed.
func (z *cssTokenizer) str(quote int) cssToken {
	var b strings.Builder
	for {
		c := z.at(0)
		switch {
		case c < 0:
			return cssToken{typ: cssString, val: b.String()} // EOF closes it
		case c == quote:
			z.i++
			return cssToken{typ: cssString, val: b.String()}
		case isNewline(c):
			// An unescaped newline makes a bad string; the newline is
			// left for the next token.
			return cssToken{typ: cssBadString}
		case c == '\\':
			z.i++
			switch n := z.at(0); {
			case n < 0:
			case n == '\r' && z.at(1) == '\n':
				z.i += 2 // a line continuation
			case isNewline(n):
				z.i++
			default:
				z.escape(&b)
			}
		default:
			writeByte(&b, c)
			z.i++
		}
	}
}

func (z *cssTokenizer) skipWhitespace() {
	for isWhitespace(z.at(0)) {
		z.i++
	}
}

// unquotedURL consumes the rest of url( whose "url(" and leading whitespace
// have been consumed.
func (z *cssTokenizer) unquotedURL() cssToken {
	var b strings.Builder
	for {
		c := z.at(0)
		switch {
		case c < 0:
			return cssToken{typ: cssURL, val: b.String()}
		case c == ')':
			z.i++
			return cssToken{typ: cssURL, val: b.String()}
		case isWhitespace(c):
			z.skipWhitespace()
			if z.at(0) == ')' || z.at(0) < 0 {
				continue
			}
			z.badURLRemnants()
			return cssToken{typ: cssBadURL}
		case c == '"' || c == '\'' || c == '(' || isNonPrintable(c):
			z.badURLRemnants()
			return cssToken{typ: cssBadURL}
		case c == '\\':
			if !validEscape(c, z.at(1)) {
				z.badURLRemnants()
				return cssToken{typ: cssBadURL}
			}
			z.i++
			z.escape(&b)
		default:
			writeByte(&b, c)
			z.i++
		}
	}
}

// badURLRemnants skips to the end of a bad url(…): its ")" (an escaped one
// does not count) or the end of the input.
func (z *cssTokenizer) badURLRemnants() {
	for {
		c := z.at(0)
		switch {
		case c < 0:
			return
		case c == ')':
			z.i++
			return
		case validEscape(c, z.at(1)):
			z.i++
			var discard strings.Builder
			z.escape(&discard)
		default:
			z.i++
		}
	}
}

// identLike consumes an ident, a function token or a url(…).
func (z *cssTokenizer) identLike() cssToken {
	name := z.name()
	if z.at(0) != '(' {
		return cssToken{typ: cssIdent, val: name}
	}
	z.i++
	if !strings.EqualFold(name, "url") {
		return cssToken{typ: cssFunction, val: name}
	}
	z.skipWhitespace()
	if q := z.at(0); q == '"' || q == '\'' {
		// url("…") is a function holding a string; as a reference it
		// counts only with nothing else inside (no url modifiers, which
		// no browser supports).
		z.i++
		s := z.str(q)
		if s.typ == cssString {
			save := z.i
			z.skipWhitespace()
			switch z.at(0) {
			case ')':
				z.i++
				return cssToken{typ: cssURL, val: s.val}
			case -1:
				return cssToken{typ: cssURL, val: s.val}
			}
			z.i = save
		}
		return cssToken{typ: cssFunction, val: name}
	}
	return z.unquotedURL()
}

func (z *cssTokenizer) numeric() cssToken {
	if c := z.at(0); c == '+' || c == '-' {
		z.i++
	}
	for isDigit(z.at(0)) {
		z.i++
	}
	if z.at(0) == '.' && isDigit(z.at(1)) {
		z.i++
		for isDigit(z.at(0)) {
			z.i++
		}
	}
	if c := z.at(0); c == 'e' || c == 'E' {
		if isDigit(z.at(1)) || ((z.at(1) == '+' || z.at(1) == '-') && isDigit(z.at(2))) {
			z.i += 2
			for isDigit(z.at(0)) {
				z.i++
			}
		}
	}
	switch {
	case z.startsIdent(0):
		z.name() // a dimension's unit: 10url(x) is not a url
	case z.at(0) == '%':
		z.i++
	}
	return cssToken{typ: cssNumeric}
}

// next returns the next token, comments skipped as whitespace.
func (z *cssTokenizer) next() cssToken {
	c := z.at(0)
	switch {
	case c < 0:
		return cssToken{typ: cssEOF}
	case c == '/' && z.at(1) == '*':
		end := bytes.Index(z.s[z.i+2:], []byte("*/"))
		if end < 0 {
			z.i = len(z.s) // an unterminated comment runs to the end
		} else {
			z.i += 2 + end + 2
		}
		return cssToken{typ: cssWhitespace}
	case isWhitespace(c):
		z.skipWhitespace()
		return cssToken{typ: cssWhitespace}
	case c == '"' || c == '\'':
		z.i++
		return z.str(c)
	case c == '#':
		if isName(z.at(1)) || validEscape(z.at(1), z.at(2)) {
			z.i++
			return cssToken{typ: cssHash, val: z.name()}
		}
	case c == '(' || c == '[' || c == '{':
		z.i++
		return cssToken{typ: cssOpen, ch: byte(c)}
	case c == ')' || c == ']' || c == '}':
		z.i++
		return cssToken{typ: cssClose, ch: byte(c)}
	case c == ';':
		z.i++
		return cssToken{typ: cssSemicolon}
	case c == '+' || c == '.':
		if z.startsNumber(0) {
			return z.numeric()
		}
	case c == '-':
		switch {
		case z.startsNumber(0):
			return z.numeric()
		case z.at(1) == '-' && z.at(2) == '>':
			z.i += 3
			return cssToken{typ: cssCDOCDC}
		case z.startsIdent(0):
			return z.identLike()
		}
	case c == '<':
		if z.at(1) == '!' && z.at(2) == '-' && z.at(3) == '-' {
			z.i += 4
			return cssToken{typ: cssCDOCDC}
		}
	case c == '@':
		if z.startsIdent(1) {
			z.i++
			return cssToken{typ: cssAtKeyword, val: z.name()}
		}
	case c == '\\':
		if validEscape(c, z.at(1)) {
			return z.identLike()
		}
	case isDigit(c):
		return z.numeric()
	case isNameStart(c):
		return z.identLike()
	}
	z.i++
	return cssToken{typ: cssDelimOther}
}

// scanCSS reports, in source order, every URL css fetches: emit(raw, true)
// for an @import's target and emit(raw, false) for a url(), raw being the
// URL as written (escapes decoded, not yet resolved). decls says css is a
// declaration list (an HTML style attribute), where no @import is valid.
// Scanning stops when emit returns false.
//
// Above the tokenizer sits just enough of the parser to know where
// @import is honoured and which url()s belong to rules a browser drops:
// a statement (rule or declaration) ends at ";" or at the "}" closing its
// block, outside any ( or [; @import, @namespace and @charset rules, and
// any @import that is misplaced, fetch nothing, and when such a rule
// carries a {block} the block goes with it.
func scanCSS(css []byte, decls bool, emit func(raw string, isImport bool) bool) {
	z := &cssTokenizer{s: css}
	var stack []byte       // closers of the open ( [ { blocks
	importsOK := !decls    // no rule other than @charset/@layer/@import seen yet
	stmtStart := true      // the next significant token starts a statement
	var stmt string        // at-rule that started the current statement, lower-cased; "" for others
	var importURL string   // the current @import's target
	importBad := false     // the current @import is malformed or misplaced
	stmtDepth := 0         // len(stack) where the current statement started
	dropUntil := -1        // inside a dropped rule's block: skip until the stack shrinks back to this
	haveImportURL := false // the current @import's URL has been read
	inBrackets := func() bool { return len(stack) > stmtDepth }
	endStatement := func() bool {
		ok := true
		if stmt == "import" && !importBad && haveImportURL {
			ok = emit(importURL, true)
		}
		stmt, importBad, haveImportURL, stmtStart = "", false, false, true
		return ok
	}
	for {
		t := z.next()
		if t.typ == cssEOF {
			if dropUntil < 0 {
				endStatement() // EOF closes every open block and statement
			}
			return
		}
		if dropUntil >= 0 {
			// Inside the block of a dropped rule: only track nesting.
			switch t.typ {
			case cssOpen:
				stack = append(stack, closerOf(t.ch))
			case cssFunction:
				stack = append(stack, ')')
			case cssClose:
				if len(stack) > 0 && stack[len(stack)-1] == t.ch {
					stack = stack[:len(stack)-1]
				}
				if len(stack) == dropUntil {
					dropUntil = -1
					stmtStart = true
				}
			}
			continue
		}
		if t.typ == cssWhitespace {
			continue
		}
		if stmtStart {
			stmtStart = false
			stmtDepth = len(stack)
			switch {
			case t.typ == cssCDOCDC && len(stack) == 0 && !decls:
				stmtStart = true // <!-- and --> are ignored between top-level rules
				continue
			case t.typ == cssAtKeyword:
				stmt = strings.ToLower(t.val)
				switch stmt {
				case "import":
					importBad = !importsOK || len(stack) > 0
				case "charset", "layer":
				default:
					importsOK = false
				}
				continue
			default:
				importsOK = false
			}
		}
		if stmt == "import" && !haveImportURL && !importBad {
			// The first thing after @import must be its URL.
			switch t.typ {
			case cssString, cssURL:
				importURL, haveImportURL = t.val, true
				continue
			default:
				importBad = true
			}
		}
		switch t.typ {
		case cssURL:
			switch stmt {
			case "import", "namespace", "charset":
			default:
				if !emit(t.val, false) {
					return
				}
			}
		case cssFunction:
			stack = append(stack, ')')
		case cssOpen:
			if t.ch == '{' && !inBrackets() {
				// The statement's block.
				if stmt == "import" || stmt == "namespace" || stmt == "charset" {
					dropUntil = len(stack)
					stmt, importBad, haveImportURL = "", false, false
				} else {
					stmt = ""
				}
				importsOK = false
				stack = append(stack, '}')
				if dropUntil < 0 {
					stmtStart = true // the block holds statements of its own
				}
				continue
			}
			stack = append(stack, closerOf(t.ch))
		case cssClose:
			if len(stack) == 0 || stack[len(stack)-1] != t.ch {
				continue // a stray closer is an ordinary token
			}
			closesBlock := t.ch == '}' && len(stack) == stmtDepth
			stack = stack[:len(stack)-1]
			if closesBlock {
				// The "}" closing the block this statement is in ends it
				// too (a last declaration needs no ";").
				if !endStatement() {
					return
				}
				stmtDepth = len(stack)
			} else if len(stack) < stmtDepth {
				stmtDepth = len(stack)
			}
		case cssSemicolon:
			if !inBrackets() {
				if !endStatement() {
					return
				}
			}
		}
	}
}

func closerOf(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}
